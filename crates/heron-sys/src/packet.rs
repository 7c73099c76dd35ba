//! An AF_PACKET socket on one interface: raw Ethernet frames out and in.
//! Tests of the XDP path use it to send frames no IP stack would (another
//! host's addresses, martian sources, bad checksums) and to see every
//! frame that comes back, whatever its addresses.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// A raw socket bound to one interface, for every EtherType.
pub struct PacketSocket {
    socket: OwnedFd,
}

impl PacketSocket {
    /// Opens one on interface `ifindex` (of the calling thread's network
    /// namespace). Needs `CAP_NET_RAW`.
    pub fn bind(ifindex: u32) -> io::Result<PacketSocket> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType, eth};
        let socket = rustix::net::socket_with(
            AddressFamily::PACKET,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(eth::ALL),
        )?;
        let address = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: `address` is a live sockaddr_ll and its size is passed;
        // the kernel only reads it. The descriptor is the socket's own.
        let ret = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                (&address as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { socket })
    }

    /// Sends `frame` (Ethernet header included) as it is.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        rustix::net::send(&self.socket, frame, rustix::net::SendFlags::empty())?;
        Ok(())
    }

    /// The next frame the interface sent or received, into `buf`; None
    /// if none came within `timeout`.
    pub fn receive(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        use rustix::io::Errno;
        use rustix::net::sockopt::{Timeout, set_socket_timeout};
        set_socket_timeout(&self.socket, Timeout::Recv, Some(timeout))?;
        loop {
            match rustix::net::recv(&self.socket, &mut *buf, rustix::net::RecvFlags::empty()) {
                Ok((n, _)) => return Ok(Some(n)),
                Err(Errno::AGAIN) => return Ok(None),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_sent_on_loopback_is_seen_there() {
        if !crate::process::is_root() {
            eprintln!("skipped: not root");
            return;
        }
        let lo = std::fs::read_to_string("/sys/class/net/lo/ifindex").unwrap();
        let socket = PacketSocket::bind(lo.trim().parse().unwrap()).unwrap();
        // To and from the zero MAC, EtherType 0x88b5 (IEEE local
        // experimental): no protocol of the host takes it.
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x88, 0xb5]);
        frame.extend_from_slice(b"heron packet socket test");
        socket.send(&frame).unwrap();
        let mut buf = [0u8; 2048];
        let mut seen = false;
        while let Some(n) = socket.receive(&mut buf, Duration::from_secs(2)).unwrap() {
            if buf[..n] == frame[..] {
                seen = true;
                break;
            }
        }
        assert!(seen, "the frame came back");
    }
}
