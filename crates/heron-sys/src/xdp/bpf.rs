//! The `bpf(2)` commands the XDP path needs: an XSKMAP and the maps of
//! the interface's own addresses, loading a program, attaching it with a
//! link, and running it on a test packet.
//!
//! `libc` has no `union bpf_attr`; each command's part of it is a
//! `#[repr(C)]` struct here, laid out as in `linux/bpf.h`. The kernel
//! reads only `size` bytes and requires the rest of what it knows to be
//! zero, so each struct is zero-initialised (`Default`) before use.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s `BPF_XDP`.
const BPF_XDP: u32 = 37;

/// `XDP_FLAGS_SKB_MODE`: the kernel's generic XDP, for any driver.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: in the driver, before an skb exists.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

/// Calls `bpf(cmd, attr, size_of::<A>())`; returns its result (an fd for
/// the commands that create something).
fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed `#[repr(C)]` struct
    // laid out as the kernel's part of `union bpf_attr` for `cmd`, and
    // the size passed is its own; any pointers inside it were set by the
    // callers below to buffers that outlive this call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut libc::c_void,
            size_of::<A>() as libc::c_uint,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Takes ownership of a file descriptor the kernel just returned.
fn owned_fd(ret: libc::c_long) -> OwnedFd {
    // SAFETY: `ret` is a new descriptor returned by `bpf()` for this
    // process, which nothing else owns or will close.
    unsafe { OwnedFd::from_raw_fd(ret as i32) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let len = name.len().min(15);
    out[..len].copy_from_slice(&name.as_bytes()[..len]);
    out
}

/// Creates a map; the kernel checks the sizes against the type.
fn create_map(
    map_type: u32,
    key: usize,
    value: usize,
    entries: u32,
    name: &str,
) -> io::Result<Map> {
    let mut attr = MapCreate {
        map_type,
        key_size: key as u32,
        value_size: value as u32,
        max_entries: entries,
        map_name: name16(name),
        ..Default::default()
    };
    let fd = bpf(BPF_MAP_CREATE, &mut attr).map(owned_fd)?;
    Ok(Map { fd, key, value })
}

/// A BPF map with the sizes it was made with, so that every key and value
/// handed to the kernel is as long as it reads.
pub struct Map {
    fd: OwnedFd,
    key: usize,
    value: usize,
}

impl Map {
    /// A hash map of up to `entries` keys of `key` bytes.
    pub fn hash(key: usize, value: usize, entries: u32, name: &str) -> io::Result<Map> {
        create_map(BPF_MAP_TYPE_HASH, key, value, entries, name)
    }

    /// An array of `entries` values (keys: `u32` indexes).
    pub fn array(value: usize, entries: u32, name: &str) -> io::Result<Map> {
        create_map(BPF_MAP_TYPE_ARRAY, 4, value, entries, name)
    }

    /// An XSKMAP of `entries` slots (index: RX queue; value: an AF_XDP
    /// socket).
    pub fn xsks(entries: u32) -> io::Result<Map> {
        create_map(BPF_MAP_TYPE_XSKMAP, 4, 4, entries, "heron_xsks")
    }

    fn sized(&self, key: &[u8], value: Option<&[u8]>) -> io::Result<()> {
        if key.len() != self.key || value.is_some_and(|v| v.len() != self.value) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a key of {} bytes and a value of {}", self.key, self.value),
            ));
        }
        Ok(())
    }

    /// Sets `key` to `value` (both as long as the map's).
    pub fn set(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.sized(key, Some(value))?;
        let mut attr = MapElem {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// Removes `key` (NotFound if it is not there).
    pub fn remove(&self, key: &[u8]) -> io::Result<()> {
        self.sized(key, None)?;
        let mut attr = MapElem {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
    }

    /// Another handle on the same map.
    pub fn try_clone(&self) -> io::Result<Map> {
        Ok(Map {
            fd: self.fd.try_clone()?,
            ..*self
        })
    }
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Creates an XSKMAP of `entries` slots.
pub fn create_xskmap(entries: u32) -> io::Result<Map> {
    Map::xsks(entries)
}

/// Puts `socket` in slot `queue` of an XSKMAP.
pub fn set_xskmap_entry(map: &Map, queue: u32, socket: BorrowedFd) -> io::Result<()> {
    map.set(
        &queue.to_ne_bytes(),
        &(socket.as_raw_fd() as u32).to_ne_bytes(),
    )
}

/// Loads an XDP program; on a verifier rejection the error carries the
/// verifier's log.
pub fn load_xdp_program(insns: &[u64], name: &str) -> io::Result<OwnedFd> {
    const LICENSE: &CStr = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    bpf(BPF_PROG_LOAD, &mut attr).map(owned_fd).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let log = String::from_utf8_lossy(&log[..end]);
        if log.is_empty() {
            e
        } else {
            io::Error::new(e.kind(), format!("{e}; verifier: {log}"))
        }
    })
}

/// Attaches `program` to interface `ifindex` with a bpf_link, in the mode
/// `flags` says ([`XDP_FLAGS_DRV_MODE`] or [`XDP_FLAGS_SKB_MODE`]). The
/// program stays attached while the returned link is open: closing it,
/// or the process ending in any way, detaches it.
pub fn link_xdp(program: BorrowedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: program.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(owned_fd)
}

/// Runs an XDP program once on `packet` (`BPF_PROG_TEST_RUN`) and
/// returns its verdict (`XDP_PASS`, `XDP_DROP`, ...).
pub fn test_run_xdp(program: BorrowedFd, packet: &[u8]) -> io::Result<u32> {
    let mut out = vec![0u8; packet.len() + 512];
    let mut attr = TestRun {
        prog_fd: program.as_raw_fd() as u32,
        data_size_in: packet.len() as u32,
        data_size_out: out.len() as u32,
        data_in: packet.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(attr.retval)
}
