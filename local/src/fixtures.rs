//! The records the sample events in `events/` name: tenant `acme`, project Apollo with a
//! number field, two issues (the first blocks the second, and has a comment by the events'
//! caller), team Platform with the events' caller as a member. Used by
//! `gridline-local invoke` and by the events test.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use gridline::domain::ids::{
    CommentId, FieldId, IssueId, ProjectId, TeamId, TenantId, UserId, ViewId,
};
use gridline::domain::relation::RelationKind;
use gridline::domain::values::{FieldDef, FieldType, StoredValue};
use gridline::domain::{IssueState, NewIssue, Participant, ParticipantKind, Project, Role};
use gridline::store::records::comments::Posted;
use gridline::store::records::relations::RelateOutcome;
use gridline::store::{Store, Team};

pub const TENANT: &str = "acme";
pub const PROJECT: &str = "01JDQ5S0000000000000000P01";
pub const FIELD: &str = "01JDQ5S0000000000000000F01";
pub const ISSUE: &str = "01JDQ5S0000000000000000N01";
pub const ISSUE_TO_DELETE: &str = "01JDQ5S0000000000000000N02";
pub const TEAM: &str = "01JDQ5S0000000000000000T01";
/// A saved view of [`PROJECT`]: open issues by points, most first, grouped by state (its
/// project's id, then its own ULID).
pub const VIEW: &str = "01JDQ5S0000000000000000P0101JDQ5S0000000000000000V01";
/// A comment on [`ISSUE`] by [`SUB`] (its issue's id, then its own ULID).
pub const COMMENT: &str = "01JDQ5S0000000000000000N0101JDQ5S0000000000000000C01";
/// The `sub` of the events' callers.
pub const SUB: &str = "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6";
/// The app client id the events' tokens were issued to (`aud`), and the one `invoke` accepts.
pub const CLIENT_ID: &str = "5example0client0id0gridline";
/// The user pool the `authorizer-*` events' tokens name as issuer.
pub const ISSUER: &str = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example";
/// The key set of that pool: the public half of a key made once to sign the `authorizer-*`
/// events' tokens (valid until 2100, but `authorizer-expired`), then thrown away.
pub const JWKS: &str = r#"{"keys": [{"kty": "RSA", "kid": "gridline-sample-events", "alg": "RS256", "use": "sig", "n": "vUZThOcx3-mOeW6Yyrp4kp4cXfG3CBmI3AoP_PG4UJK6FNlzVmlNgkD2tG75fIhmYIt87hdf3vorWMQNXt3IVuUjvLBpflLuCoPzpdvP443hmL8DhInm05KkgvAlzt2KoKoVUTKNvWpGhaiNcJLO66NBzXs5uyeomyUE2ZW1aRVybIHWVAw0e-7hzpyb5GfUxZ4v5qDk4D0j-xHgNnQXY6csgN80c1B87Hpl79gndVp-tZm6U666mj_xTWWE7JKsWJzT3IYunr0c3DRnuWbjqxpvMo6wlpz_tyaneyQQqCGrkR9yTP7EjULDyWdRo3MEtg6b_lglaJfYUpX9q8LujQ", "e": "AQAB"}]}"#;
/// The browser origin the CORS events come from, and the one `invoke` allows.
pub const ORIGIN: &str = "https://app.example.com";
const CREATED_AT: &str = "2026-11-21T20:42:03.123Z";

/// Writes the fixtures into empty tables.
pub async fn seed(store: &Store) -> Result<()> {
    let tenant = TenantId::parse(TENANT).context("the fixture tenant is not a valid tenant id")?;
    let project_id =
        ProjectId::parse(PROJECT).context("the fixture project is not a valid project id")?;
    let field_id = FieldId::parse(FIELD).context("the fixture field is not a valid field id")?;
    let team_id = TeamId::parse(TEAM).context("the fixture team is not a valid team id")?;
    let sub = UserId::parse(SUB).context("the fixture sub is not a valid user id")?;
    let project = Project {
        id: project_id.clone(),
        name: "Apollo".into(),
        created_at: CREATED_AT.into(),
    };
    store.records().create_project(&tenant, &project).await?;
    let field = FieldDef {
        id: field_id.clone(),
        name: "Points".into(),
        field_type: FieldType::Number,
        options: None,
        sortable: true,
    };
    store
        .records()
        .create_field(&tenant, &project_id, &field)
        .await?;
    let team = Team {
        id: team_id,
        name: "Platform".into(),
        created_at: CREATED_AT.into(),
    };
    store.records().create_team(&tenant, &team).await?;
    anyhow::ensure!(
        store.records().add_member(&tenant, &team, &sub).await?,
        "the fixture team exists"
    );
    seed_view(store, &tenant).await?;
    for id in [ISSUE, ISSUE_TO_DELETE] {
        let id = IssueId::parse(id).context("a fixture issue is not a valid issue id")?;
        let new = NewIssue {
            title: "Seeded".into(),
            state: IssueState::Open,
            description: Some("seeded description".into()),
            fields: BTreeMap::from([(field_id.clone(), StoredValue::N("5".parse()?))]),
            participants: vec![Participant {
                kind: ParticipantKind::User,
                id: sub.clone().into(),
                role: Role::Reporter,
            }],
            parent_id: None,
        };
        store
            .records()
            .create_issue(&tenant, &project_id, new, id, (CREATED_AT.into(), &sub))
            .await?;
    }
    let (issue, other) = (
        IssueId::parse(ISSUE).context("a fixture issue is not a valid issue id")?,
        IssueId::parse(ISSUE_TO_DELETE).context("a fixture issue is not a valid issue id")?,
    );
    let related = store
        .records()
        .relate(
            &tenant,
            (&issue, RelationKind::Blocks, &other),
            (CREATED_AT, &sub),
        )
        .await?;
    anyhow::ensure!(
        related == RelateOutcome::Saved,
        "the fixture issues were not related: {related:?}"
    );
    seed_comment(store, &tenant, &sub).await
}

/// The fixture view, saved before the project's first issue: ready at once.
async fn seed_view(store: &Store, tenant: &TenantId) -> Result<()> {
    let view = gridline::model::view::ViewSpec {
        name: "Open issues by points".into(),
        filter: r#"[["state","eq","open"]]"#.into(),
        sort: FIELD.into(),
        descending: true,
        state: None,
        group_by: Some("state".into()),
    };
    let view_id = ViewId::parse(VIEW).context("the fixture view id is not valid")?;
    store
        .records()
        .create_view(tenant, &view_id, &view, CREATED_AT)
        .await?;
    Ok(())
}

/// The fixture comment on [`ISSUE`], by [`SUB`].
async fn seed_comment(store: &Store, tenant: &TenantId, sub: &UserId) -> Result<()> {
    let comment = CommentId::parse(COMMENT).context("the fixture comment id is not valid")?;
    let created = store
        .records()
        .create_comment(tenant, comment, sub, "Seen on Safari 17.")
        .await?;
    anyhow::ensure!(
        matches!(created, Posted::Done(_)),
        "the fixture comment was not created: {created:?}"
    );
    Ok(())
}
