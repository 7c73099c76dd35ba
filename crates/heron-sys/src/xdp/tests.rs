//! Tests that load the program and bind sockets: root only; each skips
//! with the reason when XDP is not available to the process.

use super::program::{XDP_DROP, XDP_PASS, assemble};
use super::*;
use std::os::fd::AsRawFd;
use std::process::Command;

fn skip() -> bool {
    match unavailable() {
        Some(why) => {
            eprintln!("skipped: XDP unavailable ({why})");
            true
        }
        None => false,
    }
}

fn ether(proto: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&proto.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn ipv4(protocol: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, protocol, 0, 0, 192, 0, 2, 2, 192, 0, 2, 1,
    ];
    h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    h.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    h.extend_from_slice(l4);
    h
}

fn udp(port: u16) -> Vec<u8> {
    let mut u = vec![0xc0, 0x00, 0, 0, 0, 20, 0, 0];
    u[2..4].copy_from_slice(&port.to_be_bytes());
    u.extend_from_slice(&[0; 12]);
    u
}

/// The program's choice for each kind of packet. Built with `XDP_DROP`
/// as the verdict of a redirect that finds no socket, so "to Heron"
/// shows as DROP and "to the kernel" as PASS.
#[test]
fn the_program_takes_udp_to_our_ports_and_passes_the_rest() {
    if skip() {
        return;
    }
    let map = bpf::create_xskmap(1).unwrap();
    let insns = assemble(&[53, 5353], map.as_raw_fd(), XDP_DROP).unwrap();
    let program = bpf::load_xdp_program(&insns, "heron_test").unwrap();
    let verdict = |packet: &[u8]| bpf::test_run_xdp(program.as_fd(), packet).unwrap();
    let to_heron = [
        ("UDP/IPv4 to 53", ether(0x0800, &ipv4(17, 0, &udp(53)))),
        (
            "UDP/IPv4 to 5353",
            ether(0x0800, &ipv4(17, 0x4000, &udp(5353))),
        ),
        ("UDP/IPv6 to 53", ether(0x86dd, &ipv6(17, &udp(53)))),
    ];
    for (what, packet) in &to_heron {
        assert_eq!(verdict(packet), XDP_DROP, "{what}");
    }
    let mut options = ipv4(17, 0, &[0; 4]);
    options[0] = 0x46;
    options.extend_from_slice(&udp(53));
    let mut tcp = udp(53);
    tcp.extend_from_slice(&[0; 12]);
    let to_kernel = [
        ("UDP/IPv4 to 54", ether(0x0800, &ipv4(17, 0, &udp(54)))),
        ("TCP/IPv4 to 53", ether(0x0800, &ipv4(6, 0, &tcp))),
        ("ICMP", ether(0x0800, &ipv4(1, 0, &udp(53)))),
        ("IPv4 options", ether(0x0800, &options)),
        ("first fragment", ether(0x0800, &ipv4(17, 0x2000, &udp(53)))),
        ("later fragment", ether(0x0800, &ipv4(17, 0x0010, &udp(53)))),
        ("IPv6 extension header", ether(0x86dd, &ipv6(0, &udp(53)))),
        ("TCP/IPv6", ether(0x86dd, &ipv6(6, &tcp))),
        ("ARP", ether(0x0806, &[0; 28])),
        ("VLAN", ether(0x8100, &ipv4(17, 0, &udp(53)))),
        ("runt", ether(0x0800, &[0x45, 0, 0])),
        ("IPv6 cut short", ether(0x86dd, &ipv6(17, &[0, 0]))),
    ];
    for (what, packet) in &to_kernel {
        assert_eq!(verdict(packet), XDP_PASS, "{what}");
    }
}

/// A veth pair with one end in a namespace of its own, both removed on
/// drop. Addresses from TEST-NET-2: this machine's own network may use
/// TEST-NET-1 (192.0.2.0/24).
struct Veth {
    ns: String,
    outside: String,
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

impl Veth {
    fn new(tag: &str) -> Veth {
        let id = std::process::id();
        let veth = Veth {
            ns: format!("hsys{tag}{id}"),
            outside: format!("hs{tag}{id}"),
        };
        let inside = format!("{}p", veth.outside);
        assert!(ip(&["netns", "add", &veth.ns]));
        assert!(ip(&[
            "link",
            "add",
            &veth.outside,
            "type",
            "veth",
            "peer",
            "name",
            &inside
        ]));
        assert!(ip(&["link", "set", &inside, "netns", &veth.ns]));
        assert!(ip(&[
            "addr",
            "add",
            "198.51.100.1/24",
            "dev",
            &veth.outside
        ]));
        assert!(ip(&["link", "set", &veth.outside, "up"]));
        let inner = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &veth.ns, "ip"];
            all.extend_from_slice(args);
            assert!(ip(&all));
        };
        inner(&["addr", "add", "198.51.100.2/24", "dev", &inside]);
        inner(&["link", "set", &inside, "up"]);
        inner(&["link", "set", "lo", "up"]);
        veth
    }

    fn has_xdp(&self) -> bool {
        let out = Command::new("ip")
            .args(["link", "show", &self.outside])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .any(|w| w.starts_with("xdp") || w.starts_with("prog/xdp"))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        ip(&["link", "del", &self.outside]);
        ip(&["netns", "del", &self.ns]);
    }
}

#[test]
fn a_socket_receives_udp_to_our_port_and_the_program_goes_with_the_link() {
    if skip() {
        return;
    }
    let veth = Veth::new("r");
    let interface = Interface::find(&veth.outside).unwrap();
    assert_eq!(interface.rx_queues, 1);
    for mode in [Mode::Native, Mode::Generic] {
        let attached = Attached::attach(&interface, &[5353], mode).unwrap();
        assert_eq!(attached.native, mode == Mode::Native);
        assert!(veth.has_xdp());
        let mut socket = XskSocket::bind(interface.index, 0, true).unwrap();
        // veth has no zero-copy: the bind falls back to copy mode.
        assert!(!socket.is_zero_copy());
        attached.serve_queue(0, &socket).unwrap();
        let sent = Command::new("ip")
            .args([
                "netns",
                "exec",
                &veth.ns,
                "dig",
                "@198.51.100.1",
                "-p",
                "5353",
            ])
            .args(["+tries=1", "+time=1", "heron.example."])
            .output()
            .unwrap();
        assert!(!sent.status.success(), "nobody answers");
        let mut frames = Vec::new();
        let mut got = 0;
        while got == 0 && socket.wait(100).unwrap() {
            socket.recycle();
            got = socket.receive(&mut frames, 64);
        }
        assert!(got >= 1, "{mode:?}: the query reached the socket");
        assert_eq!(socket.statistics().unwrap().rx_dropped, 0);
        let packet = socket.packet(&frames[0]);
        assert_eq!(&packet[12..14], &[0x08, 0x00], "IPv4");
        assert_eq!(&packet[36..38], &5353u16.to_be_bytes());
        let question = b"\x05heron\x07example\x00";
        assert!(packet.windows(question.len()).any(|w| w == question));
        for frame in frames.drain(..) {
            socket.release(frame);
        }
        drop(socket);
        drop(attached);
        assert!(!veth.has_xdp(), "{mode:?}: detached with its link");
    }
}

#[test]
fn a_missing_interface_is_named_in_the_error() {
    let err = Interface::find("heron-no-such0").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("heron-no-such0"), "{err}");
    assert!(Interface::find("../lo").is_err());
}
