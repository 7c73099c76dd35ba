//! One zone this server is a secondary for: its primaries and where its
//! copy is kept. Data only, shared by the refresh driver and the keeper.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use heron_proto::Name;

use super::client::Upstream;
use super::kept_file::KeptFile;

/// A zone's primaries, tried in order, shared by the zones configured
/// together: one pointer where a slice's `Arc` takes two, which puts a
/// [`SecondaryZone`] and its counts in jemalloc's 64-octet class instead
/// of the 80 (100,000 zones: 1.6 MB).
pub type Primaries = Arc<Vec<Upstream>>;

/// One zone this server is a secondary for.
#[derive(Clone, Debug, Hash)]
pub struct SecondaryZone {
    pub origin: Name,
    pub primaries: Primaries,
    /// Where the received zone is kept: the zones of a group or a catalog
    /// share their pattern ([`KeptFile`]).
    pub file: KeptFile,
    /// The catalog zone that made it a member, if one did (RFC 9432).
    pub catalog: Option<Name>,
}

impl SecondaryZone {
    /// The file its received copy is kept in.
    pub fn kept_path(&self) -> Cow<'_, Path> {
        self.file.path(&self.origin)
    }
}
