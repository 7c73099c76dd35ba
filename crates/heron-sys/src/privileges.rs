//! Dropping root: the user and group a server runs as once its sockets
//! are bound (`[server] user`, `group`).
//!
//! The calls are glibc's `setgroups`, `setgid` and `setuid`, not rustix's:
//! the kernel changes the credentials of the calling thread only, and by
//! the time the server drops them its UDP workers and async runtime
//! threads exist. glibc applies each call to every thread of the process
//! (its `SIGSETXID` broadcast); rustix's `set_thread_*` calls, as their
//! names say, do not.

use std::ffi::{CStr, CString};
use std::io;

/// A user's ids, as the system's user database gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// Room for a passwd or group entry's strings; grown when too small.
const ENTRY_BUFFER: usize = 4096;

/// The uid and primary gid of the user called `name`.
pub fn user(name: &str) -> io::Result<Ids> {
    // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids).
    let entry: libc::passwd = unsafe { std::mem::zeroed() };
    let found = look_up("user", name, entry, |name, entry, buf, found| {
        // SAFETY: `name` is NUL-terminated; `entry`, `buf` (with its
        // length) and `found` are valid for writes for the call, and the
        // strings written into `buf` are not read after it.
        unsafe { libc::getpwnam_r(name, entry, buf.as_mut_ptr().cast(), buf.len(), found) }
    })?;
    Ok(Ids {
        uid: found.pw_uid,
        gid: found.pw_gid,
    })
}

/// The gid of the group called `name`.
pub fn group(name: &str) -> io::Result<u32> {
    // SAFETY: all-zero is a valid `group` (null pointers, zero id).
    let entry: libc::group = unsafe { std::mem::zeroed() };
    let found = look_up("group", name, entry, |name, entry, buf, found| {
        // SAFETY: as in `user`: every pointer is valid for the call and
        // nothing in `buf` is read after it.
        unsafe { libc::getgrnam_r(name, entry, buf.as_mut_ptr().cast(), buf.len(), found) }
    })?;
    Ok(found.gr_gid)
}

/// Calls a `get*nam_r` function, growing its buffer while it is too
/// small; the entry found (whose ids the caller reads, not its strings).
fn look_up<E>(
    what: &str,
    name: &str,
    mut entry: E,
    call: impl Fn(*const libc::c_char, &mut E, &mut [u8], &mut *mut E) -> libc::c_int,
) -> io::Result<E> {
    let name = c_name(name)?;
    let mut buf = vec![0u8; ENTRY_BUFFER];
    loop {
        let mut found: *mut E = std::ptr::null_mut();
        match call(name.as_ptr(), &mut entry, &mut buf, &mut found) {
            0 if found.is_null() => return Err(not_found(what, &name)),
            0 => return Ok(entry),
            libc::ERANGE => buf.resize(buf.len() * 2, 0),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))
}

fn not_found(what: &str, name: &CStr) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no {what} {}", name.to_string_lossy()),
    )
}

/// Most supplementary groups asked for (the kernel's NGROUPS_MAX).
const MAX_GROUPS: usize = 65_536;

/// The groups the user called `name` belongs to in the system's group
/// database, `gid` among them: what `initgroups(3)` would give the user
/// (NSD, BIND's `named -u` and systemd's `User=` all do), so that a file
/// readable through a group (a TLS key of group `ssl-cert`) stays
/// readable after the drop.
pub fn groups_of(name: &str, gid: u32) -> io::Result<Vec<u32>> {
    let name = c_name(name)?;
    let mut groups: Vec<libc::gid_t> = vec![0; 32];
    loop {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: `name` is NUL-terminated; `groups` is valid for writes
        // of `count` entries and `count` for one write, for the call.
        let found =
            unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if found >= 0 {
            groups.truncate((count.max(0) as usize).min(groups.len()));
            return Ok(groups);
        }
        // Too few entries: `count` says how many there are.
        let wanted = (count.max(0) as usize).max(groups.len() * 2);
        if wanted > MAX_GROUPS {
            return Err(io::Error::other("the user is in too many groups"));
        }
        groups.resize(wanted, 0);
    }
}

/// Becomes `ids` in every thread: supplementary groups set to `groups`
/// ([`groups_of`]; the group alone when empty), then the group, then the
/// user (in that order: after `setuid` the others are no longer
/// allowed). A root process that changes all its uids to a non-zero one
/// loses every capability (capabilities(7), "Effect of user ID changes on
/// capabilities"), which is then checked: getting root back must fail.
pub fn drop_to(ids: Ids, groups: &[u32]) -> io::Result<()> {
    let alone = [ids.gid as libc::gid_t];
    let groups = match groups.is_empty() {
        true => &alone[..],
        false => groups,
    };
    // SAFETY: `groups` holds the entries the count says, valid for the
    // call.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })?;
    // SAFETY: plain system calls on integers.
    check(unsafe { libc::setgid(ids.gid) })?;
    // SAFETY: as above.
    check(unsafe { libc::setuid(ids.uid) })?;
    if ids.uid != 0 && rustix::process::geteuid().is_root() {
        return Err(io::Error::other("still root after setuid"));
    }
    // SAFETY: as above; expected to fail.
    if ids.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("root could be regained after setuid"));
    }
    Ok(())
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_groups_are_looked_up() {
        let root = user("root").unwrap();
        assert_eq!(root, Ids { uid: 0, gid: 0 });
        assert_eq!(group("root").unwrap(), 0);
        let missing = user("no-such-user-heron").unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(group("no-such-group-heron").is_err());
        assert!(user("a\0b").is_err());
    }

    #[test]
    fn a_users_groups_hold_the_group_asked_for() {
        let groups = groups_of("root", 0).unwrap();
        assert!(groups.contains(&0), "{groups:?}");
        // A group the user is not a member of is added, as initgroups does.
        assert!(groups_of("root", 4_000_000).unwrap().contains(&4_000_000));
        assert!(groups_of("a\0b", 0).is_err());
    }
}
