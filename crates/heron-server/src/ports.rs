//! Whether a port Heron is about to listen on is held by another process.
//! Heron binds its listening sockets with `SO_REUSEPORT` (one per worker),
//! so a second server on the same address and port, run by the same user
//! with the option too (a second Heron, NSD, Knot), binds without error
//! and the kernel shares the queries between the two.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Socket, Type};

/// Whether no DNS client sends from UDP source `port`: 0 (forged: no
/// reply reaches it), or a service that answers any datagram (echo 7,
/// systat 11, daytime 13, quote of the day 17, chargen 19, time 37). A reply to one
/// of those, even an error, is answered again: one forged query starts a
/// loop that never ends (Loop DoS, CVE-2024-2169; black-box finding BJ-4).
/// BIND drops queries from 7, 13, 19 and 37 likewise.
pub fn never_a_client(port: u16) -> bool {
    matches!(port, 0 | 7 | 11 | 13 | 17 | 19 | 37)
}

/// UDP or TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Whether some socket already holds `addr` for `transport`: a bind
/// without `SO_REUSEPORT` fails then, whoever holds it. Call it before
/// this process binds `addr` itself. Port 0 (any free port) is never held.
pub fn held_elsewhere(addr: SocketAddr, transport: Transport) -> bool {
    let Some(socket) = probe(addr, transport) else {
        return false;
    };
    matches!(socket.bind(&addr.into()), Err(e) if e.kind() == io::ErrorKind::AddrInUse)
}

/// Whether what holds `addr` ([`held_elsewhere`]) is a socket this
/// process's listeners would share it with (`SO_REUSEPORT` on both, the
/// same user): then the kernel splits the traffic between the two. Not
/// so for anything else (a client's connection from that port, another
/// user's server): the listeners' own bind then fails and says so.
pub fn shared_with_another(addr: SocketAddr, transport: Transport) -> bool {
    if !held_elsewhere(addr, transport) {
        return false;
    }
    let Some(socket) = probe(addr, transport) else {
        return false;
    };
    socket.set_reuse_port(true).is_ok() && socket.bind(&addr.into()).is_ok()
}

/// A socket set up as the listeners of `addr` are (IPv6 alone; for TCP
/// a connection of an earlier run waiting out TIME_WAIT holds nothing),
/// not bound; None for port 0 or when none can be made.
fn probe(addr: SocketAddr, transport: Transport) -> Option<Socket> {
    if addr.port() == 0 {
        return None;
    }
    let kind = match transport {
        Transport::Udp => Type::DGRAM,
        Transport::Tcp => Type::STREAM,
    };
    let socket = Socket::new(Domain::for_address(addr), kind, None).ok()?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(true);
    }
    if transport == Transport::Tcp {
        let _ = socket.set_reuse_address(true);
    }
    Some(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_of_services_that_answer_anything_are_never_a_clients() {
        for port in [0, 7, 11, 13, 17, 19, 37] {
            assert!(never_a_client(port), "{port}");
        }
        for port in [1, 53, 123, 1024, 5353, 65535] {
            assert!(!never_a_client(port), "{port}");
        }
    }

    fn shared_udp(addr: SocketAddr) -> std::net::UdpSocket {
        crate::udp::bind_reuseport(addr).unwrap()
    }

    #[test]
    fn a_port_another_socket_holds_is_found_and_a_free_one_is_not() {
        let udp = shared_udp("127.0.0.1:0".parse().unwrap());
        let taken = udp.local_addr().unwrap();
        assert!(held_elsewhere(taken, Transport::Udp));
        let tcp = crate::tcp::event_loop::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
        let listening = tcp.local_addr().unwrap();
        assert!(held_elsewhere(listening, Transport::Tcp));
        assert!(shared_with_another(taken, Transport::Udp));
        assert!(shared_with_another(listening, Transport::Tcp));
        drop((udp, tcp));
        assert!(!held_elsewhere(taken, Transport::Udp));
        assert!(!held_elsewhere(listening, Transport::Tcp));
        assert!(!held_elsewhere(
            "127.0.0.1:0".parse().unwrap(),
            Transport::Udp
        ));
    }

    /// A client's connection from a port holds it, but no listener of
    /// ours could share it: no warning of shared traffic (black-box
    /// finding: one was given, then the bind failed).
    #[test]
    fn a_port_a_connection_holds_is_not_shared() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let from = client.local_addr().unwrap();
        assert!(held_elsewhere(from, Transport::Tcp));
        assert!(!shared_with_another(from, Transport::Tcp));
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let bound = plain.local_addr().unwrap();
        assert!(held_elsewhere(bound, Transport::Udp));
        assert!(!shared_with_another(bound, Transport::Udp));
    }
}
