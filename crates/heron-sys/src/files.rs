//! Advisory file locks (`flock(2)`), which the standard library offers
//! only from Rust 1.89 on (the workspace builds with 1.85). The lock
//! belongs to the open file: two opens of one file, even in one process,
//! exclude each other, and closing the file lets go.

use std::fs::File;
use std::io;

use rustix::fs::{FlockOperation, flock};

/// How a file is locked: shared with other shared holders, or alone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// Locks `file` as `kind`, waiting for holders that exclude it.
pub fn lock(file: &File, kind: LockKind) -> io::Result<()> {
    let operation = match kind {
        LockKind::Shared => FlockOperation::LockShared,
        LockKind::Exclusive => FlockOperation::LockExclusive,
    };
    Ok(flock(file, operation)?)
}

/// Locks `file` as `kind` if nobody holds it in a way that excludes
/// that; whether it did.
pub fn try_lock(file: &File, kind: LockKind) -> io::Result<bool> {
    let operation = match kind {
        LockKind::Shared => FlockOperation::NonBlockingLockShared,
        LockKind::Exclusive => FlockOperation::NonBlockingLockExclusive,
    };
    match flock(file, operation) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_exclude_an_exclusive_one_until_they_close() {
        let dir = tempfile::tempdir().unwrap();
        let open = || File::open(dir.path()).unwrap();
        let (first, second) = (open(), open());
        lock(&first, LockKind::Shared).unwrap();
        assert!(try_lock(&second, LockKind::Shared).unwrap());
        let alone = open();
        assert!(!try_lock(&alone, LockKind::Exclusive).unwrap());
        drop((first, second));
        assert!(try_lock(&alone, LockKind::Exclusive).unwrap());
        assert!(!try_lock(&open(), LockKind::Shared).unwrap());
        drop(alone);
        lock(&open(), LockKind::Exclusive).unwrap();
    }
}
