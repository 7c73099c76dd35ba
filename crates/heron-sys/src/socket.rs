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

#[cfg(test)]
mod tests {
    use super::*;
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
