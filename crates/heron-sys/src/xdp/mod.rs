//! AF_XDP: UDP queries straight from the network driver to Heron's
//! workers, past the kernel's IP and socket layers.
//!
//! * [`program`]: the XDP program (assembled here, no compiler needed)
//!   that sends UDP to our ports, MAC and addresses into an XSKMAP and
//!   passes the rest.
//! * [`bpf`]: the `bpf(2)` commands to load, attach and test it.
//! * [`socket`]: an AF_XDP socket, its UMEM and rings.
//! * [`local`]: the host's addresses and MACs, and a watch on them.
//!
//! [`Attached`] ties them together for one network interface.

pub mod bpf;
pub mod local;
pub mod program;
pub mod socket;

use std::collections::BTreeSet;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

pub use socket::{FRAME_SIZE, Frame, MAX_FRAME_IN, UMEM_BYTES, XskSocket, pause, wait_any};

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
    /// A loopback interface: what the host sends itself never crosses a
    /// driver, so XDP there sees nothing it may answer.
    pub loopback: bool,
    /// A device over others (a bridge, a bond, a team): by the time a
    /// frame reaches it, the kernel has taken its VLAN tag aside, where a
    /// generic-mode program cannot see it.
    pub upper: bool,
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

/// The name of the interface with kernel index `index`, if there is one.
fn name_of_index(index: u32) -> io::Result<Option<String>> {
    for entry in std::fs::read_dir("/sys/class/net")? {
        let entry = entry?;
        // An interface going away meanwhile is not the one looked for.
        if read_number(entry.path().join("ifindex")).is_ok_and(|i| i == index) {
            return Ok(Some(entry.file_name().to_string_lossy().into_owned()));
        }
    }
    Ok(None)
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
            loopback: read_number(dir.join("type")).is_ok_and(|t| t == ARPHRD_LOOPBACK),
            upper: is_upper(&dir),
        })
    }
}

/// `/sys/class/net/NAME/type` of a loopback interface.
const ARPHRD_LOOPBACK: u32 = 772;

/// Whether the interface at `dir` sits over others: a bridge or bond by
/// its own folder, anything else by its `lower_*` links.
fn is_upper(dir: &std::path::Path) -> bool {
    let lower = |e: std::fs::DirEntry| e.file_name().to_string_lossy().starts_with("lower_");
    dir.join("bridge").exists()
        || dir.join("bonding").exists()
        || std::fs::read_dir(dir).is_ok_and(|d| d.filter_map(Result::ok).any(lower))
}

/// Which of an interface's addresses XDP serves: those the server listens
/// on (a wildcard: all of its family). Any other address of the interface
/// is left to the kernel, where another program may listen, and where a
/// truncated answer's TCP retry finds a listener (black-box finding BJ-5:
/// IPv6 addresses the server did not listen on were answered over XDP).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServedAddresses {
    pub any_v4: bool,
    pub any_v6: bool,
    pub exact: BTreeSet<IpAddr>,
}

impl ServedAddresses {
    /// Every address: as if listening on both wildcards.
    pub fn all() -> ServedAddresses {
        ServedAddresses {
            any_v4: true,
            any_v6: true,
            exact: BTreeSet::new(),
        }
    }

    /// The addresses `listen` names (its unspecified ones: wildcards).
    pub fn of(listen: impl IntoIterator<Item = IpAddr>) -> ServedAddresses {
        let mut served = ServedAddresses::default();
        for ip in listen {
            match ip {
                IpAddr::V4(v4) if v4.is_unspecified() => served.any_v4 = true,
                IpAddr::V6(v6) if v6.is_unspecified() => served.any_v6 = true,
                ip => _ = served.exact.insert(ip),
            }
        }
        served
    }

    pub fn takes(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(_) if self.any_v4 => true,
            IpAddr::V6(_) if self.any_v6 => true,
            ip => self.exact.contains(&ip),
        }
    }
}

/// Addresses one interface's program takes as its own, at most.
pub const MAX_ADDRESSES: u32 = 1024;

/// The program's maps of what is the interface's own: its MAC and its IP
/// addresses. Frames to anything else go to the kernel. Each handle
/// remembers what it wrote, so [`Destinations::refresh`] changes only
/// what changed.
pub struct Destinations {
    interface: String,
    /// The kernel's index of the interface the program is attached to:
    /// followed through a rename; another interface made under the old
    /// name has another index and holds no program of ours.
    index: u32,
    /// Found gone ([`Destinations::mark_lost`]).
    lost: bool,
    own_mac: bpf::Map,
    own_addresses: bpf::Map,
    mac: Option<[u8; 6]>,
    addresses: BTreeSet<IpAddr>,
    served: ServedAddresses,
    /// Addresses past [`MAX_ADDRESSES`] at the last refresh: the kernel's.
    left_out: usize,
    /// The interface's MTU when attached (what replies are sized for), and
    /// at the last refresh.
    mtu: (u32, u32),
}

impl Destinations {
    fn create(
        interface: &str,
        (index, mtu): (u32, u32),
        served: ServedAddresses,
    ) -> io::Result<Destinations> {
        Ok(Destinations {
            interface: interface.to_string(),
            index,
            lost: false,
            own_mac: bpf::Map::array(program::MAC_VALUE_LEN, 1, "heron_own_mac")?,
            own_addresses: bpf::Map::hash(
                program::ADDRESS_KEY_LEN,
                4,
                MAX_ADDRESSES,
                "heron_own_addrs",
            )?,
            mac: None,
            addresses: BTreeSet::new(),
            served,
            left_out: 0,
            mtu: (mtu, mtu),
        })
    }

    /// Another handle on the same maps, knowing what they hold.
    pub fn try_clone(&self) -> io::Result<Destinations> {
        Ok(Destinations {
            interface: self.interface.clone(),
            index: self.index,
            lost: self.lost,
            own_mac: self.own_mac.try_clone()?,
            own_addresses: self.own_addresses.try_clone()?,
            mac: self.mac,
            addresses: self.addresses.clone(),
            served: self.served.clone(),
            left_out: self.left_out,
            mtu: self.mtu,
        })
    }

    /// The interface's name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Notes that the interface is gone ([`Destinations::refresh`] found
    /// no interface of its index): [`Destinations::lost_name`] says so.
    pub fn mark_lost(&mut self) {
        self.lost = true;
    }

    /// The interface's name, if it was found gone.
    pub fn lost_name(&self) -> Option<&str> {
        self.lost.then_some(self.interface.as_str())
    }

    /// The interface's addresses past what the program holds
    /// ([`MAX_ADDRESSES`]), left to the kernel.
    pub fn left_out(&self) -> usize {
        self.left_out
    }

    /// The interface's MTU when attached, and as last read.
    pub fn mtu(&self) -> (u32, u32) {
        self.mtu
    }

    /// The addresses the program takes as the interface's now.
    pub fn addresses(&self) -> &BTreeSet<IpAddr> {
        &self.addresses
    }

    /// Makes the maps hold the interface's MAC (read now) and its
    /// addresses among `host`'s that it serves; true if anything changed.
    ///
    /// The interface is found by its index: renamed, it is followed (its
    /// new name is [`Destinations::interface`] from then on); deleted,
    /// this fails with [`io::ErrorKind::NotFound`], and an interface made
    /// again under its name is not it.
    pub fn refresh(&mut self, host: &[local::HostAddress]) -> io::Result<bool> {
        let Some(name) = name_of_index(self.index)? else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "interface {} (index {}) is gone",
                    self.interface, self.index
                ),
            ));
        };
        let renamed = name != self.interface;
        self.interface = name;
        if let Ok(mtu) = read_number(sys_net(&self.interface).join("mtu")) {
            self.mtu.1 = mtu;
        }
        let mac = local::mac_address(&self.interface)?;
        let mut changed = renamed;
        if self.mac != Some(mac) {
            self.own_mac
                .set(&0u32.to_ne_bytes(), &program::mac_value(mac))?;
            self.mac = Some(mac);
            changed = true;
        }
        let now: BTreeSet<IpAddr> = host
            .iter()
            .filter(|a| a.interface == self.interface && self.served.takes(a.ip))
            .map(|a| a.ip)
            .collect();
        for gone in self.addresses.difference(&now).copied().collect::<Vec<_>>() {
            match self.own_addresses.remove(&program::address_key(gone)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => self.addresses.remove(&gone),
            };
            changed = true;
        }
        // Past the map's room the rest are left to the kernel, counted
        // (black-box finding BJ-12: each refresh failed with E2BIG).
        let mut left_out = 0;
        for new in now.difference(&self.addresses).copied().collect::<Vec<_>>() {
            if self.addresses.len() >= MAX_ADDRESSES as usize {
                left_out += 1;
                continue;
            }
            self.own_addresses
                .set(&program::address_key(new), &[1, 0, 0, 0])?;
            self.addresses.insert(new);
            changed = true;
        }
        changed |= left_out != self.left_out;
        self.left_out = left_out;
        Ok(changed)
    }
}

/// The XDP program attached to an interface. Dropping it (or the process
/// ending, even by a crash) detaches the program: it is held by a
/// bpf_link, which lives as long as its file descriptor.
pub struct Attached {
    _link: OwnedFd,
    _program: OwnedFd,
    map: bpf::Map,
    destinations: Destinations,
    /// Whether the program runs in the driver (else: generic mode).
    pub native: bool,
    /// Why native mode was refused, when `auto` fell back to generic.
    pub native_refused: Option<String>,
}

impl Attached {
    /// Loads the program for UDP to `ports` and to the interface's MAC
    /// and addresses (as they are now: see [`Attached::destinations`])
    /// and attaches it to `interface` in `mode` (Auto: native, else
    /// generic), for the addresses of it `served` names.
    pub fn attach(
        interface: &Interface,
        ports: &[u16],
        mode: Mode,
        served: ServedAddresses,
    ) -> io::Result<Attached> {
        let map = bpf::create_xskmap(interface.rx_queues).map_err(explain)?;
        let mut destinations =
            Destinations::create(&interface.name, (interface.index, interface.mtu), served)
                .map_err(explain)?;
        destinations.refresh(&local::host_addresses()?)?;
        let maps = program::MapFds {
            xsks: map.as_fd().as_raw_fd(),
            own_mac: destinations.own_mac.as_fd().as_raw_fd(),
            own_addresses: destinations.own_addresses.as_fd().as_raw_fd(),
        };
        let insns = program::assemble(ports, maps, program::XDP_PASS)?;
        let program = bpf::load_xdp_program(&insns, "heron_xdp").map_err(explain)?;
        let try_mode = |flags| bpf::link_xdp(program.as_fd(), interface.index, flags);
        let mut native_refused = None;
        let (link, native) = match mode {
            Mode::Native => (try_mode(bpf::XDP_FLAGS_DRV_MODE), true),
            Mode::Generic => (try_mode(bpf::XDP_FLAGS_SKB_MODE), false),
            Mode::Auto => match try_mode(bpf::XDP_FLAGS_DRV_MODE) {
                Ok(link) => (Ok(link), true),
                Err(e) => {
                    // Kept, so that the log says why (black-box finding
                    // BJ-6: the fallback was silent).
                    native_refused = Some(explain_attach(e, interface).to_string());
                    (try_mode(bpf::XDP_FLAGS_SKB_MODE), false)
                }
            },
        };
        let link = link.map_err(|e| {
            let mode = if native { "native" } else { "generic" };
            let e = explain_attach(e, interface);
            io::Error::new(
                e.kind(),
                format!("cannot attach XDP ({mode} mode) to {}: {e}", interface.name),
            )
        })?;
        Ok(Attached {
            _link: link,
            _program: program,
            map,
            destinations,
            native,
            native_refused,
        })
    }

    /// Sends the UDP the program picks on `queue` to `socket`.
    pub fn serve_queue(&self, queue: u32, socket: &XskSocket) -> io::Result<()> {
        bpf::set_xskmap_entry(&self.map, queue, socket.as_fd())
    }

    /// A handle on the program's MAC and addresses, to keep them as the
    /// interface's change (they were read at attach).
    pub fn destinations(&self) -> io::Result<Destinations> {
        self.destinations.try_clone()
    }
}

/// [`explain`] for attaching, which knows the interface: a native-mode
/// MTU past what the driver's XDP takes (veth: a page) is ERANGE.
fn explain_attach(e: io::Error, interface: &Interface) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ERANGE) => io::Error::new(
            e.kind(),
            format!(
                "{e} (the MTU, {}, is too large for this driver's native XDP: lower it or use mode = \"generic\")",
                interface.mtu
            ),
        ),
        Some(libc::EBUSY) | Some(libc::EEXIST) => io::Error::new(
            e.kind(),
            format!(
                "{e} (another XDP program is attached to the interface, in either mode: \
                 `ip link set dev {} xdp off` removes it, if nothing else needs it)",
                interface.name
            ),
        ),
        _ => explain(e),
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
