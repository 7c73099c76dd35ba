//! What is this host's: its interfaces' IP addresses and MACs, and a
//! watch that says when they may have changed.

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::OwnedFd;
use std::time::Duration;

/// One address of one of the host's interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAddress {
    pub interface: String,
    pub ip: IpAddr,
    /// IPv4: the broadcast addresses the kernel has for it (its
    /// network's all-ones address, below a /31, and the one set with
    /// `brd`), which are no host's.
    pub broadcasts: Vec<Ipv4Addr>,
}

/// Every IP address of every interface of the host (`getifaddrs`).
pub fn host_addresses() -> io::Result<Vec<HostAddress>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a live pointer for getifaddrs to write the head
    // of a list it allocates; it is freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned (the
        // head or a node's `ifa_next`), not freed until the loop ends.
        let node = unsafe { &*at };
        // SAFETY: the node's address pointers are null or point to a
        // sockaddr of the family they name, owned by the list.
        let ip = unsafe { sockaddr_ip(node.ifa_addr) };
        if let Some(ip) = ip {
            // SAFETY: `ifa_name` is the node's NUL-terminated name.
            let name = unsafe { CStr::from_ptr(node.ifa_name) };
            let mut broadcasts = Vec::new();
            // SAFETY: as `ifa_addr` above.
            let netmask = unsafe { sockaddr_ip(node.ifa_netmask) };
            if let (IpAddr::V4(ip), Some(IpAddr::V4(mask))) = (ip, netmask) {
                // The kernel's broadcast route for the network
                // (`fib_add_ifaddr`), whatever `brd` says.
                if mask.to_bits().count_ones() < 31 {
                    broadcasts.push(Ipv4Addr::from_bits(ip.to_bits() | !mask.to_bits()));
                }
            }
            if node.ifa_flags & libc::IFF_BROADCAST as u32 != 0 {
                // SAFETY: with IFF_BROADCAST, `ifa_ifu` is the broadcast
                // address (or null), as `ifa_addr` above.
                if let Some(IpAddr::V4(b)) = unsafe { sockaddr_ip(node.ifa_ifu) }
                    && !b.is_unspecified()
                    && !broadcasts.contains(&b)
                {
                    broadcasts.push(b);
                }
            }
            out.push(HostAddress {
                interface: name.to_string_lossy().into_owned(),
                ip,
                broadcasts,
            });
        }
        at = node.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once; nothing
    // borrowed from it is kept (names and addresses were copied).
    unsafe { libc::freeifaddrs(list) };
    Ok(out)
}

/// The IP address in `sa`, if it is an IPv4 or IPv6 one.
///
/// # Safety
///
/// `sa` is null or points to a sockaddr as long as its family says.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-null, and every sockaddr starts with its family.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let sin = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let sin6 = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// The MAC address of `interface` (`/sys/class/net/NAME/address`).
pub fn mac_address(interface: &str) -> io::Result<[u8; 6]> {
    let path = super::sys_net(interface).join("address");
    let text = std::fs::read_to_string(&path)?;
    parse_mac(text.trim())
        .ok_or_else(|| io::Error::other(format!("{}: not a MAC: {text:?}", path.display())))
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The kernel's routing messages about links and addresses
/// (`RTMGRP_LINK`, `RTMGRP_IPV4_IFADDR`, `RTMGRP_IPV6_IFADDR`): any of
/// them means the host's MACs or addresses may have changed.
pub struct AddressWatch {
    socket: OwnedFd,
}

const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

impl AddressWatch {
    /// Subscribes; changes from then on are seen by [`Self::wait`]. Read
    /// the addresses after this, so that none is missed in between.
    pub fn open() -> io::Result<AddressWatch> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType, netlink};
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        rustix::net::bind(&socket, &netlink::SocketAddrNetlink::new(0, groups))?;
        Ok(AddressWatch { socket })
    }

    /// Waits up to `timeout` for a change; true if there was one (or
    /// messages were lost, which may hide one). Takes every message
    /// queued, so that a burst of changes is one wake.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        use rustix::io::Errno;
        use rustix::net::RecvFlags;
        use rustix::net::sockopt::{Timeout, set_socket_timeout};
        set_socket_timeout(&self.socket, Timeout::Recv, Some(timeout))?;
        let mut buf = [0u8; 8192];
        let mut flags = RecvFlags::empty();
        let mut changed = false;
        loop {
            match rustix::net::recv(&self.socket, &mut buf[..], flags) {
                Ok(_) => changed = true,
                // The queue overflowed: something changed.
                Err(Errno::NOBUFS) => changed = true,
                Err(Errno::AGAIN) => return Ok(changed),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            flags = RecvFlags::DONTWAIT;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_its_addresses_and_macs_read_as_written() {
        let all = host_addresses().unwrap();
        let lo = |ip: IpAddr| all.iter().any(|a| a.interface == "lo" && a.ip == ip);
        assert!(lo(Ipv4Addr::LOCALHOST.into()), "{all:?}");
        // 127.0.0.1/8: 127.255.255.255 is loopback's broadcast.
        let lo4 = all.iter().find(|a| a.ip == Ipv4Addr::LOCALHOST).unwrap();
        assert_eq!(lo4.broadcasts, [Ipv4Addr::new(127, 255, 255, 255)]);
        assert_eq!(mac_address("lo").unwrap(), [0; 6]);
        assert_eq!(parse_mac("02:0a:ff:00:10:01"), Some([2, 10, 255, 0, 16, 1]));
        for bad in [
            "",
            "02:0a:ff:00:10",
            "02:0a:ff:00:10:01:02",
            "2:0a:ff:00:10:01",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad:?}");
        }
    }
}
