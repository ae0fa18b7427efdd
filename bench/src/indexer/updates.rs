//! What issue updates cost the request and the indexer: write amplification, a 1-field
//! update's write units, and what summaries in the index entries cost and save.

use anyhow::Result;
use gridline_local::testing::TestApi;
use http::Method;
use indicatif::ProgressBar;

use super::{first_issues, metered_indexer, new_values, patch, spec, stack, updatable_fields};
use crate::meter::Meter;

/// What one round of issue updates cost: each issue patched once.
#[derive(Debug)]
pub(crate) struct UpdateCost {
    /// Custom fields each update changed.
    pub(crate) fields_changed: usize,
    /// The indexer's write requests per update.
    pub(crate) index_write_requests: f64,
    /// The indexer's capacity units per update (its watermark reads included).
    pub(crate) index_capacity: f64,
    /// The indexer's write capacity units per update.
    pub(crate) index_wcu: f64,
    /// The PATCH request's write capacity units per update.
    pub(crate) request_wcu: f64,
    /// After the rounds, a warm grid page of 50 open issues by Points: its read units (all
    /// but the names) and its DynamoDB calls (names included).
    pub(crate) page_rcu: f64,
    pub(crate) page_calls: f64,
}

/// A project of 100 issues updated and paged twice: indexed with summaries in the entries,
/// and with every entry thin (`Indexer::without_summaries`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SummaryCost {
    /// Custom fields in the project.
    pub(crate) fields: usize,
    /// A 1-field update's WCU (request and indexer) with summaries, and thin.
    pub(crate) update_wcu: (f64, f64),
    /// A page's read units (all but names), with summaries and thin.
    pub(crate) page_rcu: (f64, f64),
    /// A page's calls, with summaries and thin.
    pub(crate) page_calls: (f64, f64),
}

impl SummaryCost {
    /// Its row of the BENCHMARKS.md table (`write_summaries`'s columns).
    pub(crate) fn row(&self) -> String {
        let even = self
            .break_even()
            .map_or("— (too wide: every entry thin)".to_string(), |b| {
                format!("{b:.1}")
            });
        format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} / {:.0} | {even} |",
            self.fields,
            self.update_wcu.0,
            self.update_wcu.1,
            self.page_rcu.0,
            self.page_rcu.1,
            self.page_calls.0,
            self.page_calls.1,
        )
    }

    /// Page views per update at which summaries pay for themselves: the WCU they add per
    /// update, at five read units each (on-demand prices), over the read units they save per
    /// page; `None` when they save nothing (issues too wide to carry them).
    pub(crate) fn break_even(&self) -> Option<f64> {
        let added = self.update_wcu.0 - self.update_wcu.1;
        let saved = self.page_rcu.1 - self.page_rcu.0;
        (saved > 0.05).then(|| (added * 5.0 / saved).max(0.0))
    }
}

/// [`SummaryCost`] of a project with 5 + `extra_fields` custom fields.
pub(crate) async fn summary_cost(extra_fields: usize) -> Result<SummaryCost> {
    let on = update_costs(extra_fields, &[1], true, 0).await?;
    let off = update_costs(extra_fields, &[1], false, 0).await?;
    let (Some(on), Some(off)) = (on.first(), off.first()) else {
        anyhow::bail!("no update round");
    };
    Ok(SummaryCost {
        fields: 5 + extra_fields,
        update_wcu: (
            on.request_wcu + on.index_wcu,
            off.request_wcu + off.index_wcu,
        ),
        page_rcu: (on.page_rcu, off.page_rcu),
        page_calls: (on.page_calls, off.page_calls),
    })
}

/// Index writes per issue update touching 1, 5 and 50 custom fields, in a project with 55.
pub(crate) async fn write_amplification() -> Result<Vec<UpdateCost>> {
    update_costs(50, &[1, 5, 50], true, 0).await
}

/// Updates of the 100 issues of a project with 5 + `extra_fields` custom fields, one round per
/// entry of `rounds` (the custom fields each update changes), the requests and the indexer each
/// metered on their own; each round then pages the grid once. `summaries`: entries carry the
/// issues' summaries (else every entry is thin). `views`: saved views on the project, built
/// before the rounds (see `views::update_views`).
pub(crate) async fn update_costs(
    extra_fields: usize,
    rounds: &[usize],
    summaries: bool,
    views: usize,
) -> Result<Vec<UpdateCost>> {
    const ISSUES: usize = 100;
    let stack = stack().await?;
    let seeded = gridctl::seed::seed(
        &stack.state.store,
        &spec(ISSUES as u64, extra_fields)?,
        &ProgressBar::hidden(),
    )
    .await?;
    let (meter, mut poller) = metered_indexer(&stack, summaries).await?;
    let numbers = updatable_fields(&seeded);
    let ids = first_issues(&stack, &seeded).await?;
    let page = format!(
        "/projects/{}/issues?sort={}&state=open&limit=50",
        seeded.project_id, seeded.fields["Points"]
    );
    let requests = Meter::new();
    let router = stack.router_with(|id| requests.client(&stack.function_client(id)));
    let token = TestApi::token(&seeded.users[0], &seeded.tenant);
    // Five columns are hot, the ones pages sort by (a page sorted by each marks it), and
    // their summaries are filled before anything is measured.
    for name in ["Points", "Priority", "Due", "Component", "Last seen"] {
        let path = format!(
            "/projects/{}/issues?sort={}&limit=1",
            seeded.project_id, seeded.fields[name]
        );
        let (router, token) = (router.clone(), Some(token.as_str()));
        let reply = gridline_local::testing::send(router, Method::GET, &path, token, None, &[]);
        let reply = reply.await;
        anyhow::ensure!(reply.status == 200, "{path}: {}", reply.text);
    }
    poller.drain().await?;
    crate::views::update_views(&stack, &router, &token, &seeded, views).await?;
    poller.drain().await?;
    let mut out = Vec::new();
    for (round, &k) in rounds.iter().enumerate() {
        let sent = requests.now();
        for id in &ids {
            let fields = new_values(&seeded, &numbers[..k.min(numbers.len())], round);
            patch(&router, &token, id, fields).await?;
        }
        let request = requests.now() - sent;
        let before = meter.now();
        poller.drain().await?;
        let d = meter.now() - before;
        let per = |x: f64| x / ids.len() as f64;
        // Warm: the first read holds the field definitions, the second is measured.
        let mut read = crate::meter::Counts::default();
        for _ in 0..2 {
            let at = requests.now();
            let reply = gridline_local::testing::send(
                router.clone(),
                Method::GET,
                &page,
                Some(&token),
                None,
                &[],
            )
            .await;
            anyhow::ensure!(reply.status == 200, "grid page: {}", reply.text);
            read = requests.now() - at;
        }
        out.push(UpdateCost {
            fields_changed: k,
            index_write_requests: per(d.write_requests as f64),
            index_capacity: per(d.capacity),
            index_wcu: per(d.write_capacity),
            request_wcu: per(request.write_capacity),
            page_rcu: read.capacity - read.write_capacity - read.names_capacity,
            page_calls: read.calls as f64,
        });
    }
    Ok(out)
}
