//! Socket options the standard library lacks.

use std::io;
use std::os::fd::AsFd;

/// Asks for a receive buffer of `bytes`: past `net.core.rmem_max` where
/// the process may (`SO_RCVBUFFORCE`, root), else up to that maximum.
pub fn grow_receive_buffer(socket: impl AsFd, bytes: usize) -> io::Result<()> {
    use rustix::net::sockopt::{set_socket_recv_buffer_size, set_socket_recv_buffer_size_force};
    set_socket_recv_buffer_size_force(&socket, bytes)
        .or_else(|_| set_socket_recv_buffer_size(&socket, bytes))?;
    Ok(())
}

/// As [`grow_receive_buffer`], for the send buffer (`SO_SNDBUFFORCE`).
pub fn grow_send_buffer(socket: impl AsFd, bytes: usize) -> io::Result<()> {
    use rustix::net::sockopt::{set_socket_send_buffer_size, set_socket_send_buffer_size_force};
    set_socket_send_buffer_size_force(&socket, bytes)
        .or_else(|_| set_socket_send_buffer_size(&socket, bytes))?;
    Ok(())
}

/// Sets `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2+, IPv4 and IPv6 sockets):
/// a socket bound to an address with port 0 gets its port at `connect`,
/// chosen for the 4-tuple, so that many outgoing connections from one
/// source address to different peers can share local ports instead of
/// each holding one of the ephemeral range at `bind`.
pub fn bind_address_no_port(socket: impl AsFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: `on` is a live c_int and its size is passed; the kernel
    // reads an int for this option; the descriptor is borrowed for the call.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bound with port 0, a socket with the option has no port until it
    /// connects (without it, `bind` picks one at once).
    #[test]
    fn bound_without_a_port_until_connected() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        for (set, port_at_bind) in [(true, 0), (false, 1)] {
            let socket = rustix::net::socket(
                rustix::net::AddressFamily::INET,
                rustix::net::SocketType::STREAM,
                None,
            )
            .unwrap();
            if set {
                bind_address_no_port(&socket).unwrap();
            }
            let source: std::net::SocketAddr = "127.0.0.2:0".parse().unwrap();
            rustix::net::bind(&socket, &source).unwrap();
            let port = |s: &std::os::fd::OwnedFd| {
                let local = rustix::net::getsockname(s).unwrap();
                std::net::SocketAddr::try_from(local).unwrap().port()
            };
            assert_eq!(port(&socket).min(1), port_at_bind, "set: {set}");
            rustix::net::connect(&socket, &listener.local_addr().unwrap()).unwrap();
            assert_ne!(port(&socket), 0, "a port once connected");
        }
    }
    use rustix::net::sockopt::{socket_recv_buffer_size, socket_send_buffer_size};
    use std::net::UdpSocket;

    #[test]
    fn buffers_grow() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (recv, send) = (
            socket_recv_buffer_size(&socket).unwrap(),
            socket_send_buffer_size(&socket).unwrap(),
        );
        // The kernel doubles what it is given (for its own bookkeeping),
        // and caps it at rmem_max/wmem_max when not forced.
        grow_receive_buffer(&socket, 4 * recv).unwrap();
        grow_send_buffer(&socket, 4 * send).unwrap();
        assert!(socket_recv_buffer_size(&socket).unwrap() >= recv);
        assert!(socket_send_buffer_size(&socket).unwrap() >= send);
        if crate::process::is_root() {
            assert!(socket_recv_buffer_size(&socket).unwrap() >= 8 * recv);
        }
    }
}
