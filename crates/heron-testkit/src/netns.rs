//! A network namespace joined to the root namespace by a veth pair, for
//! tests of the XDP path: the server on the root side, clients inside.
//!
//! Addresses are TEST-NET-2 (198.51.100.0/24) and 2001:db8:5::/64, on the
//! pair only: this machine's own network may use TEST-NET-1.

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// The server's (root side) addresses.
pub const OUTSIDE_V4: &str = "198.51.100.1";
pub const OUTSIDE_V6: &str = "2001:db8:5::1";
const INSIDE_V4: &str = "198.51.100.2/24";
const INSIDE_V6: &str = "2001:db8:5::2/64";

/// The namespace and the pair; both removed on drop, even when a test
/// fails.
pub struct VethNamespace {
    pub namespace: String,
    /// The root side's interface, where the server listens.
    pub outside: String,
    /// Held until the pair is gone: every pair has the same addresses,
    /// so the kernel's replies (TCP) of two at once could take the
    /// other's route.
    _only_pair: MutexGuard<'static, ()>,
}

/// Held by the one pair this process has at a time.
static ONE_PAIR: Mutex<()> = Mutex::new(());

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

impl VethNamespace {
    /// Creates namespace `heronns{tag}{pid}` and pair `hx{tag}{pid}`; `tag` keeps the names of
    /// tests in one process apart.
    pub fn new(tag: &str) -> Result<VethNamespace, String> {
        VethNamespace::with_queues(tag, 1)
    }

    /// [`VethNamespace::new`] with `queues` receive and send queues on
    /// each end (one AF_XDP socket, and one worker, per queue).
    pub fn with_queues(tag: &str, queues: usize) -> Result<VethNamespace, String> {
        // A test that failed holding it poisoned it; the pair is gone.
        let only_pair = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
        let id = std::process::id();
        let net = VethNamespace {
            namespace: format!("heronns{tag}{id}"),
            outside: format!("hx{tag}{id}"),
            _only_pair: only_pair,
        };
        let inside = format!("{}i", net.outside);
        ip(&["netns", "add", &net.namespace])?;
        // From here on, Drop cleans up whatever was made.
        let q = queues.max(1).to_string();
        ip(&[
            "link",
            "add",
            &net.outside,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &inside,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        ip(&["link", "set", &inside, "netns", &net.namespace])?;
        ip(&[
            "addr",
            "add",
            &format!("{OUTSIDE_V4}/24"),
            "dev",
            &net.outside,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{OUTSIDE_V6}/64"),
            "dev",
            &net.outside,
            "nodad",
        ])?;
        // Nothing that comes in on the pair is routed on, whatever the
        // host's `ip_forward`: tests send frames to other hosts' addresses.
        let forwarding = format!("/proc/sys/net/ipv4/conf/{}/forwarding", net.outside);
        std::fs::write(&forwarding, "0").map_err(|e| format!("{forwarding}: {e}"))?;
        ip(&["link", "set", &net.outside, "up"])?;
        net.ip_inside(&["addr", "add", INSIDE_V4, "dev", &inside])?;
        net.ip_inside(&["addr", "add", INSIDE_V6, "dev", &inside, "nodad"])?;
        net.ip_inside(&["link", "set", &inside, "up"])?;
        net.ip_inside(&["link", "set", "lo", "up"])?;
        Ok(net)
    }

    /// Adds address `cidr` (e.g. "2001:db8:5::3/64") to the pair's
    /// inside end, for clients that need several source addresses.
    pub fn add_inside_address(&self, cidr: &str) -> Result<(), String> {
        let inside = format!("{}i", self.outside);
        let mut args = vec!["addr", "add", cidr, "dev", &inside];
        if cidr.contains(':') {
            args.push("nodad");
        }
        self.ip_inside(&args)
    }

    /// Routes `network` (one added inside beside the pair's own) from the
    /// root side over the pair; the route goes with the pair.
    pub fn route_to_inside(&self, network: &str) -> Result<(), String> {
        ip(&["route", "add", network, "dev", &self.outside])
    }

    /// Adds (or with `add` false, removes) address `cidr` on the root
    /// side's interface, as an operator would while the server runs.
    pub fn outside_address(&self, add: bool, cidr: &str) -> Result<(), String> {
        let mut args = vec!["addr", if add { "add" } else { "del" }, cidr];
        args.extend(["dev", &self.outside]);
        if add && cidr.contains(':') {
            args.push("nodad");
        }
        ip(&args)
    }

    /// Sets the MTU of the root side's interface, as an operator would
    /// while the server runs.
    pub fn outside_mtu(&self, mtu: u32) -> Result<(), String> {
        ip(&["link", "set", "dev", &self.outside, "mtu", &mtu.to_string()])
    }

    /// The name of the pair's end inside the namespace.
    pub fn inside(&self) -> String {
        format!("{}i", self.outside)
    }

    /// `/sys/class/net/IF/FILE` of the root side's interface, or of the
    /// inside one (as the namespace sees it).
    fn sys_net(&self, inside: bool, file: &str) -> String {
        let text = if inside {
            let path = format!("/sys/class/net/{}/{file}", self.inside());
            String::from_utf8_lossy(&self.run("cat", &[&path]).stdout).into_owned()
        } else {
            let path = format!("/sys/class/net/{}/{file}", self.outside);
            std::fs::read_to_string(path).unwrap_or_default()
        };
        text.trim().to_string()
    }

    /// The MAC address of the root side's end, or of the inside one.
    pub fn mac(&self, inside: bool) -> [u8; 6] {
        let text = self.sys_net(inside, "address");
        let bytes: Vec<u8> = text
            .split(':')
            .map(|b| u8::from_str_radix(b, 16).expect("a MAC"))
            .collect();
        bytes.try_into().expect("a MAC of 6 bytes")
    }

    /// The interface index of the inside end, in the namespace.
    pub fn inside_index(&self) -> u32 {
        self.sys_net(true, "ifindex").parse().expect("an ifindex")
    }

    fn ip_inside(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["netns", "exec", &self.namespace, "ip"];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// The server's address on the pair for `port`, IPv4 or IPv6.
    pub fn server(&self, v6: bool, port: u16) -> SocketAddr {
        let ip: IpAddr = if v6 { OUTSIDE_V6 } else { OUTSIDE_V4 }.parse().unwrap();
        SocketAddr::new(ip, port)
    }

    /// Runs `program args` inside the namespace.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.namespace, program])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// Runs `f` on a thread inside the namespace (its sockets are the
    /// namespace's) and returns what it returns.
    pub fn within<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                heron_sys::process::enter_network_namespace(&self.namespace)
                    .expect("entering the test namespace");
                f()
            })
            .join()
            .expect("thread in the namespace")
        })
    }

    /// Whether an XDP program is attached to the root side's interface.
    pub fn has_xdp(&self) -> bool {
        let out = Command::new("ip")
            .args(["link", "show", &self.outside])
            .output()
            .unwrap();
        // "xdp", "xdpgeneric", "prog/xdp": not the peer's namespace name.
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .any(|w| w.starts_with("xdp") || w.starts_with("prog/xdp"))
    }
}

impl Drop for VethNamespace {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.outside]);
        let _ = ip(&["netns", "del", &self.namespace]);
    }
}

/// Why XDP tests cannot run here (not root, no AF_XDP), or None.
pub fn xdp_unavailable() -> Option<String> {
    heron_sys::xdp::unavailable()
}

/// True, after saying why, when XDP tests cannot run here: a test
/// returns early on it.
pub fn skip_without_xdp() -> bool {
    let why = xdp_unavailable();
    if let Some(why) = &why {
        eprintln!("skipped: XDP unavailable ({why})");
    }
    why.is_some()
}
