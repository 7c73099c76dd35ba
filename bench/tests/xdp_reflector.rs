//! `heron-bench xdp-reflector`, the XDP path's floor, on a veth pair into
//! a namespace made here: a query sent from inside comes back as itself
//! with QR set, over IPv4 and IPv6, and the program goes with the
//! process. Needs root and AF_XDP; skipped with the reason otherwise.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use heron_testkit::netns::{VethNamespace, skip_without_xdp};

const PORT: u16 = 5399;

/// A query for `name` A with the given ID, RD set.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Sends `q` to `to` from inside the namespace until an answer comes
/// (the reflector may still be attaching), for at most 10 s.
fn ask_inside(net: &VethNamespace, to: SocketAddr, q: &[u8]) -> Option<Vec<u8>> {
    net.within(|| {
        let any = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
        let socket = UdpSocket::bind(any).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 512];
        while Instant::now() < deadline {
            socket.send_to(q, to).unwrap();
            if let Ok((n, from)) = socket.recv_from(&mut buf)
                && from == to
            {
                return Some(buf[..n].to_vec());
            }
        }
        None
    })
}

struct Reflector(Child);

impl Drop for Reflector {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_xdp_floor_echoes_queries_with_qr_set_and_detaches_at_exit() {
    if skip_without_xdp() {
        return;
    }
    let net = VethNamespace::new("fl").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_heron-bench"))
        .args([
            "xdp-reflector",
            "--listen",
            &format!("{}@{PORT}", net.outside),
        ])
        .spawn()
        .expect("start heron-bench xdp-reflector");
    let mut reflector = Reflector(child);
    for (v6, id) in [(false, 0x1234), (true, 0x4321)] {
        let asked = query(id, "www.edge.test");
        let echoed = ask_inside(&net, net.server(v6, PORT), &asked)
            .unwrap_or_else(|| panic!("no echo over XDP (IPv6: {v6})"));
        let mut expected = asked.clone();
        expected[2] |= 0x80;
        assert_eq!(echoed, expected, "IPv6: {v6}");
    }
    assert!(net.has_xdp(), "the reflector's program is attached");
    // SIGTERM: the loop ends and the program's link goes with the process.
    let pid = reflector.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = reflector.0.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert!(!net.has_xdp(), "no XDP program left on the interface");
}
