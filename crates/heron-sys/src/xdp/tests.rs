//! Tests that load the program and bind sockets: root only; each skips
//! with the reason when XDP is not available to the process.

use super::program::{XDP_DROP, XDP_PASS, assemble};
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

#[test]
fn a_missing_interface_is_named_in_the_error() {
    let err = Interface::find("heron-no-such0").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("heron-no-such0"), "{err}");
    assert!(Interface::find("../lo").is_err());
}
