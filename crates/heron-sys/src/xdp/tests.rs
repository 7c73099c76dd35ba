//! Tests that load the program and bind sockets: root only; each skips
//! with the reason when XDP is not available to the process.

use super::program::{MapFds, XDP_DROP, XDP_PASS, address_key, assemble, mac_value};
use super::*;
use std::os::fd::AsRawFd;

fn skip() -> bool {
    match unavailable() {
        Some(why) => {
            eprintln!("skipped: XDP unavailable ({why})");
            true
        }
        None => false,
    }
}

const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn ether(proto: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = OUR_MAC.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
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

/// `frame` with `bytes` written at `at`.
fn with(frame: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    f
}

/// The program's choice for each kind of packet, with 02:00:00:00:00:01,
/// 192.0.2.1 and 2001:db8::1 as the interface's own. Built with
/// `XDP_DROP` as the verdict of a redirect that finds no socket, so "to
/// Heron" shows as DROP and "to the kernel" as PASS.
#[test]
fn the_program_takes_udp_to_our_ports_and_addresses_and_passes_the_rest() {
    if skip() {
        return;
    }
    let map = bpf::create_xskmap(1).unwrap();
    let own = Destinations::create("test", (0, 1500), ServedAddresses::all()).unwrap();
    own.own_mac
        .set(&0u32.to_ne_bytes(), &mac_value(OUR_MAC))
        .unwrap();
    for ip in ["192.0.2.1", "2001:db8::1"] {
        let key = address_key(ip.parse().unwrap());
        own.own_addresses.set(&key, &[1, 0, 0, 0]).unwrap();
    }
    let maps = MapFds {
        xsks: map.as_fd().as_raw_fd(),
        own_mac: own.own_mac.as_fd().as_raw_fd(),
        own_addresses: own.own_addresses.as_fd().as_raw_fd(),
    };
    let insns = assemble(&[53, 5353], maps, XDP_DROP).unwrap();
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
    let (v4, v6) = (&to_heron[0].1, &to_heron[2].1);
    let mut ipv4_bytes_as_ipv6 = [0u8; 16];
    ipv4_bytes_as_ipv6[..4].copy_from_slice(&[192, 0, 2, 1]);
    // IPv4's destination at 30, IPv6's at 38; the MAC at 0.
    let other_host = [
        ("another MAC", with(v4, 0, &[2, 0, 0, 0, 0, 9])),
        ("another MAC, IPv6", with(v6, 5, &[9])),
        ("broadcast MAC", with(v4, 0, &[0xff; 6])),
        ("IPv4 to another host", with(v4, 30, &[8, 8, 8, 8])),
        ("IPv4 broadcast", with(v4, 30, &[255; 4])),
        ("IPv6 to another host", with(v6, 53, &[9])),
        ("IPv6 multicast", with(v6, 38, &[0xff, 2])),
        // c000:201::, IPv4's 192.0.2.1 and zeros: only the version differs.
        ("IPv6 with IPv4's bytes", with(v6, 38, &ipv4_bytes_as_ipv6)),
    ];
    for (what, packet) in &other_host {
        assert_eq!(verdict(packet), XDP_PASS, "{what}");
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

#[test]
fn a_missing_interface_is_named_in_the_error() {
    let err = Interface::find("heron-no-such0").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("heron-no-such0"), "{err}");
    assert!(Interface::find("../lo").is_err());
}

/// An attached interface is followed by its index: the loopback's is
/// found under its name, an index no interface has is none.
#[test]
fn interfaces_are_found_by_index() {
    let lo = Interface::find("lo").expect("a loopback");
    assert_eq!(name_of_index(lo.index).unwrap().as_deref(), Some("lo"));
    assert_eq!(name_of_index(u32::MAX).unwrap(), None);
}
