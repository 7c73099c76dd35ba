//! An AF_XDP socket with its own UMEM: the frames packets land in and
//! leave from, and the four rings shared with the kernel (fill and
//! completion for the UMEM, RX and TX for the socket).
//!
//! A frame is always owned by exactly one side. The kernel owns the
//! frames in the fill ring (to receive into) and in the TX ring (to send);
//! it hands them back through the RX and completion rings. A frame handed
//! back is a [`Frame`] token (received) or an entry of `free` (sent, or
//! not yet given to the kernel); only those are read or written here.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes per UMEM frame: one Ethernet frame of the usual MTU, with the
/// kernel's headroom (`XDP_PACKET_HEADROOM`, 256) in front.
pub const FRAME_SIZE: u32 = 2048;
/// The longest frame a UMEM frame takes in, after the kernel's headroom:
/// the program passes longer ones to the kernel (an AF_XDP socket would
/// drop them, unanswered and uncounted).
pub const MAX_FRAME_IN: u32 = FRAME_SIZE - 256;
/// Frames per socket: the fill ring's and the TX ring's worth, so that
/// the fill ring can be kept full while replies are in flight.
const FRAMES: u32 = 2 * RING_SIZE;

/// The packet memory one socket (one RX queue) registers, which counts
/// against the locked-memory limit.
pub const UMEM_BYTES: u64 = FRAMES as u64 * FRAME_SIZE as u64;
/// Entries of each ring.
const RING_SIZE: u32 = 2048;
/// Frames the kernel sends per `sendto()` or `poll()` in copy mode
/// (`TX_BATCH_SIZE`, the default `XDP_MAX_TX_SKB_BUDGET`).
pub const COPY_TX_BUDGET: u32 = 32;

/// Each socket's frames carry its number, so a frame is never given to
/// another socket (whose kernel side may be writing that address).
static NEXT_SOCKET_ID: AtomicU64 = AtomicU64::new(1);

/// A received packet's frame, owned by Heron until it is given back with
/// [`XskSocket::transmit`] or [`XskSocket::release`].
#[derive(Debug)]
pub struct Frame {
    socket: u64,
    addr: u64,
    len: u32,
}

impl Frame {
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A memory mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes: anonymous memory if `fd` is None, else the part
    /// of `fd` at `offset` (an AF_XDP ring).
    fn new(len: usize, fd: Option<BorrowedFd>, offset: u64) -> io::Result<Mapping> {
        let (flags, raw) = match fd {
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd.as_raw_fd()),
        };
        // SAFETY: a new mapping at an address the kernel chooses; it
        // aliases no Rust object, and `Drop` unmaps exactly it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap succeeded"),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are a mapping made by `Mapping::new` and
        // unmapped only here; every pointer into it lives in the struct
        // that owns this mapping and is dropped with it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping is plain memory; which thread unmaps it does not
// matter, and access to its contents goes through `&`/`&mut` of the
// owning socket.
unsafe impl Send for Mapping {}

/// One ring shared with the kernel: a producer and a consumer index and
/// `RING_SIZE` entries of `T`.
struct Ring<T> {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    entries: usize,
    /// Our side's index (the producer's if we produce, else the consumer's).
    ours: u32,
    _entry: std::marker::PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    fn map(fd: BorrowedFd, offsets: &libc::xdp_ring_offset, pgoff: u64) -> io::Result<Self> {
        let len = offsets.desc as usize + RING_SIZE as usize * size_of::<T>();
        let map = Mapping::new(len, Some(fd), pgoff)?;
        let ring = Ring {
            map,
            producer: offsets.producer as usize,
            consumer: offsets.consumer as usize,
            flags: offsets.flags as usize,
            entries: offsets.desc as usize,
            ours: 0,
            _entry: std::marker::PhantomData,
        };
        for at in [ring.producer, ring.consumer, ring.flags] {
            assert!(at + 4 <= ring.entries && at % 4 == 0, "ring offsets");
        }
        Ok(ring)
    }

    fn index(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is one of the producer/consumer/flags offsets the
        // kernel gave, checked in `map` to be 4-aligned and inside the
        // mapping, which lives as long as `self`. The kernel updates the
        // word concurrently, which is why it is read as an atomic.
        unsafe { &*self.map.ptr.as_ptr().add(at).cast::<AtomicU32>() }
    }

    fn slot(&self, index: u32) -> *mut T {
        let i = (index & (RING_SIZE - 1)) as usize;
        // SAFETY: `i < RING_SIZE`, and the mapping holds RING_SIZE entries
        // of `T` from `entries`, so the result is inside it.
        unsafe { self.map.ptr.as_ptr().add(self.entries).cast::<T>().add(i) }
    }

    fn needs_wakeup(&self) -> bool {
        self.index(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// As the consumer: entries the kernel has produced and we have not
    /// taken.
    fn available(&self) -> u32 {
        let produced = self.index(self.producer).load(Ordering::Acquire);
        produced.wrapping_sub(self.ours)
    }

    /// As the consumer: takes the next entry; call only when
    /// [`Ring::available`] said there is one.
    fn take(&mut self) -> T {
        // SAFETY: the slot is between our consumer index and the kernel's
        // producer index (read with Acquire in `available`): written by
        // the kernel and not reused until we publish our index.
        let entry = unsafe { self.slot(self.ours).read() };
        self.ours = self.ours.wrapping_add(1);
        entry
    }

    /// As the consumer: gives the taken entries' slots back.
    fn release(&self) {
        self.index(self.consumer)
            .store(self.ours, Ordering::Release);
    }

    /// As the producer: free slots.
    fn room(&self) -> u32 {
        let consumed = self.index(self.consumer).load(Ordering::Acquire);
        RING_SIZE - self.ours.wrapping_sub(consumed)
    }

    /// As the producer: writes the next entry; call only when
    /// [`Ring::room`] said there is a slot.
    fn put(&mut self, entry: T) {
        // SAFETY: the slot is between our producer index and the kernel's
        // consumer index plus the ring size (checked by `room`): the
        // kernel does not read it until we publish our index.
        unsafe { self.slot(self.ours).write(entry) };
        self.ours = self.ours.wrapping_add(1);
    }

    /// As the producer: hands the written entries to the kernel.
    fn publish(&self) {
        self.index(self.producer)
            .store(self.ours, Ordering::Release);
    }
}

/// An AF_XDP socket bound to one RX queue of one interface.
pub struct XskSocket {
    // Dropped in this order: rings, socket, then the frames.
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    umem: Mapping,
    /// Frames Heron owns that hold nothing: for the fill ring.
    free: Vec<u64>,
    id: u64,
    zero_copy: bool,
    unpublished_tx: bool,
}

fn setsockopt<T>(fd: BorrowedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed, which is
    // the type the kernel reads for this SOL_XDP option.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's structs read with `getsockopt(SOL_XDP)`: plain integers,
/// for which all-zero bytes are a valid value.
trait Plain: Sized {}
impl Plain for libc::xdp_mmap_offsets {}
impl Plain for libc::xdp_statistics {}

/// Reads option `name`; an error unless the kernel filled all of `T`.
fn getsockopt<T: Plain>(fd: BorrowedFd, name: libc::c_int) -> io::Result<T> {
    // SAFETY: `T: Plain`, a struct of integers: all-zero is a valid value.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and `len` is its size; the
    // kernel writes at most `len` bytes.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<T>() {
        return Err(io::Error::other("kernel too old: a shorter AF_XDP struct"));
    }
    Ok(value)
}

fn bind(fd: BorrowedFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `addr` is a live sockaddr_xdp and its size is passed.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl XskSocket {
    /// Creates a socket with its UMEM and rings and binds it to `queue`
    /// of interface `ifindex`: zero-copy if `try_zero_copy` and the
    /// driver has it, else copy mode; with need_wakeup either way.
    pub fn bind(ifindex: u32, queue: u32, try_zero_copy: bool) -> io::Result<XskSocket> {
        // SAFETY: socket(2) has no memory arguments; a new descriptor is
        // owned by the OwnedFd below and by nothing else.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above: `raw` is new and ours alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::new((FRAMES * FRAME_SIZE) as usize, None, 0)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_fd(), libc::XDP_UMEM_REG, &reg).map_err(locked_memory_hint)?;
        for ring in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            setsockopt(fd.as_fd(), ring, &RING_SIZE)?;
        }
        let off: libc::xdp_mmap_offsets = getsockopt(fd.as_fd(), libc::XDP_MMAP_OFFSETS)?;
        let fill = Ring::map(fd.as_fd(), &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let completion = Ring::map(fd.as_fd(), &off.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let rx = Ring::map(fd.as_fd(), &off.rx, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = Ring::map(fd.as_fd(), &off.tx, libc::XDP_PGOFF_TX_RING as u64)?;
        let wakeup = libc::XDP_USE_NEED_WAKEUP;
        let zero_copy =
            try_zero_copy && bind(fd.as_fd(), ifindex, queue, wakeup | libc::XDP_ZEROCOPY).is_ok();
        if !zero_copy {
            bind(fd.as_fd(), ifindex, queue, wakeup | libc::XDP_COPY)?;
        }
        let mut socket = XskSocket {
            fill,
            completion,
            rx,
            tx,
            fd,
            umem,
            free: (0..FRAMES).rev().map(|i| (i * FRAME_SIZE) as u64).collect(),
            id: NEXT_SOCKET_ID.fetch_add(1, Ordering::Relaxed),
            zero_copy,
            unpublished_tx: false,
        };
        socket.recycle();
        Ok(socket)
    }

    /// Whether the driver moves frames without copying them.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Takes back the frames the kernel has sent and gives the kernel
    /// every free frame the fill ring has room for.
    pub fn recycle(&mut self) {
        let done = self.completion.available();
        for _ in 0..done {
            let addr = self.completion.take();
            self.free.push(addr - addr % FRAME_SIZE as u64);
        }
        if done > 0 {
            self.completion.release();
        }
        let n = self.fill.room().min(self.free.len() as u32);
        for _ in 0..n {
            let addr = self.free.pop().expect("counted");
            self.fill.put(addr);
        }
        if n > 0 {
            self.fill.publish();
        }
    }

    /// Moves up to `max` received packets into `out`; returns how many.
    pub fn receive(&mut self, out: &mut Vec<Frame>, max: usize) -> usize {
        let n = (self.rx.available() as usize).min(max);
        for _ in 0..n {
            let desc = self.rx.take();
            out.push(Frame {
                socket: self.id,
                addr: desc.addr,
                len: desc.len,
            });
        }
        if n > 0 {
            self.rx.release();
        }
        n
    }

    /// Frame bytes from the packet's start to the end of its frame.
    fn span(&self, frame: &Frame) -> std::ops::Range<usize> {
        assert_eq!(frame.socket, self.id, "a frame of another socket");
        let start = frame.addr as usize;
        let end = start - start % FRAME_SIZE as usize + FRAME_SIZE as usize;
        assert!(end <= self.umem.len && start + frame.len as usize <= end);
        start..end
    }

    fn umem(&self) -> &[u8] {
        // SAFETY: the UMEM mapping is `len` bytes, alive while `self` is.
        // Only frames Heron owns are sliced from this (see `span` and the
        // module comment), and those the kernel does not write.
        unsafe { std::slice::from_raw_parts(self.umem.ptr.as_ptr(), self.umem.len) }
    }

    fn umem_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `umem`, and `&mut self` makes this the only slice.
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.as_ptr(), self.umem.len) }
    }

    /// The bytes of a received packet.
    pub fn packet(&self, frame: &Frame) -> &[u8] {
        let span = self.span(frame);
        &self.umem()[span.start..span.start + frame.len as usize]
    }

    /// The whole frame from the packet's start: the packet, then room to
    /// write a longer reply in its place.
    pub fn frame_mut(&mut self, frame: &Frame) -> &mut [u8] {
        let span = self.span(frame);
        &mut self.umem_mut()[span]
    }

    /// Queues the first `len` bytes of `frame` for sending; the frame
    /// comes back after the kernel sent it (see [`XskSocket::recycle`]).
    /// If the TX ring is full the frame is freed and false returned.
    pub fn transmit(&mut self, frame: Frame, len: usize) -> bool {
        let span = self.span(&frame);
        assert!(len <= span.len());
        if self.tx.room() == 0 {
            self.release(frame);
            return false;
        }
        self.tx.put(libc::xdp_desc {
            addr: frame.addr,
            len: len as u32,
            options: 0,
        });
        self.unpublished_tx = true;
        true
    }

    /// Gives a frame back unsent.
    pub fn release(&mut self, frame: Frame) {
        let _ = self.span(&frame);
        self.free.push(frame.addr - frame.addr % FRAME_SIZE as u64);
    }

    /// Replies queued on the TX ring that the kernel has not taken yet.
    pub fn tx_queued(&self) -> u32 {
        RING_SIZE - self.tx.room()
    }

    fn publish_tx(&mut self) {
        if std::mem::take(&mut self.unpublished_tx) {
            self.tx.publish();
        }
    }

    /// Hands queued replies to the kernel and has them sent now: wakes
    /// it when it asks to be woken (in copy mode, always: there the
    /// sending happens in this call, at most [`COPY_TX_BUDGET`] frames
    /// at a time, so calling it again also sends what an earlier call
    /// left).
    pub fn flush(&mut self) {
        self.publish_tx();
        if self.tx_queued() > 0 && (self.tx.needs_wakeup() || !self.zero_copy) {
            self.kick();
        }
    }

    /// Hands queued replies to the kernel, leaving their sending to the
    /// next [`wait_any`] where that costs no more: `poll()` drives TX
    /// itself (in copy mode it sends [`COPY_TX_BUDGET`] frames, and it
    /// wakes a zero-copy driver), so a worker about to wait saves the
    /// `sendto()` a flush would make. Sends now when waiting would not
    /// send sooner: a full budget queued in copy mode, or a zero-copy
    /// driver that asks to be woken.
    pub fn submit(&mut self) {
        self.publish_tx();
        let queued = self.tx_queued();
        let now = match self.zero_copy {
            true => queued > 0 && self.tx.needs_wakeup(),
            false => queued >= COPY_TX_BUDGET,
        };
        if now {
            self.kick();
        }
    }

    /// AF_XDP's "send what the TX ring holds". Errors (EAGAIN, EBUSY,
    /// ENOBUFS: the kernel is busy sending) leave the rest for the next
    /// kick or poll.
    fn kick(&self) {
        // SAFETY: a zero-length sendto with no buffer and no address.
        let _ = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
    }

    /// Waits up to `timeout_ms` for packets (also waking the driver to
    /// fill them in when the fill ring asks for it, and sending what
    /// [`XskSocket::submit`] queued); true if some came.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        wait_any(std::slice::from_ref(self), timeout_ms)
    }

    /// The kernel's counters for this socket: packets dropped for want
    /// of a fill-ring frame or of RX-ring room, and bad descriptors.
    pub fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        getsockopt(self.fd.as_fd(), libc::XDP_STATISTICS)
    }

    /// Whether the fill ring asks to be woken (the driver ran out).
    pub fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sockets one wait covers; a worker with more waits on the first ones
/// (the others are still served on each pass).
const MAX_WAIT: usize = 64;

/// Waits up to `timeout_ms` until one of `sockets` has packets; true if
/// one has. Sends what [`XskSocket::submit`] queued on the way: `poll()`
/// drives each socket's TX before it sleeps, [`COPY_TX_BUDGET`] frames
/// of it in copy mode, so a socket with more is kicked first.
pub fn wait_any(sockets: &[XskSocket], timeout_ms: i32) -> io::Result<bool> {
    if sockets.iter().any(|s| s.rx.available() > 0) {
        return Ok(true);
    }
    let (mut fds, n) = poll_set(sockets, libc::POLLIN);
    // SAFETY: `fds` holds `n` initialised pollfds (n <= its length).
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(ret > 0)
}

/// The pollfds of (the first [`MAX_WAIT`] of) `sockets` asking for
/// `events`, and how many there are. Kicks the sockets whose queued
/// replies one `poll()` would not send: more than [`COPY_TX_BUDGET`] in
/// copy mode, or any on a socket past `MAX_WAIT`. What the kernel cannot
/// take now (it is busy sending: EAGAIN) goes at the next wait or kick.
fn poll_set(sockets: &[XskSocket], events: libc::c_short) -> ([libc::pollfd; MAX_WAIT], usize) {
    let mut fds = [libc::pollfd {
        fd: -1,
        events,
        revents: 0,
    }; MAX_WAIT];
    let n = sockets.len().min(MAX_WAIT);
    for (pfd, socket) in fds.iter_mut().zip(sockets) {
        pfd.fd = socket.fd.as_raw_fd();
    }
    for (i, socket) in sockets.iter().enumerate() {
        let queued = socket.tx_queued();
        if queued > 0 && (i >= n || (!socket.zero_copy && queued > COPY_TX_BUDGET)) {
            socket.kick();
        }
    }
    (fds, n)
}

/// Sleeps for `pause` while the queries gather in the RX rings, after
/// sending what [`XskSocket::submit`] queued. A `poll()` for no event
/// does both in one call: it drives each socket's TX as [`wait_any`]'s
/// does, and arriving packets do not wake it (a socket wakes its
/// waiters for readable data, which this one does not wait for).
pub fn pause(sockets: &[XskSocket], pause: std::time::Duration) -> io::Result<()> {
    let (mut fds, n) = poll_set(sockets, 0);
    let timeout = libc::timespec {
        tv_sec: pause.as_secs() as libc::time_t,
        tv_nsec: pause.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` holds `n` initialised pollfds (n <= its length);
    // `timeout` is a valid timespec the call only reads; no signal mask.
    let ret = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            n as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    };
    if ret < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// The UMEM counts against the locked-memory limit: past it the kernel
/// says only ENOBUFS (or ENOMEM), which tells an operator nothing.
fn locked_memory_hint(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ENOBUFS) | Some(libc::ENOMEM) => io::Error::new(
            e.kind(),
            format!(
                "{e} (registering {} KiB of packet memory per queue: the locked-memory limit \
                 is too small; raise it, LimitMEMLOCK= in the unit or ulimit -l, or run with \
                 CAP_IPC_LOCK)",
                (FRAMES * FRAME_SIZE) / 1024
            ),
        ),
        _ => e,
    }
}

#[cfg(test)]
mod hint_tests {
    use super::*;

    #[test]
    fn a_umem_past_the_locked_memory_limit_is_explained() {
        let said = locked_memory_hint(io::Error::from_raw_os_error(libc::ENOBUFS)).to_string();
        assert!(said.contains("LimitMEMLOCK="), "{said}");
        let other = locked_memory_hint(io::Error::from_raw_os_error(libc::EINVAL));
        assert_eq!(other.raw_os_error(), Some(libc::EINVAL), "others unchanged");
    }
}
