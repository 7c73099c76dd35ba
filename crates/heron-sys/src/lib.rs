//! Every system call of Heron that needs `unsafe`, behind safe wrappers.
//!
//! The rest of the workspace forbids `unsafe` (`unsafe_code = "forbid"` in
//! the root `Cargo.toml`), so that an unsound line can only be in this
//! crate, where each `unsafe` block says why it is sound and has a test.
//! Where `rustix` already offers a safe call it is used and this crate
//! only gives it Heron's shape; `libc` is used for what rustix lacks
//! (`recvmmsg`, `sched_setscheduler`, `malloc_trim`, jemalloc's purge, signal handlers,
//! `MADV_COLLAPSE`, the process-wide `setuid` and user lookups, `getifaddrs`,
//! binding an AF_PACKET socket).
//!
//! * [`udp`]: batched datagram receive and send (`recvmmsg`/`sendmmsg`).
//! * [`cpu`]: CPU pinning, online CPUs.
//! * [`prefetch`]: asking the CPU to load a cache line (no system call).
//! * [`sched`]: scheduling policy, nice value, timer slack.
//! * [`memory`]: the server's allocator (jemalloc) and handing its free
//!   pages back, huge pages (`MADV_COLLAPSE`).
//! * [`files`]: advisory file locks (`flock`), reading a regular file of
//!   bounded size (a FIFO or `/dev/zero` refused before a byte is read).
//! * [`process`]: signals, resource limits, namespaces, clock ticks.
//! * [`socket`]: socket options the standard library lacks.
//! * [`privileges`]: user and group lookup, dropping root.
//! * [`xdp`]: the XDP program, AF_XDP sockets and their rings, the
//!   host's addresses (`getifaddrs`) and a watch on them.
//! * [`packet`]: raw Ethernet frames on one interface (AF_PACKET), for
//!   tests of the XDP path.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod files;
pub mod memory;
pub mod packet;
pub mod prefetch;
pub mod privileges;
pub mod process;
pub mod sched;
pub mod socket;
pub mod udp;
pub mod xdp;

/// The tests run on the allocator the server runs on.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: memory::ServerAllocator = memory::ServerAllocator;
