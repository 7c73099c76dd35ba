//! AF_XDP: UDP queries straight from the network driver to Heron's
//! workers, past the kernel's IP and socket layers.
//!
//! * [`program`]: the XDP program (assembled here, no compiler needed)
//!   that sends UDP to our ports into an XSKMAP and passes the rest.
//! * [`bpf`]: the `bpf(2)` commands to load, attach and test it.
//! * [`socket`]: an AF_XDP socket, its UMEM and rings.
//!
//! [`Interface`] ties them together for one network interface.

pub mod bpf;
pub mod program;
pub mod socket;

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

pub use socket::{FRAME_SIZE, Frame, XskSocket, pause, wait_any};

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Native if the driver has it, else generic.
    Auto,
    /// In the driver: fastest; not every driver has it.
    Native,
    /// In the kernel's network stack, after an skb is built: any driver.
    Generic,
}

/// A network interface as `/sys/class/net` describes it.
#[derive(Clone, Debug)]
pub struct Interface {
    pub name: String,
    pub index: u32,
    pub rx_queues: u32,
    pub mtu: u32,
}

fn sys_net(name: &str) -> PathBuf {
    PathBuf::from("/sys/class/net").join(name)
}

fn read_number(path: PathBuf) -> io::Result<u32> {
    let text = std::fs::read_to_string(&path)?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{}: not a number: {text:?}", path.display())))
}

impl Interface {
    /// Looks the interface up; NotFound if there is none of that name.
    pub fn find(name: &str) -> io::Result<Interface> {
        let plain = !name.is_empty() && !name.contains(['/', '\0']) && name != "." && name != "..";
        let dir = sys_net(name);
        if !plain || !dir.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no network interface named {name:?}"),
            ));
        }
        let queues = std::fs::read_dir(dir.join("queues"))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count();
        Ok(Interface {
            name: name.to_string(),
            index: read_number(dir.join("ifindex"))?,
            rx_queues: (queues as u32).max(1),
            mtu: read_number(dir.join("mtu"))?,
        })
    }
}

/// The XDP program attached to an interface. Dropping it (or the process
/// ending, even by a crash) detaches the program: it is held by a
/// bpf_link, which lives as long as its file descriptor.
pub struct Attached {
    _link: OwnedFd,
    _program: OwnedFd,
    map: OwnedFd,
    /// Whether the program runs in the driver (else: generic mode).
    pub native: bool,
}

impl Attached {
    /// Loads the program for UDP to `ports` and attaches it to
    /// `interface` in `mode` (Auto: native, else generic).
    pub fn attach(interface: &Interface, ports: &[u16], mode: Mode) -> io::Result<Attached> {
        let map = bpf::create_xskmap(interface.rx_queues).map_err(explain)?;
        use std::os::fd::AsRawFd;
        let insns = program::assemble(ports, map.as_raw_fd(), program::XDP_PASS)?;
        let program = bpf::load_xdp_program(&insns, "heron_xdp").map_err(explain)?;
        let try_mode = |flags| bpf::link_xdp(program.as_fd(), interface.index, flags);
        let (link, native) = match mode {
            Mode::Native => (try_mode(bpf::XDP_FLAGS_DRV_MODE), true),
            Mode::Generic => (try_mode(bpf::XDP_FLAGS_SKB_MODE), false),
            Mode::Auto => match try_mode(bpf::XDP_FLAGS_DRV_MODE) {
                Ok(link) => (Ok(link), true),
                Err(_) => (try_mode(bpf::XDP_FLAGS_SKB_MODE), false),
            },
        };
        let link = link.map_err(|e| {
            let mode = if native { "native" } else { "generic" };
            let e = explain(e);
            io::Error::new(
                e.kind(),
                format!("cannot attach XDP ({mode} mode) to {}: {e}", interface.name),
            )
        })?;
        Ok(Attached {
            _link: link,
            _program: program,
            map,
            native,
        })
    }

    /// Sends the UDP the program picks on `queue` to `socket`.
    pub fn serve_queue(&self, queue: u32, socket: &XskSocket) -> io::Result<()> {
        bpf::set_xskmap_entry(self.map.as_fd(), queue, socket.as_fd())
    }
}

/// Adds what to do to the errors a user can fix.
fn explain(e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "XDP needs root (or CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW)"
        }
        Some(libc::ENOSYS) => "this kernel has no bpf() system call (CONFIG_BPF_SYSCALL)",
        Some(libc::EAFNOSUPPORT) => "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)",
        Some(libc::EOPNOTSUPP) => "the driver has no XDP in this mode; try mode = \"generic\"",
        Some(libc::EBUSY) | Some(libc::EEXIST) => {
            "another XDP program is attached to the interface"
        }
        _ => return e,
    };
    io::Error::new(e.kind(), format!("{e} ({hint})"))
}

/// Whether this process may use XDP here: root on a kernel with bpf()
/// and AF_XDP. Tests that need it skip with this message otherwise.
pub fn unavailable() -> Option<String> {
    if !crate::process::is_root() {
        return Some("not root".into());
    }
    match bpf::create_xskmap(1) {
        Err(e) => Some(format!("no XSKMAP: {}", explain(e))),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests;
