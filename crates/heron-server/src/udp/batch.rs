//! Batched datagram I/O with `recvmmsg(2)` and `sendmmsg(2)`.
//!
//! One system call moves up to [`Batch::capacity`] datagrams each way,
//! which is where a UDP server's time goes once the DNS work is cheap. All
//! buffers are allocated once per worker and reused: a steady stream of
//! queries causes no heap allocation here.
//!
//! This is the only `unsafe` in the UDP path. The invariants:
//! * every `iovec` points into a heap buffer owned by the [`Batch`] that is
//!   allocated once and never resized, so moving the `Batch` value does not
//!   move what the pointers point to;
//! * the receive headers are built once; before each `recvmmsg` every
//!   `msg_namelen` is reset, so the kernel writes at most `iov_len` bytes
//!   per buffer and at most a `sockaddr_storage` of address;
//! * the send headers point into response buffers that may grow between
//!   calls, so they are rebuilt before every `sendmmsg`.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams moved per system call.
pub const DEFAULT_BATCH: usize = 32;

/// Room for any peer address.
const ADDRESS_LEN: libc::socklen_t = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// Per-worker receive and send buffers for batched UDP I/O.
pub struct Batch {
    capacity: usize,
    query_size: usize,
    /// `capacity` query buffers of `query_size` bytes, back to back.
    queries: Vec<u8>,
    query_lens: Vec<usize>,
    peers: Vec<libc::sockaddr_storage>,
    peer_lens: Vec<libc::socklen_t>,
    /// One response buffer per slot; each keeps its capacity across uses.
    responses: Vec<Vec<u8>>,
    /// Slots whose response is to be sent, in order.
    to_send: Vec<usize>,
    recv_iovecs: Vec<libc::iovec>,
    recv_headers: Vec<libc::mmsghdr>,
    send_iovecs: Vec<libc::iovec>,
    send_headers: Vec<libc::mmsghdr>,
}

impl Batch {
    /// Buffers for `capacity` datagrams of up to `query_size` bytes each.
    pub fn new(capacity: usize, query_size: usize) -> Batch {
        assert!(capacity > 0 && query_size > 0);
        let mut batch = Batch {
            capacity,
            query_size,
            queries: vec![0; capacity * query_size],
            query_lens: vec![0; capacity],
            // SAFETY: sockaddr_storage is plain old data; all zeroes is a
            // valid (AF_UNSPEC) value.
            peers: vec![unsafe { mem::zeroed() }; capacity],
            peer_lens: vec![0; capacity],
            responses: (0..capacity).map(|_| Vec::with_capacity(4096)).collect(),
            to_send: Vec::with_capacity(capacity),
            recv_iovecs: Vec::with_capacity(capacity),
            recv_headers: Vec::with_capacity(capacity),
            send_iovecs: Vec::with_capacity(capacity),
            send_headers: Vec::with_capacity(capacity),
        };
        batch.build_receive_headers();
        batch
    }

    /// Points one header per slot at its query buffer and address buffer.
    /// Called once: those buffers are never reallocated.
    fn build_receive_headers(&mut self) {
        for i in 0..self.capacity {
            let buf = &mut self.queries[i * self.query_size..(i + 1) * self.query_size];
            self.recv_iovecs.push(libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            });
        }
        for i in 0..self.capacity {
            let header = message_header(
                &mut self.recv_iovecs[i],
                (&mut self.peers[i] as *mut libc::sockaddr_storage).cast(),
                ADDRESS_LEN,
            );
            self.recv_headers.push(header);
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Blocks until at least one datagram arrives (or the socket's read
    /// timeout passes), then takes whatever else is already queued, up to
    /// the capacity. Returns how many were received.
    pub fn receive(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.to_send.clear();
        for header in &mut self.recv_headers {
            header.msg_hdr.msg_namelen = ADDRESS_LEN;
        }
        // SAFETY: `recv_headers` holds `capacity` initialised mmsghdr values
        // whose iovecs and address buffers point into `self`'s buffers (see
        // the module invariants); a null timeout means MSG_WAITFORONE alone
        // bounds the wait (the socket's SO_RCVTIMEO applies to the first).
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.recv_headers.as_mut_ptr(),
                self.capacity as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for i in 0..n {
            self.query_lens[i] = self.recv_headers[i].msg_len as usize;
            self.peer_lens[i] = self.recv_headers[i].msg_hdr.msg_namelen;
        }
        Ok(n)
    }

    /// The `i`th datagram received.
    pub fn query(&self, i: usize) -> &[u8] {
        let start = i * self.query_size;
        &self.queries[start..start + self.query_lens[i]]
    }

    /// The `i`th received datagram and the response buffer for it.
    pub fn slot(&mut self, i: usize) -> (&[u8], &mut Vec<u8>) {
        let start = i * self.query_size;
        let query = &self.queries[start..start + self.query_lens[i]];
        (query, &mut self.responses[i])
    }

    /// Where the `i`th datagram came from.
    pub fn peer(&self, i: usize) -> Option<SocketAddr> {
        sockaddr_to_std(&self.peers[i], self.peer_lens[i])
    }

    /// Marks slot `i`'s response buffer as ready to send back to its peer.
    pub fn reply(&mut self, i: usize) {
        self.to_send.push(i);
    }

    /// Sends every response marked with [`Batch::reply`], retrying the part
    /// of the batch the kernel did not take. Returns how many were sent;
    /// a datagram the kernel refuses (e.g. an unreachable peer) is dropped.
    pub fn send(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.send_iovecs.clear();
        self.send_headers.clear();
        for &i in &self.to_send {
            let buf = &self.responses[i];
            self.send_iovecs.push(libc::iovec {
                iov_base: buf.as_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            });
        }
        for (k, &i) in self.to_send.iter().enumerate() {
            let header = message_header(
                &mut self.send_iovecs[k],
                (&mut self.peers[i] as *mut libc::sockaddr_storage).cast(),
                self.peer_lens[i],
            );
            self.send_headers.push(header);
        }
        let mut sent = 0;
        while sent < self.send_headers.len() {
            let rest = &mut self.send_headers[sent..];
            // SAFETY: as in `receive`; the kernel only reads these buffers.
            let n = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    rest.as_mut_ptr(),
                    rest.len() as libc::c_uint,
                    0,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first datagram of the rest failed: skip it, keep going.
                sent += 1;
                if sent == self.send_headers.len() {
                    return Err(err);
                }
                continue;
            }
            sent += n as usize;
        }
        self.to_send.clear();
        Ok(sent)
    }
}

fn message_header(
    iov: &mut libc::iovec,
    name: *mut libc::c_void,
    namelen: libc::socklen_t,
) -> libc::mmsghdr {
    // SAFETY: msghdr and mmsghdr are plain C structs for which all zeroes
    // is valid; the fields that matter are set below.
    let mut header: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    header.msg_hdr.msg_name = name;
    header.msg_hdr.msg_namelen = namelen;
    header.msg_hdr.msg_iov = iov;
    header.msg_hdr.msg_iovlen = 1;
    header
}

fn sockaddr_to_std(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET if len as usize >= mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is large and aligned enough for it.
            let sin: &libc::sockaddr_in = unsafe { &*(storage as *const _ as *const _) };
            let ip = u32::from_be(sin.sin_addr.s_addr);
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip.into(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: &libc::sockaddr_in6 = unsafe { &*(storage as *const _ as *const _) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pair(server: &str, client: &str) -> (UdpSocket, UdpSocket) {
        let s = UdpSocket::bind(server).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let c = UdpSocket::bind(client).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        (s, c)
    }

    /// Receives until `want` datagrams have arrived (they may come in more
    /// than one batch), answering each with its payload reversed.
    fn echo_reversed(batch: &mut Batch, server: &UdpSocket, want: usize) -> Vec<SocketAddr> {
        let mut peers = Vec::new();
        while peers.len() < want {
            let n = batch.receive(server).unwrap();
            for i in 0..n {
                let (query, response) = batch.slot(i);
                response.clear();
                response.extend(query.iter().rev());
                peers.push(batch.peer(i).unwrap());
                batch.reply(i);
            }
            assert_eq!(batch.send(server).unwrap(), n);
        }
        peers
    }

    #[test]
    fn a_batch_of_datagrams_goes_back_to_each_sender() {
        let (server, client) = pair("127.0.0.1:0", "127.0.0.1:0");
        let to = server.local_addr().unwrap();
        for i in 0..10u8 {
            client.send_to(&[i, 1, 2], to).unwrap();
        }
        let mut batch = Batch::new(4, 512);
        let peers = echo_reversed(&mut batch, &server, 10);
        assert!(peers.iter().all(|p| *p == client.local_addr().unwrap()));
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        for _ in 0..10 {
            let n = client.recv(&mut buf).unwrap();
            got.push(buf[..n].to_vec());
        }
        got.sort();
        let want: Vec<Vec<u8>> = (0..10u8).map(|i| vec![2, 1, i]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn ipv6_peers_are_decoded() {
        let (server, client) = pair("[::1]:0", "[::1]:0");
        client
            .send_to(b"abc", server.local_addr().unwrap())
            .unwrap();
        let mut batch = Batch::new(2, 64);
        let peers = echo_reversed(&mut batch, &server, 1);
        assert_eq!(peers[0], client.local_addr().unwrap());
        let mut buf = [0u8; 8];
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"cba");
    }

    #[test]
    fn oversized_datagrams_are_cut_to_the_buffer() {
        let (server, client) = pair("127.0.0.1:0", "127.0.0.1:0");
        client
            .send_to(&[7u8; 100], server.local_addr().unwrap())
            .unwrap();
        let mut batch = Batch::new(1, 16);
        assert_eq!(batch.receive(&server).unwrap(), 1);
        assert_eq!(batch.slot(0).0.len(), 16);
    }

    #[test]
    fn receive_times_out_with_nothing_queued() {
        let (server, _client) = pair("127.0.0.1:0", "127.0.0.1:0");
        server
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut batch = Batch::new(2, 64);
        let err = batch.receive(&server).unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn responses_reuse_their_buffers() {
        let (server, client) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut batch = Batch::new(1, 64);
        for round in 0..3u8 {
            client
                .send_to(&[round], server.local_addr().unwrap())
                .unwrap();
            assert_eq!(batch.receive(&server).unwrap(), 1);
            let (_, response) = batch.slot(0);
            let before = response.as_ptr();
            response.clear();
            response.extend_from_slice(&[round; 100]);
            assert_eq!(response.as_ptr(), before, "no reallocation");
            batch.reply(0);
            batch.send(&server).unwrap();
        }
    }
}
