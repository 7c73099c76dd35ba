//! The XDP program, assembled here: a few dozen BPF instructions that
//! send UDP to Heron's ports and to this interface's own MAC and IP
//! addresses into the AF_XDP socket of the packet's RX queue, and pass
//! everything else to the kernel.
//!
//! In C it would read:
//!
//! ```c
//! if (data + 42 > data_end) return XDP_PASS;       // Ethernet+IPv4+UDP
//! if (data_end > data + 1792) return XDP_PASS;     // past a UMEM frame
//! if (eth->proto == htons(ETH_P_IP)) {
//!     if (ip->version_ihl != 0x45) return XDP_PASS;  // options: kernel
//!     if (ip->protocol != IPPROTO_UDP) return XDP_PASS;
//!     if (ip->frag_off & htons(0x3fff)) return XDP_PASS;  // fragments
//!     port = udp4->dest;
//! } else if (eth->proto == htons(ETH_P_IPV6)) {
//!     if (data + 62 > data_end) return XDP_PASS;
//!     if (ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
//!     port = udp6->dest;                         // (extension headers: kernel)
//! } else return XDP_PASS;                        // ARP, VLAN, ...
//! if (port is not one of ours) return XDP_PASS;
//! mac = bpf_map_lookup_elem(&own_mac, &zero);    // the interface's MAC
//! if (!mac || memcmp(eth->dest, mac, 6)) return XDP_PASS;
//! key = { 4 or 6, ip->daddr or ip6->daddr };      // see `address_key`
//! if (!bpf_map_lookup_elem(&own_addresses, &key)) return XDP_PASS;
//! return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! ```
//!
//! So a frame for another host (a router's or a bridge's traffic, a
//! promiscuous interface's) and one to a broadcast, multicast or other
//! address of ours is the kernel's, as it would be without XDP. The two
//! maps are kept by Heron while the program is attached (`Destinations`
//! in `mod.rs`). `bpf_redirect_map` returns its last argument when the
//! queue has no socket, so a queue Heron does not serve still reaches the
//! kernel.

use std::io;
use std::net::IpAddr;

/// Verdicts (`enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

/// Ports one program matches, one comparison each.
pub const MAX_PORTS: usize = 64;

const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const IPPROTO_UDP: i32 = 17;

// Registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R10: u8 = 10;

// Offsets in `struct xdp_md` and in the frame.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE: i16 = 16;
const ETH_PROTO: i16 = 12;
const IP4: i16 = 14;
const IP6: i16 = 14;
const ETH_IP4_UDP: i32 = 14 + 20 + 8;
const ETH_IP6_UDP: i32 = 14 + 40 + 8;
const IP4_DST: i16 = IP4 + 16;
const IP6_DST: i16 = IP6 + 24;
/// The stack: the key of `own_addresses` (20 bytes), then `own_mac`'s.
const STACK_ADDRESS_KEY: i16 = -24;
const STACK_MAC_KEY: i16 = -28;

/// The length of a key of the `own_addresses` map.
pub const ADDRESS_KEY_LEN: usize = 20;
/// The length of `own_mac`'s one value.
pub const MAC_VALUE_LEN: usize = 8;

/// The key of `ip` in the `own_addresses` map: the IP version as a
/// native `u32`, then the address, zero-padded to 16 bytes (so that an
/// IPv4 address and an IPv6 one that starts with the same bytes differ).
pub fn address_key(ip: IpAddr) -> [u8; ADDRESS_KEY_LEN] {
    let mut key = [0; ADDRESS_KEY_LEN];
    match ip {
        IpAddr::V4(v4) => {
            key[..4].copy_from_slice(&4u32.to_ne_bytes());
            key[4..8].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            key[..4].copy_from_slice(&6u32.to_ne_bytes());
            key[4..].copy_from_slice(&v6.octets());
        }
    }
    key
}

/// The value of `own_mac`'s one slot for `mac`.
pub fn mac_value(mac: [u8; 6]) -> [u8; MAC_VALUE_LEN] {
    let mut value = [0; MAC_VALUE_LEN];
    value[..6].copy_from_slice(&mac);
    value
}

/// The maps the program reads, by file descriptor.
#[derive(Clone, Copy)]
pub struct MapFds {
    /// XSKMAP: RX queue → AF_XDP socket.
    pub xsks: i32,
    /// Array of one [`mac_value`]: the interface's MAC.
    pub own_mac: i32,
    /// Hash of [`address_key`]s: the interface's IP addresses.
    pub own_addresses: i32,
}

/// A 16-bit field in network order as the BPF machine loads it (in the
/// host's order), so that it compares equal to a plain load.
fn net16(v: u16) -> i32 {
    u16::from_ne_bytes(v.to_be_bytes()) as i32
}

#[derive(Clone, Copy, PartialEq)]
enum Label {
    Ipv4,
    Port,
    Ours,
    Dst6,
    Lookup,
    Pass,
}

/// A two-pass assembler: jumps name a label, resolved at the end.
#[derive(Default)]
struct Asm {
    insns: Vec<u64>,
    labels: Vec<(Label, usize)>,
    jumps: Vec<(usize, Label)>,
}

impl Asm {
    fn raw(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        let [o0, o1] = off.to_le_bytes();
        let [i0, i1, i2, i3] = imm.to_le_bytes();
        // `struct bpf_insn` on a little-endian machine: the destination
        // register is the low nibble of the second byte.
        #[cfg(target_endian = "big")]
        compile_error!("the XDP program is assembled for little-endian machines");
        let regs = dst | (src << 4);
        self.insns
            .push(u64::from_le_bytes([code, regs, o0, o1, i0, i1, i2, i3]));
    }
    fn mov_reg(&mut self, dst: u8, src: u8) {
        self.raw(0xbf, dst, src, 0, 0);
    }
    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0xb7, dst, 0, 0, imm);
    }
    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x07, dst, 0, 0, imm);
    }
    fn and_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x57, dst, 0, 0, imm);
    }
    fn rsh_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x77, dst, 0, 0, imm);
    }
    fn store32_imm(&mut self, dst: u8, off: i16, imm: i32) {
        self.raw(0x62, dst, 0, off, imm);
    }
    fn store32(&mut self, dst: u8, off: i16, src: u8) {
        self.raw(0x63, dst, src, off, 0);
    }
    fn load32(&mut self, dst: u8, src: u8, off: i16) {
        self.raw(0x61, dst, src, off, 0);
    }
    fn load16(&mut self, dst: u8, src: u8, off: i16) {
        self.raw(0x69, dst, src, off, 0);
    }
    fn load8(&mut self, dst: u8, src: u8, off: i16) {
        self.raw(0x71, dst, src, off, 0);
    }
    fn load_map_fd(&mut self, dst: u8, fd: i32) {
        self.raw(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd);
        self.raw(0, 0, 0, 0, 0);
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.raw(code, dst, src, 0, imm);
    }
    fn jeq_imm(&mut self, dst: u8, imm: i32, to: Label) {
        self.jump(0x15, dst, 0, imm, to);
    }
    fn jne_imm(&mut self, dst: u8, imm: i32, to: Label) {
        self.jump(0x55, dst, 0, imm, to);
    }
    fn jne_reg(&mut self, dst: u8, src: u8, to: Label) {
        self.jump(0x5d, dst, src, 0, to);
    }
    fn jgt_reg(&mut self, dst: u8, src: u8, to: Label) {
        self.jump(0x2d, dst, src, 0, to);
    }
    fn ja(&mut self, to: Label) {
        self.jump(0x05, 0, 0, 0, to);
    }
    fn call(&mut self, helper: i32) {
        self.raw(0x85, 0, 0, 0, helper);
    }
    fn exit(&mut self) {
        self.raw(0x95, 0, 0, 0, 0);
    }
    fn label(&mut self, label: Label) {
        self.labels.push((label, self.insns.len()));
    }
    /// Fails (with no data past the frame read) unless the frame holds
    /// `len` bytes.
    fn need(&mut self, len: i32) {
        self.mov_reg(R4, R2);
        self.add_imm(R4, len);
        self.jgt_reg(R4, R3, Label::Pass);
    }
    /// `r0 = bpf_map_lookup_elem(map, fp + key)`; passes on a miss.
    fn lookup_or_pass(&mut self, map_fd: i32, key: i16) {
        self.mov_reg(R2, R10);
        self.add_imm(R2, i32::from(key));
        self.load_map_fd(R1, map_fd);
        self.call(BPF_FUNC_MAP_LOOKUP_ELEM);
        self.jeq_imm(R0, 0, Label::Pass);
    }
    fn finish(mut self) -> Vec<u64> {
        for &(at, to) in &self.jumps {
            let target = self.labels.iter().find(|(l, _)| *l == to).unwrap().1;
            let off = (target as i64 - at as i64 - 1) as i16;
            let [o0, o1] = off.to_le_bytes();
            let mut bytes = self.insns[at].to_le_bytes();
            bytes[2..4].copy_from_slice(&[o0, o1]);
            self.insns[at] = u64::from_le_bytes(bytes);
        }
        self.insns
    }
}

/// The program's instructions, redirecting UDP to `ports` and to the
/// interface's own MAC and addresses into the XSKMAP (`maps`). `miss` is
/// the verdict when the packet's queue has no socket: [`XDP_PASS`] in
/// service; tests choose [`XDP_DROP`] to see the program's choice
/// without a socket.
pub fn assemble(ports: &[u16], maps: MapFds, miss: u32) -> io::Result<Vec<u64>> {
    if ports.is_empty() || ports.len() > MAX_PORTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an XDP program matches 1 to {MAX_PORTS} ports, not {}",
                ports.len()
            ),
        ));
    }
    let mut a = Asm::default();
    a.mov_reg(R6, R1);
    a.load32(R2, R1, MD_DATA);
    a.load32(R3, R1, MD_DATA_END);
    a.need(ETH_IP4_UDP);
    // Longer than a UMEM frame takes (an interface MTU above 1778): the
    // kernel's socket answers it.
    a.mov_reg(R4, R2);
    a.add_imm(R4, super::socket::MAX_FRAME_IN as i32);
    a.jgt_reg(R3, R4, Label::Pass);
    a.load16(R5, R2, ETH_PROTO);
    a.jeq_imm(R5, net16(0x0800), Label::Ipv4);
    a.jne_imm(R5, net16(0x86dd), Label::Pass);
    // IPv6: a fixed header with UDP next, nothing else.
    a.need(ETH_IP6_UDP);
    a.load8(R5, R2, IP6);
    a.rsh_imm(R5, 4);
    a.jne_imm(R5, 6, Label::Pass);
    a.load8(R5, R2, IP6 + 6);
    a.jne_imm(R5, IPPROTO_UDP, Label::Pass);
    a.mov_imm(R8, 6);
    a.load16(R5, R2, IP6 + 40 + 2);
    a.ja(Label::Port);
    // IPv4: a 20-byte header (no options), UDP, not a fragment.
    a.label(Label::Ipv4);
    a.load8(R5, R2, IP4);
    a.jne_imm(R5, 0x45, Label::Pass);
    a.load8(R5, R2, IP4 + 9);
    a.jne_imm(R5, IPPROTO_UDP, Label::Pass);
    a.load16(R5, R2, IP4 + 6);
    a.and_imm(R5, net16(0x3fff));
    a.jne_imm(R5, 0, Label::Pass);
    a.mov_imm(R8, 4);
    a.load16(R5, R2, IP4 + 20 + 2);
    a.label(Label::Port);
    for &port in ports {
        a.jeq_imm(R5, net16(port), Label::Ours);
    }
    a.ja(Label::Pass);
    // To one of our ports: is it to our MAC (r7: the frame, kept across
    // the calls)?
    a.label(Label::Ours);
    a.mov_reg(R7, R2);
    a.store32_imm(R10, STACK_MAC_KEY, 0);
    a.lookup_or_pass(maps.own_mac, STACK_MAC_KEY);
    a.load32(R1, R0, 0);
    a.load32(R2, R7, 0);
    a.jne_reg(R1, R2, Label::Pass);
    a.load16(R1, R0, 4);
    a.load16(R2, R7, 4);
    a.jne_reg(R1, R2, Label::Pass);
    // And to one of our addresses (r8: the IP version)?
    a.store32(R10, STACK_ADDRESS_KEY, R8);
    a.jeq_imm(R8, 6, Label::Dst6);
    a.load32(R1, R7, IP4_DST);
    a.store32(R10, STACK_ADDRESS_KEY + 4, R1);
    for word in 2..5 {
        a.store32_imm(R10, STACK_ADDRESS_KEY + 4 * word, 0);
    }
    a.ja(Label::Lookup);
    a.label(Label::Dst6);
    for word in 0..4 {
        a.load32(R1, R7, IP6_DST + 4 * word);
        a.store32(R10, STACK_ADDRESS_KEY + 4 + 4 * word, R1);
    }
    a.label(Label::Lookup);
    a.lookup_or_pass(maps.own_addresses, STACK_ADDRESS_KEY);
    a.load32(R2, R6, MD_RX_QUEUE);
    a.load_map_fd(R1, maps.xsks);
    a.mov_imm(R3, miss as i32);
    a.call(BPF_FUNC_REDIRECT_MAP);
    a.exit();
    a.label(Label::Pass);
    a.mov_imm(R0, XDP_PASS as i32);
    a.exit();
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: MapFds = MapFds {
        xsks: 3,
        own_mac: 4,
        own_addresses: 5,
    };

    #[test]
    fn port_counts_are_checked_at_and_past_the_limit() {
        assert!(assemble(&[], MAPS, XDP_PASS).is_err());
        let ports: Vec<u16> = (1..=MAX_PORTS as u16).collect();
        assert!(assemble(&ports, MAPS, XDP_PASS).is_ok());
        let too_many: Vec<u16> = (1..=MAX_PORTS as u16 + 1).collect();
        assert!(assemble(&too_many, MAPS, XDP_PASS).is_err());
    }

    #[test]
    fn address_keys_keep_the_versions_apart() {
        let v4 = address_key("198.51.100.1".parse().unwrap());
        let v6 = address_key("c633:6401::".parse().unwrap());
        assert_ne!(v4, v6, "same first bytes, different versions");
        assert_eq!(&v4[4..8], &[198, 51, 100, 1]);
        assert!(v4[8..].iter().all(|&b| b == 0));
        assert_eq!(&v6[4..6], &[0xc6, 0x33]);
        assert_eq!(mac_value([1, 2, 3, 4, 5, 6]), [1, 2, 3, 4, 5, 6, 0, 0]);
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let insns = assemble(&[53], MAPS, XDP_PASS).unwrap();
        // The last two instructions are `r0 = XDP_PASS; exit`, the target
        // of every "pass" jump; each jump's offset stays inside.
        for (at, insn) in insns.iter().enumerate() {
            let bytes = insn.to_le_bytes();
            let code = bytes[0];
            if code & 0x07 == 0x05 && code != 0x85 && code != 0x95 {
                let off = i16::from_le_bytes([bytes[2], bytes[3]]) as i64;
                let target = at as i64 + 1 + off;
                assert!(target > at as i64 && (target as usize) < insns.len());
            }
        }
    }
}
