//! The ad hoc filter the bench measures: a grid page of the issues a filter on one custom field
//! keeps (about 1 %), sorted by another.

use crate::Env;

/// The row of an ad hoc filter that about 1 % of the issues meet, sorted by another column.
pub(crate) const RARE_FILTER: &str = "grid page with a filter 1 % of issues meet";

/// A grid page sorted by `Due` of the open issues whose `Points` are in [-50, -37.5): the seed's
/// points are uniform over [-50, 1000) on 80 % of the issues, so about 0.95 % of them (the
/// saved view `views` measures beside it has the same conditions).
pub(crate) fn rare_filter_path(env: &Env) -> String {
    let (p, points, _) = crate::project_points_caller(env);
    let due = &env.seeded.fields["Due"];
    let filter = crate::views::rare_conditions(points).to_string();
    let filter: String = filter
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("/projects/{p}/issues?sort={due}&state=open&where={filter}&limit=50")
}
