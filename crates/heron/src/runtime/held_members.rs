//! Catalog members held back for their DS: listed by a consumed catalog,
//! not served, because a key state file of this run says a DS of theirs
//! may be at the parent (served unsigned they would be bogus; regression
//! hunt BR-2). Kept here so that `zone-status`, `status` and the metrics
//! show them until the catalog drops them (black-box finding BS-9: only
//! an error line at the catalog version's arrival said so, and
//! zone-status called the member "not configured").
//! At most one entry per member of a consumed catalog.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use heron_proto::Name;

/// Why a member is held, and by which catalog it is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub catalog: Option<Name>,
    pub why: String,
}

impl Held {
    /// What `zone-status` gives as the member's last error.
    pub fn said(&self) -> String {
        let listed = match &self.catalog {
            Some(catalog) => format!("listed by catalog {catalog}, "),
            None => String::new(),
        };
        format!(
            "{listed}not served: {} (then heron ctl reconfigure to serve it)",
            self.why
        )
    }
}

fn held() -> MutexGuard<'static, BTreeMap<Name, Held>> {
    static HELD: Mutex<BTreeMap<Name, Held>> = Mutex::new(BTreeMap::new());
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// `origin` is held back, listed by `catalog`, for `why`.
pub(crate) fn hold(origin: &Name, catalog: Option<&Name>, why: &str) {
    let entry = Held {
        catalog: catalog.cloned(),
        why: why.to_owned(),
    };
    held().insert(origin.to_lowercase(), entry);
}

/// `origin` is not held (served, or no catalog lists it now).
pub(crate) fn release(origin: &Name) {
    held().remove(&origin.to_lowercase());
}

/// Why `origin` is held, if it is.
pub(crate) fn held_member(origin: &Name) -> Option<Held> {
    held().get(&origin.to_lowercase()).cloned()
}

/// Every member held (lower-cased origins), in name order.
pub(crate) fn held_members() -> Vec<(Name, Held)> {
    held()
        .iter()
        .map(|(origin, held)| (origin.clone(), held.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_held_until_released_by_any_case_of_its_name() {
        let member = Name::parse("Held-Member.test").unwrap();
        let catalog = Name::parse("cat.test").unwrap();
        hold(
            &member,
            Some(&catalog),
            "keys/x.keys.json says its DS may be at the parent",
        );
        let lower = Name::parse("held-member.test").unwrap();
        let held = held_member(&lower).expect("held");
        assert_eq!(held.catalog, Some(catalog));
        assert!(
            held.said()
                .starts_with("listed by catalog cat.test., not served: keys/")
        );
        assert!(held_members().iter().any(|(o, _)| *o == lower));
        release(&lower);
        assert!(held_member(&member).is_none());
        assert!(!held_members().iter().any(|(o, _)| *o == lower));
    }
}
