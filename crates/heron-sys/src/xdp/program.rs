//! The XDP program, assembled here: a few dozen BPF instructions that
//! send UDP to Heron's ports into the AF_XDP socket of the packet's RX
//! queue and pass everything else to the kernel.
//!
//! In C it would read:
//!
//! ```c
//! if (data + 42 > data_end) return XDP_PASS;       // Ethernet+IPv4+UDP
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
//! if (port is one of ours)
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! return XDP_PASS;
//! ```
//!
//! `bpf_redirect_map` returns its last argument when the queue has no
//! socket, so a queue Heron does not serve still reaches the kernel.

use std::io;

/// Verdicts (`enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

/// Ports one program matches, one comparison each.
pub const MAX_PORTS: usize = 64;

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

// Offsets in `struct xdp_md` and in the frame.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE: i16 = 16;
const ETH_PROTO: i16 = 12;
const IP4: i16 = 14;
const IP6: i16 = 14;
const ETH_IP4_UDP: i32 = 14 + 20 + 8;
const ETH_IP6_UDP: i32 = 14 + 40 + 8;

/// A 16-bit field in network order as the BPF machine loads it (in the
/// host's order), so that it compares equal to a plain load.
fn net16(v: u16) -> i32 {
    u16::from_ne_bytes(v.to_be_bytes()) as i32
}

#[derive(Clone, Copy, PartialEq)]
enum Label {
    Ipv4,
    Port,
    Redirect,
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

/// The program's instructions, redirecting UDP to `ports` into the
/// XSKMAP `map_fd`. `miss` is the verdict when the packet's queue has no
/// socket: [`XDP_PASS`] in service; tests choose [`XDP_DROP`] to see the
/// program's choice without a socket.
pub fn assemble(ports: &[u16], map_fd: i32, miss: u32) -> io::Result<Vec<u64>> {
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
    a.load16(R5, R2, IP4 + 20 + 2);
    a.label(Label::Port);
    for &port in ports {
        a.jeq_imm(R5, net16(port), Label::Redirect);
    }
    a.ja(Label::Pass);
    a.label(Label::Redirect);
    a.load32(R2, R6, MD_RX_QUEUE);
    a.load_map_fd(R1, map_fd);
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

    #[test]
    fn port_counts_are_checked_at_and_past_the_limit() {
        assert!(assemble(&[], 3, XDP_PASS).is_err());
        let ports: Vec<u16> = (1..=MAX_PORTS as u16).collect();
        assert!(assemble(&ports, 3, XDP_PASS).is_ok());
        let too_many: Vec<u16> = (1..=MAX_PORTS as u16 + 1).collect();
        assert!(assemble(&too_many, 3, XDP_PASS).is_err());
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let insns = assemble(&[53], 3, XDP_PASS).unwrap();
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
