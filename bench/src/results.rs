//! `bench/results.json`: the run's figures as one flat JSON object of numbers under stable
//! names, so a figure can be compared from run to run (the open issues state their goals in
//! these names), and `_meta`, what run made them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::report::Results;
use crate::{Stat, baselines};

/// Every name the file can hold, with what it measures (`{size}`: 1k, 10k, 100k — the sizes
/// run; `{function}`: a function's short name). BENCHMARKS.md and the README list them.
pub(crate) const NAMES: [(&str, &str); 65] = [
    (
        "update_1_field_wcu_f5",
        "write capacity units of a 1-field issue update, the PATCH request's and the indexer's together, in a project with 5 custom fields (100 issues, each updated once)",
    ),
    (
        "update_1_field_wcu_f55",
        "the same in a project with 55 custom fields",
    ),
    (
        "update_1_field_wcu_f{fields}_thin",
        "the same with every index entry thin (`Indexer::without_summaries`: the design before summaries in the index), in its own project of 100 issues with 5 or 55 custom fields",
    ),
    (
        "grid_page_f{fields}_rcu_issues",
        "the read units (all but the display names) of a warm grid page of 50 open issues by a custom field in that project of 100 issues, after its updates, with summaries in the entries: at 55 fields the figure for wide issues (the cost does not depend on the project's size: see `grid_page_custom_field_{size}_rcu_issues`)",
    ),
    (
        "grid_page_f{fields}_rcu_issues_thin",
        "the same page with every entry thin",
    ),
    (
        "grid_page_f{fields}_calls",
        "that page's DynamoDB calls with summaries (the names' read included)",
    ),
    (
        "summaries_break_even_page_views_per_update_f{fields}",
        "page views per issue update at which summaries in the index pay for themselves: the write units they add per update (`update_1_field_wcu_f{fields}` minus its `_thin`) at five read units each, over the read units they save per page (`grid_page_f{fields}_rcu_issues_thin` minus `grid_page_f{fields}_rcu_issues`); absent when they save nothing",
    ),
    (
        "index_core_records_per_s",
        "the indexer's pure core, one core, no I/O: stream records decoded into the indexer's records (`index::event`), each batch of 100 just before its core runs as in the function, only the core timed → `plan`, `Basis::of_record` and `Watermark::step` against each issue's watermark held in memory (the writes to make and the intent); the records of a seed of 5,000 issues, then one 1-field update of each; the fastest of 5 passes",
    ),
    (
        "index_core_with_json_records_per_s",
        "the same from each batch's Lambda event JSON, decoded as the function decodes it (`index::event`, strings borrowed)",
    ),
    (
        "index_core_streamed_records_per_s",
        "the pure core over every batch decoded beforehand, its records streamed from memory (how runs before 2026-11-25 measured `index_core_records_per_s`)",
    ),
    (
        "get_issue_with_10_relations_calls",
        "DynamoDB calls of `GET /issues/{id}` for an issue with 10 relations (the other issues' titles and states read with it), at the largest size run",
    ),
    ("get_issue_with_10_relations_rcu", "its read capacity units"),
    (
        "children_page_{size}_calls",
        "DynamoDB calls of `GET /issues/{id}/children?limit=50` for a parent of 200 sub-issues (every state), names included",
    ),
    ("children_page_{size}_rcu", "its read capacity units"),
    (
        "set_parent_wcu",
        "write capacity units of a `PATCH` setting an issue's parent at depth 3 (the issue's update, the child edge, the parent's mark and the project's tree revision in one transaction, 2 units per KB of each; and the indexer's share is not in it), at the largest size run",
    ),
    (
        "comment_create_wcu",
        "write capacity units of a `POST /issues/{id}/comments` of ~300 characters: a transaction of the comment's put and the issue's `comment_count`, 2 units per KB of each, at the largest size run",
    ),
    (
        "comments_page_calls",
        "DynamoDB calls of `GET /issues/{id}/comments?limit=50` for an issue with 60 comments of ~300 characters by 5 authors, names included, at the largest size run",
    ),
    ("comments_page_rcu", "its read capacity units"),
    (
        "history_page_calls",
        "DynamoDB calls of `GET /issues/{id}/history?limit=50` for an issue with 61 versions (the index's Query from the issue's watermark head down), at the largest size run",
    ),
    ("history_page_rcu", "its read capacity units"),
    (
        "relate_wcu",
        "write capacity units of a `PUT /issues/{id}/relations/{kind}/{other_id}` of a new pair: a transaction of both issues' updates (each billed on the issue item's size) and both edges, 2 units per KB of each, at the largest size run",
    ),
    (
        "indexer_issues_per_s_per_shard_5ms",
        "issues indexed per second through one stream poller (one shard) with each of the indexer's DynamoDB calls delayed 5 ms, about a round trip within a region",
    ),
    (
        "index_e2e_{size}_records_per_s",
        "stream records indexed per second while the seed's stream is drained (the real handler, the local poller, the embedded engine)",
    ),
    (
        "grid_page_custom_field_{size}_calls",
        "DynamoDB calls of a grid page of 50 open issues sorted by a custom field (the `grid page by custom field` row), the display-name read included (runs before 2026-11-25 read a page of every state: one scope then held them all)",
    ),
    (
        "grid_page_custom_field_{size}_rcu_issues",
        "its read capacity units, all but the display names' read (the meter tells it apart: a Query of a tenant's directory, or a BatchGetItem whose keys are all directory entries, profiles or teams)",
    ),
    (
        "grid_page_custom_field_{size}_rcu_total",
        "its read capacity units with the display names' (the page as a client pays for it)",
    ),
    (
        "filter_page_{size}_rcu_total",
        "read capacity units per full page of 50 matches of an ad hoc filter about 1 % of the issues meet (`Points` in [-50, -37.5)), open issues sorted by another custom field (`Due`): the `grid page with a filter 1 % of issues meet` row's read units per API page (each reads at most 1,000 entries, so most hold fewer than 50 items) times 50 over its items per page; display names included (runs before 2026-11-27 read every state)",
    ),
    (
        "filter_page_{size}_calls",
        "DynamoDB calls per full page of 50 matches of that filter, counted the same way",
    ),
    (
        "view_page_{size}_calls",
        "DynamoDB calls of a page (up to 50 items) of the saved view of the same filter, state and sort (the `view page` row), averaged over its pages: a warm page is its list's Query and the display names' read, and an instance reads the view and its project again at most every 2 s",
    ),
    (
        "view_page_{size}_rcu_total",
        "its read capacity units, display names included",
    ),
    (
        "filter_to_view_{size}_rcu_ratio",
        "the ad hoc filter's read units per 50 matches over the view's (its page's read units times 50 over its items per page): how many times less the saved view reads",
    ),
    (
        "view_build_{size}_seconds",
        "seconds from the `POST /projects/{id}/views` of that view on the seeded project until it is ready: the stream indexer's one job message, then the field job re-indexing every issue (checkpointed, continued in a new message when its time runs low); absent when the job did not finish",
    ),
    (
        "option_reorder_{size}_seconds",
        "seconds from a `PATCH` that reverses the seeded project's `Priority` options (a select field) until the field is sortable again: the stream indexer's one job message, then the Edit job re-indexing every issue (checkpointed, continued in a new message when its time runs low); absent when the job did not finish",
    ),
    (
        "project_delete_{size}_seconds",
        "seconds from `DELETE /projects/{id}` of the seeded project until nothing of it is left: its purge job's pages (each issue deleted as `DELETE /issues/{id}` does), checkpointed, and the stream indexer's clean-up of every deleted issue, until both are idle; absent when the job did not finish",
    ),
    (
        "project_delete_{size}_wcu",
        "write capacity units of that purge: the job's and the indexer's together",
    ),
    (
        "membership_check_rcu_per_request",
        "read units of the per-request membership check on a workspace's tenant, per request, on a warm instance: `GET /projects` by one caller, 20 a second for 10 s, metered on a workspace's tenant and on an operator's, the difference over the requests (goal ≤ 0.1)",
    ),
    (
        "view_counts_calls",
        "DynamoDB calls of reading a board's counts (a view grouped by a 10-option select field, 1,000 issues, every count shard holding every group): the Query of its count items",
    ),
    ("view_counts_rcu", "its read capacity units"),
    (
        "view_get_calls",
        "DynamoDB calls of that board's `GET /views/{id}`: its item and its project's definitions (at once), then the counts' Query",
    ),
    ("view_get_rcu", "its read capacity units"),
    (
        "update_1_field_wcu_f5_views_0",
        "`update_1_field_wcu_f5`'s measure run again, no view on the project",
    ),
    (
        "update_1_field_wcu_f5_views_10",
        "the same with 10 saved views on the project, each update taking its issue out of one view and into another (the other 8 hold none of its issues): the entries' delete and put, and the count items updated in one transaction with the watermark's head",
    ),
    (
        "grid_page_all_states_{size}_calls",
        "DynamoDB calls of a grid page of 50 issues of every state sorted by a custom field (the `grid page by custom field, every state` row): the `open` and `closed` scopes read at once and merged",
    ),
    (
        "grid_page_all_states_{size}_rcu_issues",
        "its read capacity units, all but the display names'",
    ),
    (
        "grid_page_all_states_{size}_rcu_total",
        "its read capacity units with the display names'",
    ),
    (
        "grid_page_custom_field_{size}_rcu_names",
        "the display names' read units of that page (one Query of the tenant's directory while it holds at most 250 entries, else one BatchGetItem of the page's distinct people; runs before 2026-11-26 read a BatchGetItem of their profiles and teams; the seed's mix: 50 people and 5 teams, so nearly every issue names people no other issue on the page does)",
    ),
    (
        "grid_page_team_of_12_{size}_rcu_names",
        "the same for a project whose issues involve a team of 12 people and 2 teams (1,000 issues of another tenant, seeded beside the benchmark's project)",
    ),
    (
        "gsi_filter_{size}_rcu_per_page_missing_{density}",
        "the GSI + FilterExpression design's read units per page of 50 over a whole listing with `{density}` percent (5, 20, 80) of the issues missing the value: its GSI page of values (one Query of the GSI) for a share of 1 − density of the pages, its page of missing values (the base partition read with `attribute_not_exists` until 50 match) for the rest; compare with `grid_page_all_states_{size}_rcu_issues` (a page of every state, as the GSI design's), whose cost does not depend on the density",
    ),
    (
        "inbox_me_{size}_calls",
        "DynamoDB calls of a page of `/me/issues` (the `my issues` row)",
    ),
    (
        "inbox_me_{size}_rcu_issues",
        "its read capacity units, all but the display names'",
    ),
    (
        "inbox_me_{size}_rcu_total",
        "its read capacity units with the display names'",
    ),
    (
        "inbox_my_teams_{size}_calls",
        "DynamoDB calls of a page of `/me/teams/issues`, the caller in 5 teams (the `my teams' issues` row)",
    ),
    (
        "inbox_my_teams_{size}_rcu_issues",
        "its read capacity units, all but the display names'",
    ),
    (
        "inbox_my_teams_{size}_rcu_total",
        "its read capacity units with the display names'",
    ),
    (
        "create_{size}_calls",
        "DynamoDB calls of one `POST /projects/{id}/issues` (title and one field value, no description, no `Idempotency-Key`; the `create issue` row): the project's fields read, the number taken, the issue put",
    ),
    ("create_{size}_wcu", "its write capacity units"),
    (
        "create_concurrent_50_calls_per_create",
        "DynamoDB calls per create, retries included, of 50 creates sent at once on one project (the `create issue, 50 at once` row), at the largest size run (the counter does not depend on the project's size)",
    ),
    (
        "create_concurrent_50_p99_ms",
        "the 99th percentile of those 50 creates' latencies (with 50, the slowest), in milliseconds, on the local stack",
    ),
    (
        "field_add_{size}_request_calls",
        "DynamoDB calls of the `POST /projects/{id}/fields` request that adds a field to the seeded project",
    ),
    (
        "field_add_{size}_index_seconds",
        "seconds from that request's answer until the field is sortable: the stream indexer's one job message, then the field job's pages as the job function runs them (checkpointed, continued in a new message when its time runs low); absent when the job did not finish, and `_meta.omitted` says why",
    ),
    (
        "hot_project_updates_per_s_per_partition",
        "at 2,000 issue updates/s of one project whose columns are split in 4 shards: the updates per second that write to its busiest column partition (a partition-load simulation from metered writes: 400 1-field updates of random issues of a 1,000-issue project, each indexed on its own and its writes attributed to it, scaled to 2,000/s)",
    ),
    (
        "hot_project_updates_per_s_per_partition_{shards}_shards",
        "the same with the columns in 1, 4 and 8 shards",
    ),
    (
        "hot_project_wcu_per_s_per_partition_{shards}_shards",
        "the write capacity units per second the busiest column partition takes in that simulation (an update moves its `updated_at` entry: a delete and a put in the same partition; DynamoDB's limit is 1,000 per partition)",
    ),
    (
        "binary_{function}_bytes",
        "the function's binary size, as `--binaries` holds it (release, for the host)",
    ),
    (
        "init_{function}_ms",
        "its init time, median of 10 (see Functions)",
    ),
];

/// How a project size appears in a name: 1000 → `1k`.
pub(crate) fn size_label(n: u64) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// Read capacity units of an operation, all but the display names'.
pub(crate) fn rcu_issues(s: &Stat) -> f64 {
    s.capacity - s.write_capacity - s.names_capacity
}

/// The GSI design's read units per page over a whole listing at `density` percent missing:
/// its pages of values (a share of 1 − density) and of missing values (the rest), each as
/// measured; `None` if either was not.
pub(crate) fn gsi_per_page(patterns: &BTreeMap<&'static str, Stat>, density: u8) -> Option<f64> {
    let values = patterns.get(baselines::GSI_VALUES)?;
    let missing = patterns.get(baselines::gsi_missing_row(density))?;
    let d = f64::from(density) / 100.0;
    Some((1.0 - d) * rcu_issues(values) + d * rcu_issues(missing))
}

fn per_second(count: usize, seconds: f64) -> f64 {
    count as f64 / seconds.max(1e-9)
}

/// The figures by name.
pub(crate) type Figures = BTreeMap<String, f64>;

/// The names left out, with the reason.
pub(crate) type Omitted = BTreeMap<String, String>;

/// The figures by name, and the names left out with the reason.
pub(crate) fn figures(r: &Results) -> (Figures, Omitted) {
    let mut f = BTreeMap::new();
    let mut omitted = BTreeMap::new();
    update_figures(r, &mut f, &mut omitted);
    indexer_figures(r, &mut f);
    pattern_figures(r, &mut f);
    field_add_figures(r, &mut f, &mut omitted);
    hot_figures(r, &mut f);
    crate::views::view_figures(r, &mut f, &mut omitted);
    for (n, seconds) in &r.option_reorder {
        let name = format!("option_reorder_{}_seconds", size_label(*n));
        match seconds {
            Some(s) => {
                f.insert(name, *s);
            }
            None => {
                omitted.insert(name, "the Edit job did not finish".into());
            }
        }
    }
    for (n, done) in &r.project_delete {
        let size = size_label(*n);
        match done {
            Some((seconds, wcu)) => {
                f.insert(format!("project_delete_{size}_seconds"), *seconds);
                f.insert(format!("project_delete_{size}_wcu"), *wcu);
            }
            None => {
                for name in ["seconds", "wcu"] {
                    omitted.insert(
                        format!("project_delete_{size}_{name}"),
                        "the purge job did not finish".into(),
                    );
                }
            }
        }
    }
    if let Some(rcu) = r.membership_check_rcu {
        f.insert("membership_check_rcu_per_request".into(), rcu);
    }
    binary_figures(r, &mut f, &mut omitted);
    // JSON has no NaN or infinity; a figure that is one was not measured.
    f.retain(|name, v| {
        let keep = v.is_finite();
        if !keep {
            omitted.insert(name.clone(), "not a finite number".into());
        }
        keep
    });
    (f, omitted)
}

/// What an update writes, and what summaries in the index cost and save.
fn update_figures(r: &Results, f: &mut Figures, omitted: &mut Omitted) {
    for (fields, request, index) in &r.update_wcu {
        f.insert(format!("update_1_field_wcu_f{fields}"), request + index);
    }
    for c in &r.summaries {
        let n = c.fields;
        f.insert(format!("update_1_field_wcu_f{n}_thin"), c.update_wcu.1);
        f.insert(format!("grid_page_f{n}_rcu_issues"), c.page_rcu.0);
        f.insert(format!("grid_page_f{n}_rcu_issues_thin"), c.page_rcu.1);
        f.insert(format!("grid_page_f{n}_calls"), c.page_calls.0);
        let name = format!("summaries_break_even_page_views_per_update_f{n}");
        match c.break_even() {
            Some(b) => {
                f.insert(name, b);
            }
            None => {
                omitted.insert(
                    name,
                    "the summaries save no read: the issues are too wide for any entry to carry them, so every entry is thin either way".into(),
                );
            }
        }
    }
}

/// The indexer's throughput: its pure core, delayed, and end to end.
fn indexer_figures(r: &Results, f: &mut Figures) {
    let (records, seconds) = r.indexer_core;
    f.insert(
        "index_core_records_per_s".into(),
        per_second(records, seconds),
    );
    let (records, seconds) = r.indexer_core_json;
    f.insert(
        "index_core_with_json_records_per_s".into(),
        per_second(records, seconds),
    );
    let (records, seconds) = r.indexer_core_streamed;
    f.insert(
        "index_core_streamed_records_per_s".into(),
        per_second(records, seconds),
    );
    let (issues, seconds) = r.indexer_delayed;
    f.insert(
        "indexer_issues_per_s_per_shard_5ms".into(),
        per_second(issues, seconds),
    );
    for (n, records, seconds) in &r.index_e2e {
        f.insert(
            format!("index_e2e_{}_records_per_s", size_label(*n)),
            per_second(*records, *seconds),
        );
    }
}

/// The ad hoc filter's read units and calls per full page of 50 matches: its API pages hold
/// fewer (each reads at most 1,000 entries).
fn filter_figures(patterns: &BTreeMap<&'static str, Stat>, size: &str, f: &mut Figures) {
    if let Some(s) = patterns.get(crate::filters::RARE_FILTER)
        && s.rows > 0.0
    {
        let per_full_page = 50.0 / s.rows;
        f.insert(
            format!("filter_page_{size}_rcu_total"),
            (s.capacity - s.write_capacity) * per_full_page,
        );
        f.insert(format!("filter_page_{size}_calls"), s.calls * per_full_page);
    }
}

/// The lists' calls and read units, the GSI design's by density, and the names' read units.
fn pattern_figures(r: &Results, f: &mut Figures) {
    let lists = [
        ("grid_page_custom_field", "grid page by custom field"),
        ("grid_page_all_states", crate::ALL_STATES),
        ("inbox_me", "my issues"),
        ("inbox_my_teams", "my teams' issues (5 teams)"),
    ];
    for (n, patterns) in &r.patterns {
        let size = size_label(*n);
        for (name, row) in lists {
            if let Some(s) = patterns.get(row) {
                f.insert(format!("{name}_{size}_calls"), s.calls);
                f.insert(format!("{name}_{size}_rcu_issues"), rcu_issues(s));
                f.insert(
                    format!("{name}_{size}_rcu_total"),
                    s.capacity - s.write_capacity,
                );
            }
        }
    }
    for (n, patterns) in &r.patterns {
        let size = size_label(*n);
        for density in baselines::DENSITIES {
            if let Some(rcu) = gsi_per_page(patterns, density) {
                f.insert(
                    format!("gsi_filter_{size}_rcu_per_page_missing_{density}"),
                    rcu,
                );
            }
        }
        filter_figures(patterns, &size, f);
        if let Some(s) = patterns.get(crate::CREATE) {
            f.insert(format!("create_{size}_calls"), s.calls);
            f.insert(format!("create_{size}_wcu"), s.write_capacity);
        }
        graph_and_activity_figures(patterns, &size, f);
        if let Some(s) = patterns.get(crate::CREATE_50) {
            // Sizes run in increasing order: the largest one's figure stays.
            f.insert("create_concurrent_50_calls_per_create".into(), s.calls);
            f.insert("create_concurrent_50_p99_ms".into(), s.p99_ms);
        }
        for (name, row) in [
            ("grid_page_custom_field", "grid page by custom field"),
            ("grid_page_team_of_12", crate::TEAM_OF_12),
        ] {
            if let Some(s) = patterns.get(row) {
                f.insert(format!("{name}_{size}_rcu_names"), s.names_capacity);
            }
        }
    }
}

/// Relations, sub-issues, comments and history: their calls and capacity units.
fn graph_and_activity_figures(
    patterns: &BTreeMap<&'static str, Stat>,
    size: &str,
    f: &mut Figures,
) {
    if let Some(s) = patterns.get(crate::graph::GET_10_RELATIONS) {
        f.insert("get_issue_with_10_relations_calls".into(), s.calls);
        f.insert(
            "get_issue_with_10_relations_rcu".into(),
            s.capacity - s.write_capacity,
        );
    }
    if let Some(s) = patterns.get(crate::graph::RELATE) {
        f.insert("relate_wcu".into(), s.write_capacity);
    }
    if let Some(s) = patterns.get(crate::graph::CHILDREN_PAGE) {
        f.insert(format!("children_page_{size}_calls"), s.calls);
        f.insert(
            format!("children_page_{size}_rcu"),
            s.capacity - s.write_capacity,
        );
    }
    if let Some(s) = patterns.get(crate::graph::SET_PARENT) {
        f.insert("set_parent_wcu".into(), s.write_capacity);
    }
    if let Some(s) = patterns.get(crate::activity::COMMENT_CREATE) {
        f.insert("comment_create_wcu".into(), s.write_capacity);
    }
    if let Some(s) = patterns.get(crate::activity::COMMENTS_PAGE) {
        f.insert("comments_page_calls".into(), s.calls);
        f.insert("comments_page_rcu".into(), s.capacity - s.write_capacity);
    }
    if let Some(s) = patterns.get(crate::activity::HISTORY_PAGE) {
        f.insert("history_page_calls".into(), s.calls);
        f.insert("history_page_rcu".into(), s.capacity - s.write_capacity);
    }
}

/// Adding a field: the request's calls, and the seconds until it is sortable.
fn field_add_figures(r: &Results, f: &mut Figures, omitted: &mut Omitted) {
    for (n, calls, seconds) in &r.field_add {
        let size = size_label(*n);
        f.insert(format!("field_add_{size}_request_calls"), *calls);
        let name = format!("field_add_{size}_index_seconds");
        match seconds {
            Some(s) => {
                f.insert(name, *s);
            }
            None => {
                omitted.insert(
                    name,
                    "the field job did not finish (its message went to the dead-letter list)"
                        .into(),
                );
            }
        }
    }
}

/// The hot project's busiest column partition, per shard count.
fn hot_figures(r: &Results, f: &mut Figures) {
    for h in &r.hot {
        let n = h.shards;
        if n == 4 {
            f.insert(
                "hot_project_updates_per_s_per_partition".into(),
                h.column_updates_per_s,
            );
        }
        f.insert(
            format!("hot_project_updates_per_s_per_partition_{n}_shards"),
            h.column_updates_per_s,
        );
        f.insert(
            format!("hot_project_wcu_per_s_per_partition_{n}_shards"),
            h.column_wcu_per_s,
        );
    }
}

/// Each function's binary size and init time.
fn binary_figures(r: &Results, f: &mut Figures, omitted: &mut Omitted) {
    for (function, bytes, _, init_ms) in &r.binaries {
        f.insert(format!("binary_{function}_bytes"), *bytes as f64);
        f.insert(format!("init_{function}_ms"), *init_ms);
    }
    for function in &r.missing_binaries {
        omitted.insert(
            format!("binary_{function}_bytes"),
            "its binary was not found".into(),
        );
    }
}

/// The output of `git args`, trimmed, if git ran and succeeded.
/// The commit the run measures and whether the tree had other changes, read when the run
/// starts ([`revision`] is called first thing): `make bench` builds just before, and a run
/// lasts long enough for the tree to move on meanwhile.
pub(crate) struct Revision {
    commit: Option<String>,
    dirty: Option<bool>,
}

/// This run's [`Revision`], read once.
pub(crate) fn revision() -> &'static Revision {
    static REVISION: std::sync::OnceLock<Revision> = std::sync::OnceLock::new();
    REVISION.get_or_init(|| {
        // The run's own outputs are left out: they always differ.
        let status = git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)BENCHMARKS.md",
            ":(exclude)benchmarks.svg",
            ":(exclude)bench/results.json",
        ]);
        Revision {
            commit: git(&["rev-parse", "HEAD"]),
            dirty: status.map(|s| !s.is_empty()),
        }
    })
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Writes the figures and `_meta` to `path`.
pub(crate) fn write(r: &Results, sizes: &[u64], samples: usize, path: &Path) -> Result<()> {
    let (figures, omitted) = figures(r);
    let mut object: serde_json::Map<String, Value> = figures
        .into_iter()
        .map(|(name, v)| (name, json!(v)))
        .collect();
    let date = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let mut meta = json!({
        "sizes": sizes,
        "samples": samples,
        "date": date,
        // A debug build's figures are not comparable with a release build's.
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "delay_ms": crate::indexer::delayed::DELAY.as_secs_f64() * 1000.0,
        "omitted": omitted,
    });
    let revision = revision();
    if let Some(commit) = &revision.commit {
        meta["git_commit"] = json!(commit);
        // Uncommitted changes: the commit alone does not say what was measured.
        if let Some(dirty) = revision.dirty {
            meta["git_dirty"] = json!(dirty);
        }
    }
    object.insert("_meta".into(), meta);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(object))?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_name_in_thousands() {
        assert_eq!(size_label(1000), "1k");
        assert_eq!(size_label(100_000), "100k");
        assert_eq!(size_label(500), "500");
        assert_eq!(size_label(1500), "1500");
    }

    #[test]
    fn every_figure_is_a_documented_name() {
        let mut patterns = BTreeMap::new();
        // The GSI design at one density (a figure each density measured).
        for row in [
            "grid page by custom field",
            "my issues",
            "my teams' issues (5 teams)",
            crate::ALL_STATES,
            crate::TEAM_OF_12,
            baselines::GSI_VALUES,
            baselines::gsi_missing_row(20),
            crate::CREATE,
            crate::CREATE_50,
            crate::graph::RELATE,
            crate::graph::GET_10_RELATIONS,
            crate::graph::CHILDREN_PAGE,
            crate::graph::SET_PARENT,
            crate::activity::COMMENT_CREATE,
            crate::activity::COMMENTS_PAGE,
            crate::activity::HISTORY_PAGE,
        ] {
            patterns.insert(row, Stat::default());
        }
        // The filter's figures are per full page of matches: a page with some.
        let some = Stat {
            rows: 10.0,
            capacity: 2.0,
            ..Stat::default()
        };
        patterns.insert(crate::filters::RARE_FILTER, some.clone());
        patterns.insert(crate::views::VIEW_PAGE, some);
        let r = Results {
            patterns: vec![(1000, patterns)],
            index_e2e: vec![(1000, 10, 1.0)],
            indexer_core: (10, 1.0),
            indexer_core_json: (10, 1.0),
            indexer_core_streamed: (10, 1.0),
            update_wcu: vec![(5, 1.0, 2.0), (55, 1.0, 2.0)],
            summaries: [5, 55]
                .map(|fields| crate::indexer::updates::SummaryCost {
                    fields,
                    update_wcu: (24.0, 16.0),
                    page_rcu: (4.0, 26.0),
                    page_calls: (2.0, 3.0),
                })
                .to_vec(),
            indexer_delayed: (10, 1.0),
            field_add: vec![(1000, 3.0, Some(1.0))],
            view_build: vec![(1000, Some(1.0))],
            update_views: vec![(0, 1.0), (10, 2.0)],
            board: Some(crate::views::BoardCounts::default()),
            membership_check_rcu: Some(0.0),
            option_reorder: vec![(1000, Some(1.0))],
            project_delete: vec![(1000, Some((1.0, 1.0)))],
            binaries: vec![("grid".into(), 1, None, 1.0)],
            hot: vec![crate::hot::HotLoad {
                shards: 4,
                ..Default::default()
            }],
            ..Results::default()
        };
        let documented: Vec<String> = NAMES
            .iter()
            .flat_map(|(n, _)| {
                let n = n
                    .replace("{size}", "1k")
                    .replace("{function}", "grid")
                    .replace("{shards}", "4")
                    .replace("{density}", "20");
                if n.contains("{fields}") {
                    vec![n.replace("{fields}", "5"), n.replace("{fields}", "55")]
                } else {
                    vec![n]
                }
            })
            .collect();
        let (figures, omitted) = figures(&r);
        assert!(omitted.is_empty(), "{omitted:?}");
        for name in figures.keys() {
            assert!(documented.contains(name), "{name} is not in NAMES");
        }
        assert_eq!(figures.len(), documented.len());
        assert_eq!(figures["update_1_field_wcu_f55"], 3.0);
    }
}
