//! Advisory file locks (`flock(2)`), which the standard library offers
//! only from Rust 1.89 on (the workspace builds with 1.85). The lock
//! belongs to the open file: two opens of one file, even in one process,
//! exclude each other, and closing the file lets go. Also the one way
//! Heron reads a file an operator names ([`read_regular`]): a regular file
//! of bounded size, nothing else.

use std::fs::{File, Metadata};
use std::io;
use std::path::Path;

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

/// The most a configuration file, a TLS certificate, key or CA may hold:
/// far more than any real one, and a bound on what a wrong path
/// (`/dev/zero`) makes Heron read.
pub const MAX_SETTINGS_FILE: u64 = 16 << 20;

/// Why [`read_regular`] read nothing.
#[derive(Debug)]
pub enum Refused {
    /// The file holds this many octets, more than allowed.
    TooLarge(u64),
    /// It is not a regular file but this (`a FIFO (named pipe)`, ...).
    NotRegular(&'static str),
    /// It cannot be opened or read.
    Io(io::Error),
}

/// The contents of the regular file at `path`, and the file as it was
/// when opened, if it holds at most `max` octets. Anything else is refused
/// before a byte is read: a FIFO or a device (`/dev/zero`) has no end to
/// read to, and a directory no text. The open does not block (a FIFO with
/// no writer would wait forever), and the type checked is that of the file
/// opened, not of the path, which may change in between.
pub fn read_regular(path: &Path, max: u64) -> Result<(Vec<u8>, Metadata), Refused> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(Refused::Io)?;
    let metadata = file.metadata().map_err(Refused::Io)?;
    if !metadata.is_file() {
        return Err(Refused::NotRegular(file_kind(&metadata)));
    }
    if metadata.len() > max {
        return Err(Refused::TooLarge(metadata.len()));
    }
    // Read for the size `fstat` gave, without a last read to see the
    // end: a file that grows meanwhile has a newer modification time than
    // `metadata`, so the next read takes it whole.
    let mut text = Vec::with_capacity(metadata.len() as usize);
    file.take(metadata.len())
        .read_to_end(&mut text)
        .map_err(Refused::Io)?;
    Ok((text, metadata))
}

/// [`read_regular`] of a file of settings (at most [`MAX_SETTINGS_FILE`]),
/// refused with a message that names `path`.
pub fn read_settings_file(path: &Path) -> Result<Vec<u8>, String> {
    read_regular(path, MAX_SETTINGS_FILE)
        .map(|(bytes, _)| bytes)
        .map_err(|refused| {
            let path = path.display();
            match refused {
                Refused::TooLarge(size) => format!(
                    "{path}: {size} octets, more than the {} MiB a file of settings may hold",
                    MAX_SETTINGS_FILE >> 20
                ),
                Refused::NotRegular(kind) => format!("{path} is {kind}, not a regular file"),
                Refused::Io(e) => format!("{path}: cannot read: {e}"),
            }
        })
}

/// [`read_settings_file`] as text.
pub fn read_settings_text(path: &Path) -> Result<String, String> {
    String::from_utf8(read_settings_file(path)?)
        .map_err(|_| format!("{}: stream did not contain valid UTF-8", path.display()))
}

/// What a file that is not a regular one is, for a person.
pub fn file_kind(metadata: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a file of an unknown kind"
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

    #[test]
    fn only_a_regular_file_of_bounded_size_is_read() {
        let dir = std::env::temp_dir().join(format!("heron-sys-regular-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, "1234").unwrap();
        assert_eq!(read_regular(&file, 4).unwrap().0, b"1234");
        assert!(matches!(read_regular(&file, 3), Err(Refused::TooLarge(4))));
        let said = read_settings_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(said, "/dev/zero is a character device, not a regular file");
        let fifo = dir.join("fifo");
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, mode).unwrap();
        let said = read_settings_file(&fifo).unwrap_err();
        assert!(
            said.ends_with("is a FIFO (named pipe), not a regular file"),
            "{said}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
