//! The tenant directories checked against the profiles and teams they copy, and repaired:
//! for data written before the directory existed, and for any copy a fault left stale.
//!
//! Every repair is one transaction conditioned on the entry it saw and on the profile's or
//! team's name it saw, so one running beside traffic never undoes a rename made since its
//! scan, whichever of the two its scan read first.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::domain::ParticipantKind;
use crate::domain::ids::TenantId;
use crate::keys;
use crate::store::Store;
use crate::store::directory::parse_entry;
use crate::store::index::Table;

/// One person's directory entry as it should be and as it is.
type Person = (TenantId, ParticipantKind, String);

/// What a check (and a repair) found.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct DirectoryReport {
    /// Names the directories should hold.
    pub names: usize,
    /// Of those, missing from their directory.
    pub missing: usize,
    /// Entries whose name differs from the profile's or team's, or that name nobody.
    pub stale: usize,
    /// Entries written or removed by the repair.
    pub fixed: usize,
    /// Entries the repair left because they changed after the scan (run it again).
    pub moved: usize,
}

/// Checks every tenant's directory against its profiles and teams; with `fix`, repairs it.
pub async fn sync(
    store: &Store,
    segments: u32,
    fix: bool,
    on_page: &(dyn Fn(usize) + Sync),
) -> Result<DirectoryReport, crate::store::StoreError> {
    let items = store.scan_table(Table::Records, segments, on_page).await?;
    let mut want: BTreeMap<Person, String> = BTreeMap::new();
    let mut have: BTreeMap<Person, String> = BTreeMap::new();
    for item in &items {
        let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok());
        let Some(tenant) = s(keys::PK)
            .and_then(|pk| keys::tenant_of(pk))
            .and_then(TenantId::parse)
        else {
            continue;
        };
        let kind_name = match s("entity").map(String::as_str) {
            Some("user") => Some((ParticipantKind::User, s("display_name"))),
            Some("team") => Some((ParticipantKind::Team, s("name"))),
            _ => None,
        };
        if let Some((kind, Some(name))) = kind_name
            && let Some(id) = s("id")
        {
            want.insert((tenant, kind, id.clone()), name.clone());
        } else if let Some((kind, id, name)) = parse_entry(item) {
            have.insert((tenant, kind, id), name);
        }
    }
    let mut report = DirectoryReport {
        names: want.len(),
        ..DirectoryReport::default()
    };
    let people: BTreeSet<&Person> = want.keys().chain(have.keys()).collect();
    for person in people {
        let (should, is) = (want.get(person), have.get(person));
        if should == is {
            continue;
        }
        match is {
            None => report.missing += 1,
            Some(_) => report.stale += 1,
        }
        if !fix {
            continue;
        }
        let (tenant, kind, id) = person;
        let fixed = store
            .records()
            .fix_directory_entry(
                tenant,
                (*kind, id),
                is.map(String::as_str),
                should.map(String::as_str),
            )
            .await?;
        if fixed {
            report.fixed += 1;
        } else {
            report.moved += 1;
        }
    }
    Ok(report)
}
