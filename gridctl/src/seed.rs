//! `seed`: a realistic project — custom fields of every type, users with names, teams with
//! members, issues with values (some missing) and participants — written through the same
//! store calls and validation the API uses. Deterministic for a given `--rng-seed`.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use gridline::domain::ids::{FieldId, IssueId, ProjectId, TeamId, TenantId, UserId};
use gridline::domain::values::{FieldDef, FieldType, StoredValue, parse_value};
use gridline::domain::{IssueState, NewIssue, Participant, ParticipantKind, Project, Role};
use gridline::store::{Profile, Store, Team};
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct Spec {
    pub tenant: TenantId,
    pub project_name: String,
    pub issues: u64,
    /// Custom fields beyond the five typed ones every seeded project has.
    pub extra_fields: usize,
    pub users: usize,
    pub teams: usize,
    pub rng_seed: u64,
}

/// What was created, for scripts and benchmarks.
#[derive(Debug, Clone, Serialize)]
pub struct Seeded {
    pub tenant: TenantId,
    pub project_id: ProjectId,
    /// Field id by name.
    pub fields: BTreeMap<String, FieldId>,
    pub users: Vec<UserId>,
    pub teams: Vec<TeamId>,
    pub issues: u64,
}

const WORDS: &[&str] = &[
    "login",
    "crash",
    "timeout",
    "billing",
    "export",
    "search",
    "upload",
    "slow",
    "dashboard",
    "email",
    "webhook",
    "report",
    "sync",
    "mobile",
    "cache",
    "invoice",
    "permissions",
    "import",
    "filter",
    "chart",
    "token",
    "retry",
    "latency",
    "backup",
    "audit",
    "calendar",
    "sso",
    "theme",
];
const COMPONENTS: &[&str] = &[
    "API", "Web", "iOS", "Android", "Billing", "Search", "Infra", "Docs",
];
/// The seeded `Priority` field's options, in order.
pub const PRIORITIES: &[&str] = &["P0", "P1", "P2", "P3"];

fn def(name: &str, field_type: FieldType, options: Option<Vec<String>>) -> FieldDef {
    FieldDef {
        id: FieldId::new(),
        name: name.into(),
        field_type,
        options,
        sortable: true,
    }
}

fn value(def: &FieldDef, rng: &mut StdRng) -> Result<Option<StoredValue>> {
    // About one issue in five has no value, so "missing values last" is exercised.
    if rng.gen_bool(0.2) {
        return Ok(None);
    }
    let json = match def.field_type {
        FieldType::Number => format!("{}.{}", rng.gen_range(-50..1000), rng.gen_range(0..100)),
        FieldType::Text => format!(
            "\"{} {}\"",
            COMPONENTS[rng.gen_range(0..COMPONENTS.len())],
            WORDS[rng.gen_range(0..WORDS.len())]
        ),
        FieldType::Date => format!(
            "\"2026-{:02}-{:02}\"",
            rng.gen_range(1..=12),
            rng.gen_range(1..=28)
        ),
        FieldType::Datetime => format!(
            "\"2026-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\"",
            rng.gen_range(1..=12),
            rng.gen_range(1..=28),
            rng.gen_range(0..24),
            rng.gen_range(0..60),
            rng.gen_range(0..60),
            rng.gen_range(0..1000)
        ),
        FieldType::Select => {
            let options = def.options.as_deref().unwrap_or_default();
            format!("\"{}\"", options[rng.gen_range(0..options.len().max(1))])
        }
    };
    let raw = serde_json::value::RawValue::from_string(json)?;
    parse_value(def, &raw)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("seed value for {}: {e}", def.name))
}

/// Creates the project, its fields, users, teams and issues.
pub async fn seed(store: &Store, spec: &Spec, progress: &ProgressBar) -> Result<Seeded> {
    let mut rng = StdRng::seed_from_u64(spec.rng_seed);
    let now = gridline::domain::values::format_timestamp(time::OffsetDateTime::now_utc());
    let t = &spec.tenant;
    let project = Project {
        id: ProjectId::new(),
        name: spec.project_name.clone(),
        created_at: now.clone(),
    };
    store.records().create_project(t, &project).await?;
    let defs = create_fields(store, t, &project.id, spec.extra_fields).await?;
    let users = create_users(store, t, spec.users).await?;
    let teams = create_teams(store, t, spec.teams, &users, &now).await?;

    progress.set_length(spec.issues);
    let people = People {
        users: &users,
        teams: &teams,
    };
    for n in 0..spec.issues {
        let new = random_issue(&mut rng, &defs, &people, n)?;
        // The seed's issues are reported by one of its users, who made their first version.
        let actor = &users[n as usize % users.len().max(1)];
        store
            .records()
            .create_issue(t, &project.id, new, IssueId::new(), (now.clone(), actor))
            .await
            .with_context(|| format!("creating issue {}", n + 1))?;
        progress.inc(1);
    }
    Ok(Seeded {
        tenant: spec.tenant.clone(),
        project_id: project.id,
        fields: defs.into_iter().map(|d| (d.name, d.id)).collect(),
        users,
        teams,
        issues: spec.issues,
    })
}

/// The five typed fields every seeded project has, then `extra` more (number, text, date in
/// turn).
async fn create_fields(
    store: &Store,
    t: &TenantId,
    project_id: &ProjectId,
    extra: usize,
) -> Result<Vec<FieldDef>> {
    let mut defs = vec![
        def("Points", FieldType::Number, None),
        def(
            "Priority",
            FieldType::Select,
            Some(PRIORITIES.iter().map(|s| s.to_string()).collect()),
        ),
        def("Due", FieldType::Date, None),
        def("Component", FieldType::Text, None),
        def("Last seen", FieldType::Datetime, None),
    ];
    for i in 0..extra {
        let kind = [FieldType::Number, FieldType::Text, FieldType::Date][i % 3];
        defs.push(def(&format!("Extra {i}"), kind, None));
    }
    for d in &defs {
        store
            .records()
            .create_field(t, project_id, d)
            .await
            .with_context(|| format!("creating field {}", d.name))?;
    }
    Ok(defs)
}

/// `user-0000` .. : at least one, since every issue needs a reporter.
async fn create_users(store: &Store, t: &TenantId, count: usize) -> Result<Vec<UserId>> {
    let users = (0..count.max(1))
        .map(|i| {
            let u = format!("user-{i:04}");
            UserId::parse(&u).with_context(|| format!("{u} is not a valid user id"))
        })
        .collect::<Result<Vec<_>>>()?;
    for u in &users {
        store
            .records()
            .put_profile(
                t,
                &Profile {
                    id: u.clone(),
                    display_name: Some(format!("User {u}")),
                },
            )
            .await?;
    }
    Ok(users)
}

/// `count` teams; returns their ids.
async fn create_teams(
    store: &Store,
    t: &TenantId,
    count: usize,
    users: &[UserId],
    now: &str,
) -> Result<Vec<TeamId>> {
    let mut teams = Vec::new();
    for i in 0..count {
        let team = Team {
            id: TeamId::new(),
            name: format!("Team {i}"),
            created_at: now.to_string(),
        };
        store.records().create_team(t, &team).await?;
        // Every user is in a team; user-0000 (the benchmarks' caller) is in every team, up to
        // the 50 a user may belong to.
        for (n, u) in users.iter().enumerate() {
            if (n == 0 && i < gridline::domain::MAX_TEAMS_PER_USER) || n % count.max(1) == i {
                store.records().add_member(t, &team, u).await?;
            }
        }
        teams.push(team.id);
    }
    Ok(teams)
}

/// Who an issue can involve.
struct People<'a> {
    users: &'a [UserId],
    teams: &'a [TeamId],
}

/// Issue `n` (0-based): a title of two words, three in ten closed, a value per field (or
/// none), a reporter, an assignee and now and then a watching team.
fn random_issue(
    rng: &mut StdRng,
    defs: &[FieldDef],
    people: &People<'_>,
    n: u64,
) -> Result<NewIssue> {
    let mut fields = BTreeMap::new();
    for d in defs {
        if let Some(v) = value(d, rng)? {
            fields.insert(d.id.clone(), v);
        }
    }
    let (users, teams) = (people.users, people.teams);
    let mut participants = vec![Participant {
        kind: ParticipantKind::User,
        id: users[rng.gen_range(0..users.len())].clone().into(),
        role: Role::Reporter,
    }];
    let assignee = &users[rng.gen_range(0..users.len())];
    if !participants
        .iter()
        .any(|p| p.id.as_str() == assignee.as_str())
    {
        participants.push(Participant {
            kind: ParticipantKind::User,
            id: assignee.clone().into(),
            role: Role::Assignee,
        });
    }
    if !teams.is_empty() && rng.gen_bool(0.3) {
        participants.push(Participant {
            kind: ParticipantKind::Team,
            id: teams[rng.gen_range(0..teams.len())].clone().into(),
            role: Role::Watcher,
        });
    }
    Ok(NewIssue {
        title: format!(
            "{} {} {}",
            WORDS[rng.gen_range(0..WORDS.len())],
            WORDS[rng.gen_range(0..WORDS.len())],
            n + 1
        ),
        state: if rng.gen_bool(0.3) {
            IssueState::Closed
        } else {
            IssueState::Open
        },
        description: None,
        fields,
        participants,
        parent_id: None,
    })
}
