//! Batched datagram I/O with `recvmmsg(2)` and `sendmmsg(2)`.
//!
//! One system call moves up to [`Batch::capacity`] datagrams each way,
//! which is where a UDP server's time goes once the DNS work is cheap. All
//! buffers are allocated once per worker and reused: a steady stream of
//! queries causes no heap allocation here. The system calls themselves
//! are `heron_sys::udp`'s.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Instant;

use heron_sys::udp::{Peer, Receiver, Sender, Wait};

/// Datagrams moved per system call.
pub const DEFAULT_BATCH: usize = 32;

/// Per-worker receive and send buffers for batched UDP I/O.
pub struct Batch {
    /// `capacity` query buffers and their peers' addresses.
    received: Receiver,
    /// One response buffer per slot; each keeps its capacity across uses.
    responses: Vec<Vec<u8>>,
    /// Slots whose response is to be sent, in order.
    to_send: Vec<usize>,
    sender: Sender,
    /// When the last receive returned.
    received_at: Instant,
}

impl Batch {
    /// Buffers for `capacity` datagrams of up to `query_size` bytes each.
    pub fn new(capacity: usize, query_size: usize) -> Batch {
        assert!(capacity > 0 && query_size > 0);
        Batch {
            received: Receiver::new(capacity, query_size),
            responses: (0..capacity).map(|_| Vec::with_capacity(4096)).collect(),
            to_send: Vec::with_capacity(capacity),
            sender: Sender::with_capacity(capacity),
            received_at: Instant::now(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.received.capacity()
    }

    /// Blocks until at least one datagram arrives (or the socket's read
    /// timeout passes), then takes whatever else is already queued, up to
    /// the capacity. Returns how many were received.
    pub fn receive(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.to_send.clear();
        let received = self.received.receive(socket, Wait::Blocking)?;
        self.received_at = Instant::now();
        Ok(received)
    }

    /// When the last [`Batch::receive`] returned datagrams: the one clock
    /// read a batch makes, which its handler dates the batch by.
    pub fn received_at(&self) -> Instant {
        self.received_at
    }

    /// The `i`th datagram received.
    pub fn query(&self, i: usize) -> &[u8] {
        self.received.datagram(i)
    }

    /// The `i`th received datagram and the response buffer for it.
    pub fn slot(&mut self, i: usize) -> (&[u8], &mut Vec<u8>) {
        (self.received.datagram(i), &mut self.responses[i])
    }

    /// The `i`th received datagram, where it came from (decoded on
    /// demand) and the response buffer for it.
    #[inline(always)]
    pub fn datagram(&mut self, i: usize) -> (&[u8], Peer<'_>, &mut Vec<u8>) {
        let peer = self.received.peer(i);
        (self.received.datagram(i), peer, &mut self.responses[i])
    }

    /// The `i`th received datagram and the response written for it.
    pub fn exchange(&self, i: usize) -> (&[u8], &[u8]) {
        (self.received.datagram(i), &self.responses[i])
    }

    /// Where the `i`th datagram came from.
    pub fn peer(&self, i: usize) -> Option<SocketAddr> {
        self.received.peer(i).to_std()
    }

    /// The address alone of the `i`th datagram's peer: cheaper than
    /// [`Batch::peer`] when the port is not needed.
    #[inline]
    pub fn peer_ip(&self, i: usize) -> Option<IpAddr> {
        self.received.peer(i).ip()
    }

    /// Marks slot `i`'s response buffer as ready to send back to its peer.
    pub fn reply(&mut self, i: usize) {
        self.to_send.push(i);
    }

    /// The responses marked with [`Batch::reply`] so far.
    pub fn replies(&self) -> impl Iterator<Item = &[u8]> {
        self.to_send.iter().map(|&i| &self.responses[i][..])
    }

    /// Sends every response marked with [`Batch::reply`], retrying the part
    /// of the batch the kernel did not take. Returns how many were sent;
    /// a datagram the kernel refuses (e.g. an unreachable peer) is dropped.
    pub fn send(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let (received, responses) = (&self.received, &self.responses);
        let mut loaded = self.sender.load(
            self.to_send
                .iter()
                .map(|&i| (&responses[i][..], Some(received.peer(i)))),
        );
        let total = loaded.len();
        let mut sent = 0;
        while sent < total {
            match loaded.send(socket, sent, Wait::Blocking) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // The first datagram of the rest failed: skip it, keep going.
                    sent += 1;
                    if sent == total {
                        return Err(e);
                    }
                }
            }
        }
        self.to_send.clear();
        Ok(sent)
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
                assert_eq!(batch.peer_ip(i), batch.peer(i).map(|p| p.ip()));
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
    fn a_batch_is_dated_when_it_arrives() {
        let (server, client) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut batch = Batch::new(2, 64);
        let before = Instant::now();
        client.send_to(b"x", server.local_addr().unwrap()).unwrap();
        assert_eq!(batch.receive(&server).unwrap(), 1);
        let (first, after) = (batch.received_at(), Instant::now());
        assert!(before <= first && first <= after);
        // A receive that times out keeps the last date.
        server
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        assert!(batch.receive(&server).is_err());
        assert_eq!(batch.received_at(), first);
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
