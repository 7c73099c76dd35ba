//! The TSIG keys of a running server, shared by everything that signs or
//! verifies (the query processor, the secondary side's connections, the
//! NOTIFY sender) and replaced as a whole when a reload reads new ones:
//! an ACL that names a key added by the same reload finds it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use heron_proto::tsig::Key;

/// One set of keys, read without a lock, replaced at once.
#[derive(Debug)]
pub struct SharedKeys(ArcSwap<Vec<Key>>);

impl SharedKeys {
    pub fn new(keys: Arc<Vec<Key>>) -> Arc<SharedKeys> {
        Arc::new(SharedKeys(ArcSwap::new(keys)))
    }

    /// The keys now.
    pub fn load(&self) -> Arc<Vec<Key>> {
        self.0.load_full()
    }

    /// From now on, `keys`; exchanges under way keep the keys they began
    /// with.
    pub fn replace(&self, keys: Arc<Vec<Key>>) {
        self.0.store(keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;
    use heron_proto::tsig::{Algorithm, KeyRing};

    #[test]
    fn a_replaced_set_is_seen_by_every_holder() {
        let name = Name::parse("added.key").unwrap();
        let key = Key::new(name.clone(), Algorithm::HmacSha256, b"secret".to_vec());
        let shared = SharedKeys::new(Arc::new(Vec::new()));
        let other_holder = shared.clone();
        let before = shared.load();
        assert!(other_holder.load().key(&name).is_none());
        shared.replace(Arc::new(vec![key]));
        assert!(other_holder.load().key(&name).is_some());
        assert!(
            before.key(&name).is_none(),
            "what was loaded stays as it was"
        );
    }
}
