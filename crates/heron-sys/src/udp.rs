//! Batched datagram I/O with `recvmmsg(2)` and `sendmmsg(2)`: one system
//! call moves a batch of datagrams each way, which is where a UDP server's
//! time goes once the DNS work is cheap.
//!
//! [`Receiver`] owns its datagram buffers, peer addresses and message
//! headers, all allocated once and never resized; [`Sender`] owns reusable
//! header arrays and points them at the caller's buffers for the length of
//! one [`Sender::load`]. In a steady state neither allocates.
//!
//! The invariants that make the system calls sound:
//! * every receive `iovec` (a slot, and its spill area when it has one),
//!   `msg_name` and `msg_control` points into a heap buffer the
//!   [`Receiver`] owns, allocated once and never resized, so moving the
//!   `Receiver` does not move what the pointers point to; no `&mut` to
//!   those buffers is made after the pointers are taken;
//! * before each `recvmmsg` every `msg_namelen` is reset, so the kernel
//!   writes at most `iov_len` bytes per buffer and at most a
//!   `sockaddr_storage` of address; so is `msg_controllen` (to the
//!   slot's control room, or 0 with none);
//! * send headers, iovecs and control messages are rebuilt by every
//!   [`Sender::load`] and used only through the [`Loaded`] it returns,
//!   which borrows the messages and peers they point to; the headers are
//!   pointed into the vectors only once those stop growing, and the kernel
//!   only reads them.

use std::io;
use std::marker::PhantomData;
use std::mem;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};
use std::ptr;

mod control;

use control::{CONTROL_SPACE, ControlBuffer, SendControl};
pub use control::{Destination, receive_destinations};

/// Room for any peer address.
const ADDRESS_LEN: libc::socklen_t = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// Whether a batched call may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// As the socket does (its read timeout applies); a receive waits for
    /// the first datagram only and then takes what is already queued
    /// (`MSG_WAITFORONE`).
    Blocking,
    /// Not at all (`MSG_DONTWAIT`): `WouldBlock` when nothing can move.
    Never,
}

/// A peer's address as the kernel wrote it, borrowed from a [`Receiver`],
/// and the address it sent to when the receiver keeps that.
#[derive(Clone, Copy)]
pub struct Peer<'a> {
    storage: &'a libc::sockaddr_storage,
    len: libc::socklen_t,
    /// The address the datagram came to: what a reply leaves from.
    destination: &'a Destination,
}

impl Peer<'_> {
    /// The address the datagram was sent to, when the receiver keeps it
    /// ([`Receiver::keep_destinations`]).
    #[inline]
    pub fn destination(&self) -> Destination {
        *self.destination
    }

    /// The address without its port, or None for a family other than
    /// IPv4 and IPv6: what a per-query check of the client (rate
    /// limiting) needs, without building a [`SocketAddr`] (flow label,
    /// scope and port) it would throw away.
    #[inline]
    pub fn ip(&self) -> Option<IpAddr> {
        let len = self.len as usize;
        let storage: *const libc::sockaddr_storage = self.storage;
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: as in `to_std`: the family says the storage holds
                // a sockaddr_in, and sockaddr_storage is large and aligned
                // enough for it.
                let sin: &libc::sockaddr_in = unsafe { &*storage.cast() };
                Some(IpAddr::V4(u32::from_be(sin.sin_addr.s_addr).into()))
            }
            libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let sin6: &libc::sockaddr_in6 = unsafe { &*storage.cast() };
                Some(IpAddr::V6(sin6.sin6_addr.s6_addr.into()))
            }
            _ => None,
        }
    }

    /// The port alone, or None for a family other than IPv4 and IPv6:
    /// enough to refuse port 0, which no client sends from.
    #[inline]
    pub fn port(&self) -> Option<u16> {
        let len = self.len as usize;
        let storage: *const libc::sockaddr_storage = self.storage;
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: as in `to_std`, for sockaddr_in.
                let sin: &libc::sockaddr_in = unsafe { &*storage.cast() };
                Some(u16::from_be(sin.sin_port))
            }
            libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as in `to_std`, for sockaddr_in6.
                let sin6: &libc::sockaddr_in6 = unsafe { &*storage.cast() };
                Some(u16::from_be(sin6.sin6_port))
            }
            _ => None,
        }
    }

    /// The address, or None for a family other than IPv4 and IPv6.
    pub fn to_std(&self) -> Option<SocketAddr> {
        let len = self.len as usize;
        let storage: *const libc::sockaddr_storage = self.storage;
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a sockaddr_in,
                // and sockaddr_storage is large and aligned enough for it.
                let sin: &libc::sockaddr_in = unsafe { &*storage.cast() };
                let ip = u32::from_be(sin.sin_addr.s_addr);
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip.into(),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let sin6: &libc::sockaddr_in6 = unsafe { &*storage.cast() };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn message_header(
    iov: *mut libc::iovec,
    iovlen: usize,
    name: *mut libc::c_void,
    namelen: libc::socklen_t,
) -> libc::mmsghdr {
    // SAFETY: msghdr and mmsghdr are plain C structs for which all zeroes
    // is valid; the fields that matter are set below.
    let mut header: libc::mmsghdr = unsafe { mem::zeroed() };
    header.msg_hdr.msg_name = name;
    header.msg_hdr.msg_namelen = namelen;
    header.msg_hdr.msg_iov = iov;
    header.msg_hdr.msg_iovlen = iovlen as _;
    header
}

/// Buffers for receiving up to `capacity` datagrams of up to `size`
/// bytes each in one system call.
pub struct Receiver {
    capacity: usize,
    size: usize,
    /// `capacity` buffers of `size` bytes, back to back.
    buffers: Vec<u8>,
    /// Each slot's spill area, back to back: where the kernel writes what
    /// a datagram has past `size` bytes ([`Receiver::with_spill`]). Zeroed
    /// by the allocator and touched only by a datagram that long, so it
    /// costs address space, not memory, and the slots stay as dense.
    spill: Vec<u8>,
    spill_size: usize,
    /// A datagram longer than `size`, its slot and spill joined.
    joined: Vec<Vec<u8>>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
    /// Written by the kernel only: never borrowed mutably once the
    /// headers point into it.
    peers: Vec<libc::sockaddr_storage>,
    peer_lens: Vec<libc::socklen_t>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Each slot's control messages, written by the kernel only; empty
    /// unless [`Receiver::keep_destinations`].
    controls: Vec<ControlBuffer>,
    /// The address each datagram of the last receive was sent to.
    destinations: Vec<Destination>,
}

impl Receiver {
    /// Buffers for `capacity` datagrams of up to `size` bytes each.
    pub fn new(capacity: usize, size: usize) -> Receiver {
        Receiver::with_spill(capacity, size, size)
    }

    /// Buffers for `capacity` datagrams of up to `largest` bytes each, of
    /// which the first `size` go to a slot of `size` bytes and the rest,
    /// for the rare datagram that has more, to a spill area of its own
    /// that the allocator hands out untouched: the slots stay as dense
    /// as [`Receiver::new`] makes them.
    pub fn with_spill(capacity: usize, size: usize, largest: usize) -> Receiver {
        assert!(capacity > 0 && size > 0 && largest >= size);
        let spill_size = largest - size;
        let mut receiver = Receiver {
            capacity,
            size,
            buffers: vec![0; capacity * size],
            spill: vec![0; capacity * spill_size],
            spill_size,
            joined: vec![Vec::new(); capacity],
            lens: vec![0; capacity],
            truncated: vec![false; capacity],
            // SAFETY: sockaddr_storage is plain old data; all zeroes is a
            // valid (AF_UNSPEC) value.
            peers: vec![unsafe { mem::zeroed() }; capacity],
            peer_lens: vec![0; capacity],
            iovecs: Vec::with_capacity(capacity),
            headers: Vec::with_capacity(capacity),
            controls: Vec::new(),
            destinations: Vec::new(),
        };
        // One header per slot, pointing at its buffer and its address.
        // Built once: those buffers are never reallocated.
        let base = receiver.buffers.as_mut_ptr();
        let spill = receiver.spill.as_mut_ptr();
        let per_slot = if spill_size > 0 { 2 } else { 1 };
        receiver.iovecs.reserve_exact(capacity * per_slot);
        for i in 0..capacity {
            receiver.iovecs.push(libc::iovec {
                iov_base: base.wrapping_add(i * size).cast(),
                iov_len: size,
            });
            if spill_size > 0 {
                receiver.iovecs.push(libc::iovec {
                    iov_base: spill.wrapping_add(i * spill_size).cast(),
                    iov_len: spill_size,
                });
            }
        }
        let iovecs = receiver.iovecs.as_mut_ptr();
        let peers = receiver.peers.as_mut_ptr();
        for i in 0..capacity {
            receiver.headers.push(message_header(
                iovecs.wrapping_add(i * per_slot),
                per_slot,
                peers.wrapping_add(i).cast(),
                ADDRESS_LEN,
            ));
        }
        receiver
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keeps the address each datagram was sent to
    /// ([`Peer::destination`]), as the kernel says it on a socket that
    /// asked ([`receive_destinations`]): a socket bound to a wildcard
    /// address answers from it.
    pub fn keep_destinations(&mut self) {
        if !self.controls.is_empty() {
            return;
        }
        self.controls = vec![ControlBuffer::EMPTY; self.capacity];
        self.destinations = vec![Destination::Unknown; self.capacity];
        // Pointed at once: `controls` is never resized again.
        let controls = self.controls.as_mut_ptr();
        for (i, header) in self.headers.iter_mut().enumerate() {
            header.msg_hdr.msg_control = controls.wrapping_add(i).cast();
            header.msg_hdr.msg_controllen = CONTROL_SPACE;
        }
    }

    /// Receives up to the capacity of datagrams from `socket`. With
    /// [`Wait::Blocking`] it waits for the first (up to the socket's read
    /// timeout) and takes whatever else is queued. Returns how many came.
    #[inline]
    pub fn receive(&mut self, socket: impl AsFd, wait: Wait) -> io::Result<usize> {
        let control_len = if self.controls.is_empty() {
            0
        } else {
            CONTROL_SPACE
        };
        for header in &mut self.headers {
            header.msg_hdr.msg_namelen = ADDRESS_LEN;
            header.msg_hdr.msg_controllen = control_len;
        }
        let flags = match wait {
            Wait::Blocking => libc::MSG_WAITFORONE,
            Wait::Never => libc::MSG_DONTWAIT,
        };
        // SAFETY: `headers` holds `capacity` initialised mmsghdr values
        // whose iovecs, address and control buffers point into buffers
        // `self` owns (see the module invariants), at most `iov_len`,
        // `msg_namelen` and `msg_controllen` bytes each; a null timeout leaves the wait to the
        // flags and the socket.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_fd().as_raw_fd(),
                self.headers.as_mut_ptr(),
                self.capacity as libc::c_uint,
                flags,
                ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for i in 0..n {
            let header = &self.headers[i];
            self.lens[i] = header.msg_len as usize;
            self.truncated[i] = header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            self.peer_lens[i] = header.msg_hdr.msg_namelen;
            if let Some(control) = self.controls.get(i) {
                self.destinations[i] = control.destination(header.msg_hdr.msg_controllen);
            }
            if self.lens[i] > self.size {
                self.join(i);
            }
        }
        Ok(n)
    }

    /// Puts slot `i`'s datagram, longer than its slot, in one piece.
    #[cold]
    fn join(&mut self, i: usize) {
        let slot = &self.buffers[i * self.size..(i + 1) * self.size];
        let spilt = self.lens[i] - self.size;
        let spill = &self.spill[i * self.spill_size..i * self.spill_size + spilt];
        let joined = &mut self.joined[i];
        joined.clear();
        joined.extend_from_slice(slot);
        joined.extend_from_slice(spill);
    }

    /// The `i`th datagram of the last receive (cut to the buffers' size).
    #[inline]
    pub fn datagram(&self, i: usize) -> &[u8] {
        let len = self.lens[i];
        if len > self.size {
            return &self.joined[i];
        }
        let start = i * self.size;
        &self.buffers[start..start + len]
    }

    /// Whether the `i`th datagram was longer than its buffer.
    pub fn truncated(&self, i: usize) -> bool {
        self.truncated[i]
    }

    /// Where the `i`th datagram came from.
    #[inline]
    pub fn peer(&self, i: usize) -> Peer<'_> {
        Peer {
            storage: &self.peers[i],
            len: self.peer_lens[i],
            destination: self.destinations.get(i).unwrap_or(&Destination::Unknown),
        }
    }
}

/// Most datagrams one segmented message carries: the kernel's
/// `UDP_MAX_SEGMENTS`, 64 until recent kernels raised it to 128.
pub const MAX_SEGMENTS: usize = 64;
/// Most bytes one segmented message carries: the largest UDP payload over
/// IPv4 (65,535 less the IPv4 and UDP headers), which IPv6 allows too.
pub const MAX_SEGMENTED_BYTES: usize = 65_507;

/// One message of a loaded batch: datagrams `first..first + count` of the
/// load, sent as one when `count > 1`.
#[derive(Clone, Copy)]
struct Message {
    first: usize,
    count: usize,
    /// Bytes of the message's first datagram: every one but the last has
    /// exactly this size, the last at most.
    segment: usize,
    bytes: usize,
    /// The address its datagrams leave from, when not the socket's.
    from: Destination,
}

/// Reusable headers for sending a batch of datagrams in one system call.
pub struct Sender {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    messages: Vec<Message>,
    /// One per message of more than one datagram or with a source
    /// address of its own, in message order.
    controls: Vec<SendControl>,
}

/// One datagram to send: its bytes and its peer (None on a connected
/// socket).
pub type Outgoing<'a> = (&'a [u8], Option<Peer<'a>>);

impl Sender {
    /// Headers for batches of up to `capacity` datagrams without
    /// allocating (larger batches grow them).
    pub fn with_capacity(capacity: usize) -> Sender {
        Sender {
            iovecs: Vec::with_capacity(capacity),
            headers: Vec::with_capacity(capacity),
            messages: Vec::with_capacity(capacity),
            controls: Vec::with_capacity(capacity),
        }
    }

    /// Points the headers at `messages`, one datagram each, to be sent
    /// with [`Loaded::send`].
    #[inline]
    pub fn load<'s, 'a>(
        &'s mut self,
        messages: impl IntoIterator<Item = Outgoing<'a>>,
    ) -> Loaded<'s, 'a> {
        self.fill(messages, 0)
    }

    /// As [`Sender::load`], but consecutive datagrams to the same peer
    /// whose sizes allow it go as one message that the kernel cuts into
    /// the datagrams again (UDP generic segmentation offload, Linux 4.18):
    /// the IP and UDP output path runs once for them. A run joins while
    /// every datagram but the last has the first one's size (the last may
    /// be shorter), up to [`MAX_SEGMENTS`] datagrams and
    /// [`MAX_SEGMENTED_BYTES`], and only of datagrams of at most `largest`
    /// bytes (a route's MTU may be lower than the largest). Use it only on
    /// a socket for which [`segmentation_supported`] is true: an older
    /// kernel would send the run as one datagram.
    #[inline]
    pub fn load_segmented<'s, 'a>(
        &'s mut self,
        messages: impl IntoIterator<Item = Outgoing<'a>>,
        largest: usize,
    ) -> Loaded<'s, 'a> {
        self.fill(messages, largest)
    }

    /// Loads `datagrams`, joining runs of datagrams of at most `largest`
    /// bytes (0: none).
    fn fill<'s, 'a>(
        &'s mut self,
        datagrams: impl IntoIterator<Item = Outgoing<'a>>,
        largest: usize,
    ) -> Loaded<'s, 'a> {
        self.iovecs.clear();
        self.headers.clear();
        self.messages.clear();
        self.controls.clear();
        let mut last_peer: Option<Peer<'a>> = None;
        for (k, (bytes, peer)) in datagrams.into_iter().enumerate() {
            self.iovecs.push(libc::iovec {
                // The kernel only reads a sent datagram.
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: bytes.len(),
            });
            let joins = matches!((peer, last_peer), (Some(p), Some(q)) if p.same_as(&q))
                && (self.messages.last())
                    .is_some_and(|m| m.segment <= largest && m.takes(bytes.len()));
            if joins && let Some(m) = self.messages.last_mut() {
                m.count += 1;
                m.bytes += bytes.len();
                continue;
            }
            let (name, len) = match peer {
                Some(p) => (ptr::from_ref(p.storage).cast_mut().cast(), p.len),
                None => (ptr::null_mut(), 0),
            };
            // The iovec pointer is filled in below, once `iovecs` stops
            // growing.
            self.headers
                .push(message_header(ptr::null_mut(), 1, name, len));
            self.messages.push(Message {
                first: k,
                count: 1,
                segment: bytes.len(),
                bytes: bytes.len(),
                from: peer.map_or(Destination::Unknown, |p| *p.destination),
            });
            last_peer = peer;
        }
        for m in &self.messages {
            if m.has_control() {
                // `takes` keeps a segmented message's first size below
                // MAX_SEGMENTED_BYTES, so it fits a u16.
                let segment = (m.count > 1).then_some(m.segment as u16);
                self.controls.push(SendControl::new(m.from, segment));
            }
        }
        // Every vector has stopped growing: point the headers into them.
        let iovecs = self.iovecs.as_mut_ptr();
        let (controls, mut next) = (self.controls.as_mut_ptr(), 0);
        for (header, m) in self.headers.iter_mut().zip(&self.messages) {
            header.msg_hdr.msg_iov = iovecs.wrapping_add(m.first);
            header.msg_hdr.msg_iovlen = m.count;
            if m.has_control() {
                // The buffer is the control's first field (`repr(C)`).
                header.msg_hdr.msg_control = controls.wrapping_add(next).cast();
                header.msg_hdr.msg_controllen = self.controls[next].len;
                next += 1;
            }
        }
        Loaded {
            sender: self,
            _messages: PhantomData,
        }
    }
}

impl Message {
    /// Whether it carries control messages: a segment size or a source.
    fn has_control(&self) -> bool {
        self.count > 1 || self.from != Destination::Unknown
    }

    /// Whether a datagram of `len` bytes may join this message: none may
    /// follow a datagram shorter than the first.
    fn takes(&self, len: usize) -> bool {
        self.bytes == self.count * self.segment
            && len > 0
            && len <= self.segment
            && self.count < MAX_SEGMENTS
            && self.bytes + len <= MAX_SEGMENTED_BYTES
    }
}

impl Peer<'_> {
    /// Whether both are the same address (family, address, port and,
    /// for IPv6, flow label and scope), sent to the same address.
    fn same_as(&self, other: &Peer<'_>) -> bool {
        if ptr::eq(self.storage, other.storage) {
            return true;
        }
        if self.destination != other.destination {
            return false;
        }
        let address = self.to_std();
        address.is_some() && address == other.to_std()
    }
}

/// Sends one datagram of `bytes` to `to`, from `from` when known (a
/// socket bound to a wildcard address answering later, as an UPDATE is,
/// from the address the request came to).
pub fn send_one(
    socket: impl AsFd,
    bytes: &[u8],
    to: SocketAddr,
    from: Destination,
) -> io::Result<()> {
    let (storage, len) = storage_of(to);
    let peer = Peer {
        storage: &storage,
        len,
        destination: &from,
    };
    let mut sender = Sender::with_capacity(1);
    let mut loaded = sender.load([(bytes, Some(peer))]);
    loaded.send(socket, 0, Wait::Blocking).map(|_| ())
}

/// `address` as the kernel takes it.
fn storage_of(address: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all zeroes is a valid sockaddr_storage (AF_UNSPEC).
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let at: *mut libc::sockaddr_storage = &mut storage;
    match address {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger and at least as aligned
            // as sockaddr_in; the reference lives only for this write.
            let sin: &mut libc::sockaddr_in = unsafe { &mut *at.cast() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            (
                storage,
                mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: &mut libc::sockaddr_in6 = unsafe { &mut *at.cast() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            (
                storage,
                mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

/// Whether the kernel cuts segmented messages ([`Sender::load_segmented`])
/// on this UDP socket: it knows the `UDP_SEGMENT` option (Linux 4.18).
/// Before that the kernel ignored the control message and would have sent
/// a run of datagrams as one.
pub fn segmentation_supported(socket: impl AsFd) -> bool {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals the kernel writes at most
    // `len` bytes into; the descriptor is borrowed for the call.
    let ret = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    ret == 0
}

/// A batch of datagrams ready to send; it borrows them and their peers.
pub struct Loaded<'s, 'a> {
    sender: &'s mut Sender,
    _messages: PhantomData<Outgoing<'a>>,
}

impl Loaded<'_, '_> {
    /// How many messages the batch holds (as many as datagrams unless
    /// some are segmented).
    pub fn len(&self) -> usize {
        self.sender.headers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sender.headers.is_empty()
    }

    /// How many datagrams messages `0..message` carry: the index, among
    /// the datagrams loaded, of the first of message `message` (the
    /// number loaded when `message` is [`Loaded::len`]).
    pub fn datagrams_before(&self, message: usize) -> usize {
        match self.sender.messages.get(message) {
            Some(m) => m.first,
            None => self.sender.iovecs.len(),
        }
    }

    /// The size its datagrams are cut to, if message `message` carries
    /// more than one.
    pub fn segment_size(&self, message: usize) -> Option<usize> {
        let m = self.sender.messages.get(message)?;
        (m.count > 1).then_some(m.segment)
    }

    /// Sends the messages from the `first`th on in one system call.
    /// Returns how many messages the kernel took (from `first` on, in
    /// order); an error is about the `first`th.
    #[inline]
    pub fn send(&mut self, socket: impl AsFd, first: usize, wait: Wait) -> io::Result<usize> {
        let rest = &mut self.sender.headers[first..];
        let flags = match wait {
            Wait::Blocking => 0,
            Wait::Never => libc::MSG_DONTWAIT,
        };
        // SAFETY: each header points at its own iovecs in `iovecs` and
        // its control message in `controls` (neither resized since
        // `load`), and at messages and a peer address that `self` borrows
        // for 'a (see the module invariants); the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                socket.as_fd().as_raw_fd(),
                rest.as_mut_ptr(),
                rest.len() as libc::c_uint,
                flags,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn pair(address: &str) -> (UdpSocket, UdpSocket) {
        let bind = || {
            let s = UdpSocket::bind(address).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            s
        };
        (bind(), bind())
    }

    /// Receives until `want` datagrams have come (the kernel may hand
    /// them over in more than one batch).
    fn receive_all(rx: &mut Receiver, socket: &UdpSocket, want: usize) -> Vec<(Vec<u8>, bool)> {
        let mut got = Vec::new();
        while got.len() < want {
            let n = rx.receive(socket, Wait::Blocking).unwrap();
            assert!(n > 0 && n <= rx.capacity());
            got.extend((0..n).map(|i| (rx.datagram(i).to_vec(), rx.truncated(i))));
        }
        got
    }

    #[test]
    fn a_batch_arrives_with_its_peers_and_goes_back() {
        let (server, client) = pair("127.0.0.1:0");
        let to = server.local_addr().unwrap();
        for i in 0..6u8 {
            client.send_to(&[i; 3], to).unwrap();
        }
        let mut rx = Receiver::new(8, 64);
        let got = receive_all(&mut rx, &server, 6);
        let want: Vec<(Vec<u8>, bool)> = (0..6u8).map(|i| (vec![i; 3], false)).collect();
        assert_eq!(got, want);
        // Answer the last batch, each datagram reversed with a marker.
        let n = rx.receive(&server, Wait::Never).unwrap_err();
        assert_eq!(n.kind(), io::ErrorKind::WouldBlock);
        client.send_to(b"abc", to).unwrap();
        client.send_to(b"defg", to).unwrap();
        let n = receive_all(&mut rx, &server, 2).len();
        assert_eq!(n, 2, "both queued datagrams came in one batch");
        let replies: Vec<Vec<u8>> = (0..n)
            .map(|i| rx.datagram(i).iter().rev().copied().collect())
            .collect();
        assert!((0..n).all(|i| rx.peer(i).to_std() == Some(client.local_addr().unwrap())));
        assert!((0..n).all(|i| rx.peer(i).ip() == Some(client.local_addr().unwrap().ip())));
        assert!((0..n).all(|i| rx.peer(i).port() == Some(client.local_addr().unwrap().port())));
        let mut tx = Sender::with_capacity(8);
        let mut loaded = tx.load((0..n).map(|i| (&replies[i][..], Some(rx.peer(i)))));
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.send(&server, 0, Wait::Blocking).unwrap(), 2);
        let mut buf = [0u8; 16];
        let len = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"cba");
        let len = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"gfed");
    }

    #[test]
    fn an_over_long_datagram_is_cut_and_flagged() {
        let (server, client) = pair("127.0.0.1:0");
        let to = server.local_addr().unwrap();
        client.send_to(&[7u8; 100], to).unwrap();
        client.send_to(&[8u8; 16], to).unwrap();
        let mut rx = Receiver::new(4, 16);
        let got = receive_all(&mut rx, &server, 2);
        assert_eq!(got, vec![(vec![7u8; 16], true), (vec![8u8; 16], false)]);
    }

    /// Datagrams longer than a slot come whole from the spill area, in a
    /// batch with short ones, up to the largest size; past it they are
    /// cut there and flagged.
    #[test]
    fn a_long_datagram_spills_whole_beside_short_ones() {
        let (server, client) = pair("127.0.0.1:0");
        let to = server.local_addr().unwrap();
        let long: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let longest: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
        client.send_to(b"short", to).unwrap();
        client.send_to(&long, to).unwrap();
        client.send_to(&long[..4096], to).unwrap();
        client.send_to(&longest, to).unwrap();
        client.send_to(b"after", to).unwrap();
        let mut rx = Receiver::with_spill(8, 4096, 8192);
        let got = receive_all(&mut rx, &server, 5);
        let want = vec![
            (b"short".to_vec(), false),
            (long.clone(), false),
            (long[..4096].to_vec(), false),
            (longest[..8192].to_vec(), true),
            (b"after".to_vec(), false),
        ];
        assert_eq!(got, want);
        // A slot that held a long one holds a short one next.
        client.send_to(b"x", to).unwrap();
        client.send_to(b"yy", to).unwrap();
        assert_eq!(
            receive_all(&mut rx, &server, 2),
            vec![(b"x".to_vec(), false), (b"yy".to_vec(), false)]
        );
    }

    #[test]
    fn a_short_batch_returns_what_is_queued() {
        let (server, client) = pair("127.0.0.1:0");
        client
            .send_to(b"one", server.local_addr().unwrap())
            .unwrap();
        let mut rx = Receiver::new(32, 512);
        assert_eq!(rx.receive(&server, Wait::Blocking).unwrap(), 1);
        assert_eq!(rx.datagram(0), b"one");
        server
            .set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let err = rx.receive(&server, Wait::Blocking).unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn ipv6_peers_are_decoded() {
        let (server, client) = pair("[::1]:0");
        client.send_to(b"x", server.local_addr().unwrap()).unwrap();
        let mut rx = Receiver::new(2, 64);
        receive_all(&mut rx, &server, 1);
        assert_eq!(rx.peer(0).to_std(), Some(client.local_addr().unwrap()));
        assert_eq!(rx.peer(0).ip(), Some(client.local_addr().unwrap().ip()));
        assert_eq!(rx.peer(0).port(), Some(client.local_addr().unwrap().port()));
    }

    #[test]
    fn a_peer_of_another_family_or_too_short_has_no_address() {
        // SAFETY: all zeroes is a valid sockaddr_storage (AF_UNSPEC).
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let full = ADDRESS_LEN;
        let unspecified = Peer {
            storage: &storage,
            len: full,
            destination: &Destination::Unknown,
        };
        assert_eq!((unspecified.ip(), unspecified.to_std()), (None, None));
        assert_eq!(unspecified.port(), None);
        storage.ss_family = libc::AF_INET as libc::sa_family_t;
        let short = Peer {
            storage: &storage,
            len: 4,
            destination: &Destination::Unknown,
        };
        assert_eq!((short.ip(), short.to_std()), (None, None));
        storage.ss_family = libc::AF_INET6 as libc::sa_family_t;
        let v4_sized = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let short = Peer {
            storage: &storage,
            len: v4_sized,
            destination: &Destination::Unknown,
        };
        assert_eq!((short.ip(), short.to_std()), (None, None));
        let v6 = Peer {
            storage: &storage,
            len: full,
            destination: &Destination::Unknown,
        };
        assert_eq!(v6.ip(), Some(IpAddr::from([0u8; 16])));
        assert_eq!(v6.port(), Some(0));
    }

    #[test]
    fn a_connected_socket_sends_without_peers_and_a_batch_can_resume() {
        let (server, client) = pair("127.0.0.1:0");
        client.connect(server.local_addr().unwrap()).unwrap();
        let messages: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; i as usize + 1]).collect();
        let mut tx = Sender::with_capacity(2);
        let mut loaded = tx.load(messages.iter().map(|m| (&m[..], None)));
        assert_eq!(loaded.len(), 5, "more than the capacity is fine");
        assert_eq!(loaded.send(&client, 3, Wait::Never).unwrap(), 2);
        assert_eq!(loaded.send(&client, 0, Wait::Never).unwrap(), 5);
        let mut rx = Receiver::new(16, 64);
        let got: Vec<Vec<u8>> = receive_all(&mut rx, &server, 7)
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        let mut want = messages[3..].to_vec();
        want.extend(messages.iter().cloned());
        assert_eq!(got, want);
    }

    #[test]
    fn an_unconnected_socket_without_a_peer_is_an_error() {
        let (server, _client) = pair("127.0.0.1:0");
        let mut tx = Sender::with_capacity(1);
        let mut loaded = tx.load([(&b"x"[..], None)]);
        assert!(loaded.send(&server, 0, Wait::Never).is_err());
    }
    /// Datagrams whose sizes are `sizes`, each filled with its index.
    fn datagrams(sizes: &[usize]) -> Vec<Vec<u8>> {
        sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| vec![k as u8; n])
            .collect()
    }

    /// Sends `messages` to `to`'s address from `from` as segmented runs,
    /// then checks that `to` receives each as its own datagram, in order.
    /// Returns how the datagrams were grouped into messages.
    fn send_segmented(from: &UdpSocket, to: &UdpSocket, messages: &[Vec<u8>]) -> Vec<usize> {
        assert!(segmentation_supported(from));
        crate::socket::grow_receive_buffer(to, 8 << 20).unwrap();
        let mut rx = Receiver::new(4, 64 << 10);
        // A peer as the kernel writes it: learn `to`'s from a datagram.
        to.send_to(b"hello", from.local_addr().unwrap()).unwrap();
        receive_all(&mut rx, from, 1);
        let mut tx = Sender::with_capacity(4);
        let to_peer = messages.iter().map(|m| (&m[..], Some(rx.peer(0))));
        let mut loaded = tx.load_segmented(to_peer, MAX_SEGMENTED_BYTES);
        let groups: Vec<usize> = (0..=loaded.len())
            .map(|m| loaded.datagrams_before(m))
            .collect();
        let mut sent = 0;
        while sent < loaded.len() {
            sent += loaded.send(from, sent, Wait::Blocking).unwrap();
        }
        let mut rx = Receiver::new(64, 64 << 10);
        let got: Vec<Vec<u8>> = receive_all(&mut rx, to, messages.len())
            .into_iter()
            .map(|(d, truncated)| {
                assert!(!truncated);
                d
            })
            .collect();
        assert_eq!(
            got, messages,
            "each datagram arrives alone, whole, in order"
        );
        groups
    }

    #[test]
    fn runs_of_equal_sizes_go_as_one_message_and_arrive_apart() {
        for address in ["127.0.0.1:0", "[::1]:0"] {
            let (server, client) = pair(address);
            // Equal sizes join, the last of a run may be shorter; a larger
            // one or any after a shorter one starts a new message.
            let sizes = [300, 300, 300, 120, 300, 300, 500, 40, 40, 41];
            let groups = send_segmented(&server, &client, &datagrams(&sizes));
            assert_eq!(groups, vec![0, 4, 6, 8, 9, 10], "{address}");
        }
    }

    #[test]
    fn a_run_stops_at_the_segment_and_byte_limits() {
        let (server, client) = pair("127.0.0.1:0");
        // At the segment limit one message, past it two.
        let at = datagrams(&[100; MAX_SEGMENTS]);
        assert_eq!(send_segmented(&server, &client, &at), vec![0, MAX_SEGMENTS]);
        let past = datagrams(&[100; MAX_SEGMENTS + 1]);
        let want = vec![0, MAX_SEGMENTS, MAX_SEGMENTS + 1];
        assert_eq!(send_segmented(&server, &client, &past), want);
        // 1,109 bytes: 59 fill 65,431 of the 65,507; a 60th would pass it,
        // but a last one of 76 bytes fits exactly.
        let mut sizes = vec![1109; 60];
        assert_eq!(
            send_segmented(&server, &client, &datagrams(&sizes)),
            vec![0, 59, 60]
        );
        sizes.truncate(59);
        sizes.push(MAX_SEGMENTED_BYTES - 59 * 1109);
        assert_eq!(
            send_segmented(&server, &client, &datagrams(&sizes)),
            vec![0, 60]
        );
        sizes[59] += 1;
        assert_eq!(
            send_segmented(&server, &client, &datagrams(&sizes)),
            vec![0, 59, 60]
        );
    }

    #[test]
    fn runs_never_join_datagrams_for_different_peers() {
        let (server, client) = pair("127.0.0.1:0");
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        other
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        for peer in [&client, &other] {
            peer.send_to(b"q", server.local_addr().unwrap()).unwrap();
        }
        let mut rx = Receiver::new(4, 64);
        receive_all(&mut rx, &server, 2);
        let reply = [9u8; 50];
        let mut tx = Sender::with_capacity(4);
        let order = [0, 0, 1, 1, 0];
        let to_peers = order.map(|i| (&reply[..], Some(rx.peer(i))));
        let mut loaded = tx.load_segmented(to_peers, 50);
        assert_eq!(loaded.len(), 3);
        let sizes = [0, 1, 2].map(|m| loaded.segment_size(m));
        assert_eq!(sizes, [Some(50), Some(50), None]);
        assert_eq!(loaded.send(&server, 0, Wait::Blocking).unwrap(), 3);
        for (peer, want) in [(&client, 3), (&other, 2)] {
            let mut got = Receiver::new(8, 64);
            assert_eq!(receive_all(&mut got, peer, want).len(), want);
        }
        // Unsegmented loads and connected sockets (no peer) never join.
        let loaded = tx.load(order.map(|i| (&reply[..], Some(rx.peer(i)))));
        assert_eq!(loaded.len(), 5);
        assert_eq!(loaded.datagrams_before(2), 2);
        let loaded = tx.load_segmented([(&reply[..], None), (&reply[..], None)], 50);
        assert_eq!(loaded.len(), 2);
        // Nor do datagrams above the largest size asked for.
        let to_peers = order.map(|i| (&reply[..], Some(rx.peer(i))));
        assert_eq!(tx.load_segmented(to_peers, 49).len(), 5);
    }

    /// A wildcard socket that keeps destinations answers a query sent to
    /// one of the host's addresses from that address, alone, in a run
    /// (segmented) and later ([`send_one`]); without, the route's
    /// preferred address answers.
    #[test]
    fn a_wildcard_socket_answers_from_the_address_asked() {
        let server = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = server.local_addr().unwrap().port();
        receive_destinations(&server, false).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let asked: SocketAddr = format!("127.0.0.2:{port}").parse().unwrap();
        let mut rx = Receiver::new(8, 64);
        rx.keep_destinations();
        for _ in 0..3 {
            client.send_to(b"q", asked).unwrap();
        }
        receive_all(&mut rx, &server, 3);
        let n = 3;
        let want = Destination::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
        assert!((0..n).all(|i| rx.peer(i).destination() == want));
        let mut tx = Sender::with_capacity(8);
        let replies = [b"r1", b"r2", b"r3"];
        let mut loaded =
            tx.load_segmented((0..n).map(|i| (&replies[i][..], Some(rx.peer(i)))), 1000);
        assert_eq!(loaded.len(), 1, "one segmented message");
        assert_eq!(loaded.send(&server, 0, Wait::Blocking).unwrap(), 1);
        for want in replies {
            let mut buf = [0u8; 8];
            let (len, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..len], from), (&want[..], asked));
        }
        send_one(&server, b"later", client.local_addr().unwrap(), want).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(client.recv_from(&mut buf).unwrap(), (5, asked));
        // Not kept: the reply leaves from the route's choice, 127.0.0.1.
        let mut plain = Receiver::new(2, 64);
        client.send_to(b"q", asked).unwrap();
        receive_all(&mut plain, &server, 1);
        assert_eq!(plain.peer(0).destination(), Destination::Unknown);
        tx.load([(&b"x"[..], Some(plain.peer(0)))])
            .send(&server, 0, Wait::Blocking)
            .unwrap();
        let (_, from) = client.recv_from(&mut buf).unwrap();
        assert_ne!(from, asked);
    }

    #[test]
    fn a_wildcard_ipv6_socket_keeps_destinations() {
        let server = socket_v6_only("[::]:0");
        receive_destinations(&server, true).unwrap();
        let port = server.local_addr().unwrap().port();
        let client = UdpSocket::bind("[::1]:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let asked: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        client.send_to(b"q", asked).unwrap();
        let mut rx = Receiver::new(2, 64);
        rx.keep_destinations();
        receive_all(&mut rx, &server, 1);
        let Destination::V6 { address, interface } = rx.peer(0).destination() else {
            panic!("no IPv6 destination");
        };
        assert_eq!(address, std::net::Ipv6Addr::LOCALHOST);
        assert!(interface > 0);
        let mut tx = Sender::with_capacity(2);
        tx.load([(&b"r"[..], Some(rx.peer(0)))])
            .send(&server, 0, Wait::Blocking)
            .unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(client.recv_from(&mut buf).unwrap(), (1, asked));
    }

    fn socket_v6_only(address: &str) -> UdpSocket {
        let socket = UdpSocket::bind(address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        socket
    }

    #[test]
    fn only_udp_sockets_support_segmentation() {
        let (udp, _) = pair("127.0.0.1:0");
        assert!(segmentation_supported(&udp));
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!segmentation_supported(&tcp));
    }
}
