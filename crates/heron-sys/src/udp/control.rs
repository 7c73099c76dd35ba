//! Control messages beside datagrams: the address a query was sent to
//! (`IP_PKTINFO`, `IPV6_PKTINFO`), which a socket bound to a wildcard
//! address needs to answer from that same address, and a reply's source
//! address and segment size (`UDP_SEGMENT`).
//!
//! Without the first, a host of several addresses answers a query sent to
//! one of them from whichever address the route prefers, and the client
//! drops the answer as coming from a stranger (Knot answers from the
//! address asked, as a resolver expects; BIND binds each address).
//!
//! Control messages are read and written as bytes in the layout the
//! kernel uses on 64-bit Linux (checked against libc's `CMSG_*` in the
//! tests), so no pointer is cast here.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};

/// Octets of control room a message has: an IPv6 pktinfo and a segment
/// size, each in its aligned space.
pub(super) const CONTROL_SPACE: usize = 64;

/// A control message header as the kernel aligns it (`CMSG_LEN(0)`).
const HEADER: usize = align(mem::size_of::<libc::cmsghdr>());

// The byte layout read and written below: a `size_t` length, then the
// level and the type.
const _: () = assert!(mem::size_of::<libc::cmsghdr>() == 16);
const _: () = assert!(mem::offset_of!(libc::cmsghdr, cmsg_level) == 8);
const _: () = assert!(mem::offset_of!(libc::cmsghdr, cmsg_type) == 12);
const _: () = assert!(mem::size_of::<libc::in_pktinfo>() == 12);
const _: () = assert!(mem::size_of::<libc::in6_pktinfo>() == 20);
const _: () = assert!(space(PKTINFO6_LEN) + space(SEGMENT_LEN) <= CONTROL_SPACE);

const PKTINFO4_LEN: usize = mem::size_of::<libc::in_pktinfo>();
const PKTINFO6_LEN: usize = mem::size_of::<libc::in6_pktinfo>();
const SEGMENT_LEN: usize = mem::size_of::<u16>();

/// `len` rounded up as the kernel aligns control messages (`CMSG_ALIGN`).
const fn align(len: usize) -> usize {
    let word = mem::size_of::<usize>();
    (len + word - 1) & !(word - 1)
}

/// The room a control message of `data` octets takes (`CMSG_SPACE`).
pub(super) const fn space(data: usize) -> usize {
    HEADER + align(data)
}

/// The address a datagram was sent to, as the kernel said (on a socket
/// that asked, [`receive_destinations`]); what a reply is sent from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Destination {
    /// Not said: the socket is bound to one address, which replies leave
    /// from anyway.
    #[default]
    Unknown,
    /// The local address the datagram came to (`ipi_spec_dst`: for a
    /// broadcast, the interface's own address).
    V4(Ipv4Addr),
    /// The address, and the interface it came in on (which a link-local
    /// address needs to be sent from).
    V6 { address: Ipv6Addr, interface: u32 },
}

impl Destination {
    /// The address, if said.
    pub fn ip(&self) -> Option<IpAddr> {
        match *self {
            Destination::Unknown => None,
            Destination::V4(a) => Some(IpAddr::V4(a)),
            Destination::V6 { address, .. } => Some(IpAddr::V6(address)),
        }
    }
}

/// Asks the kernel to say, beside each datagram `socket` receives, the
/// address it was sent to: for a socket bound to `0.0.0.0` (`ipv6`
/// false) or `[::]`.
pub fn receive_destinations(socket: impl AsFd, ipv6: bool) -> io::Result<()> {
    let (level, name) = match ipv6 {
        false => (libc::IPPROTO_IP, libc::IP_PKTINFO),
        true => (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
    };
    let on: libc::c_int = 1;
    // SAFETY: `on` is a live c_int and the length given is its size; the
    // kernel only reads it. The descriptor is borrowed for the call.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            level,
            name,
            (&raw const on).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Room for control messages, aligned as the kernel reads and writes
/// them.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(super) struct ControlBuffer {
    pub(super) bytes: [u8; CONTROL_SPACE],
}

impl ControlBuffer {
    pub(super) const EMPTY: ControlBuffer = ControlBuffer {
        bytes: [0; CONTROL_SPACE],
    };

    /// The destination said in the first `len` octets (as the kernel
    /// wrote them); [`Destination::Unknown`] if none is.
    pub(super) fn destination(&self, len: usize) -> Destination {
        let bytes = &self.bytes[..len.min(CONTROL_SPACE)];
        let mut at = 0;
        while at + HEADER <= bytes.len() {
            let word = |i: usize| -> [u8; 4] { bytes[at + i..at + i + 4].try_into().unwrap() };
            let cmsg_len = usize::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
            let (level, kind) = (i32::from_ne_bytes(word(8)), i32::from_ne_bytes(word(12)));
            if cmsg_len < HEADER || cmsg_len > bytes.len() - at {
                break;
            }
            let data = &bytes[at + HEADER..at + cmsg_len];
            match (level, kind) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() >= PKTINFO4_LEN => {
                    let spec_dst: [u8; 4] = data[4..8].try_into().unwrap();
                    return Destination::V4(Ipv4Addr::from(spec_dst));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() >= PKTINFO6_LEN => {
                    let address: [u8; 16] = data[..16].try_into().unwrap();
                    let interface = u32::from_ne_bytes(data[16..20].try_into().unwrap());
                    let address = Ipv6Addr::from(address);
                    return Destination::V6 { address, interface };
                }
                _ => at += align(cmsg_len),
            }
        }
        Destination::Unknown
    }
}

/// The control messages of one outgoing message: its source address and
/// its segment size, each when it has one.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct SendControl {
    /// First, so that a pointer to the whole is one to the messages.
    pub(super) buffer: ControlBuffer,
    /// Octets of `buffer` in use (`msg_controllen`).
    pub(super) len: usize,
}

impl SendControl {
    /// Messages saying to send from `from` (when known) and, when
    /// `segment` is, to cut the message into datagrams of that size.
    pub(super) fn new(from: Destination, segment: Option<u16>) -> SendControl {
        let mut control = SendControl {
            buffer: ControlBuffer::EMPTY,
            len: 0,
        };
        match from {
            Destination::Unknown => {}
            Destination::V4(address) => {
                // ipi_ifindex 0 and ipi_addr unused: the route decides the
                // interface, as for any reply, and the source is ours.
                let mut info = [0u8; PKTINFO4_LEN];
                info[4..8].copy_from_slice(&address.octets());
                control.push(libc::IPPROTO_IP, libc::IP_PKTINFO, &info);
            }
            Destination::V6 { address, interface } => {
                let mut info = [0u8; PKTINFO6_LEN];
                info[..16].copy_from_slice(&address.octets());
                // Only a link-local source needs its interface; any other
                // leaves the choice to the route, as Knot does.
                let link_local = address.segments()[0] & 0xffc0 == 0xfe80;
                let interface = if link_local { interface } else { 0 };
                info[16..20].copy_from_slice(&interface.to_ne_bytes());
                control.push(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &info);
            }
        }
        if let Some(size) = segment {
            control.push(libc::SOL_UDP, libc::UDP_SEGMENT, &size.to_ne_bytes());
        }
        control
    }

    /// Appends one control message holding `data`.
    fn push(&mut self, level: libc::c_int, kind: libc::c_int, data: &[u8]) {
        let at = self.len;
        let bytes = &mut self.buffer.bytes[at..at + space(data.len())];
        bytes[..8].copy_from_slice(&(HEADER + data.len()).to_ne_bytes());
        bytes[8..12].copy_from_slice(&level.to_ne_bytes());
        bytes[12..16].copy_from_slice(&kind.to_ne_bytes());
        bytes[HEADER..HEADER + data.len()].copy_from_slice(data);
        self.len += space(data.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What libc's `CMSG_*` macros find in `buffer`'s first `len` octets:
    /// (level, type, data) of each message.
    fn walk(buffer: &mut ControlBuffer, len: usize) -> Vec<(i32, i32, Vec<u8>)> {
        // SAFETY: all zeroes is a valid msghdr; only its control fields
        // are set, to a live buffer of at least `len` octets.
        let mut header: libc::msghdr = unsafe { mem::zeroed() };
        header.msg_control = buffer.bytes.as_mut_ptr().cast();
        header.msg_controllen = len;
        let mut found = Vec::new();
        // SAFETY: the CMSG_* macros walk the control buffer the header
        // points to, within `msg_controllen`; each message read lies
        // inside it (the kernel's own layout, which `push` writes), and
        // `cmsg_len` bounds the data copied out.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&header);
            while !cmsg.is_null() {
                let data_len = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                let data = std::slice::from_raw_parts(libc::CMSG_DATA(cmsg), data_len);
                found.push(((*cmsg).cmsg_level, (*cmsg).cmsg_type, data.to_vec()));
                cmsg = libc::CMSG_NXTHDR(&header, cmsg);
            }
        }
        found
    }

    #[test]
    fn the_layout_is_the_kernels() {
        // SAFETY: CMSG_SPACE and CMSG_LEN only compute sizes.
        let (header, space_2, space_20) = unsafe {
            (
                libc::CMSG_LEN(0) as usize,
                libc::CMSG_SPACE(2) as usize,
                libc::CMSG_SPACE(20) as usize,
            )
        };
        assert_eq!((HEADER, space(2), space(20)), (header, space_2, space_20));
        let v6: Ipv6Addr = "fe80::1".parse().unwrap();
        let from = Destination::V6 {
            address: v6,
            interface: 7,
        };
        let mut control = SendControl::new(from, Some(1232));
        let found = walk(&mut control.buffer, control.len);
        let mut info = v6.octets().to_vec();
        info.extend_from_slice(&7u32.to_ne_bytes());
        let segment = 1232u16.to_ne_bytes().to_vec();
        assert_eq!(
            found,
            vec![
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, info),
                (libc::SOL_UDP, libc::UDP_SEGMENT, segment),
            ]
        );
        assert_eq!(control.buffer.destination(control.len), from);
        let v4 = Destination::V4(Ipv4Addr::new(192, 0, 2, 7));
        let mut control = SendControl::new(v4, None);
        let found = walk(&mut control.buffer, control.len);
        assert_eq!(found.len(), 1);
        assert_eq!(&found[0].2[4..8], &[192, 0, 2, 7]);
        assert_eq!(control.buffer.destination(control.len), v4);
        let none = SendControl::new(Destination::Unknown, None);
        assert_eq!(none.len, 0);
    }

    /// A global IPv6 source leaves the interface to the route.
    #[test]
    fn only_a_link_local_source_keeps_its_interface() {
        let address: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let control = SendControl::new(
            Destination::V6 {
                address,
                interface: 7,
            },
            None,
        );
        let read = control.buffer.destination(control.len);
        let interface = 0;
        assert_eq!(read, Destination::V6 { address, interface });
    }

    /// Control bytes a kernel would never write, cut short, of lengths
    /// past the buffer, zero or of another kind, say no destination and
    /// never panic.
    #[test]
    fn malformed_control_bytes_say_nothing() {
        let good = SendControl::new(Destination::V4(Ipv4Addr::LOCALHOST), None);
        // The last message's padding may be left out; no more.
        for len in 0..HEADER + PKTINFO4_LEN {
            let read = good.buffer.destination(len);
            assert_eq!(read, Destination::Unknown, "{len}");
        }
        let mut bad = good;
        for cmsg_len in [0usize, 1, 15, 65, usize::MAX] {
            bad.buffer.bytes[..8].copy_from_slice(&cmsg_len.to_ne_bytes());
            assert_eq!(bad.buffer.destination(good.len), Destination::Unknown);
            assert_eq!(bad.buffer.destination(CONTROL_SPACE), Destination::Unknown);
        }
        let mut other = SendControl::new(Destination::Unknown, Some(512));
        assert_eq!(other.buffer.destination(other.len), Destination::Unknown);
        // A pktinfo after another message is found.
        let v4 = Destination::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut info = [0u8; PKTINFO4_LEN];
        info[4..8].copy_from_slice(&[10, 0, 0, 1]);
        other.push(libc::IPPROTO_IP, libc::IP_PKTINFO, &info);
        assert_eq!(other.buffer.destination(other.len), v4);
        for seed in 0..2000u32 {
            let mut noise = ControlBuffer::EMPTY;
            let mut x = seed.wrapping_mul(2_654_435_761) | 1;
            for b in noise.bytes.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            let _ = noise.destination((seed as usize) % (CONTROL_SPACE + 8));
        }
    }
}
