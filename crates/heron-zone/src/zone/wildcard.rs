//! Wildcard names (RFC 4592): the `*` child of a name, built on the stack.

use heron_proto::name::MAX_NAME_LEN;

/// `*.` and a name, in wire form, without allocating.
pub(crate) struct WildcardName {
    buf: [u8; MAX_NAME_LEN],
    len: usize,
}

impl WildcardName {
    /// The wildcard child of `encloser`, or None past 255 octets.
    pub(crate) fn below(encloser: &[u8]) -> Option<WildcardName> {
        let len = 2 + encloser.len();
        if len > MAX_NAME_LEN {
            return None;
        }
        let mut buf = [0u8; MAX_NAME_LEN];
        buf[..2].copy_from_slice(b"\x01*");
        buf[2..len].copy_from_slice(encloser);
        Some(WildcardName { buf, len })
    }

    pub(crate) fn as_wire(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}
