//! Batched datagram I/O with `recvmmsg(2)` and `sendmmsg(2)`.
//!
//! One system call moves up to [`Batch::capacity`] datagrams each way,
//! which is where a UDP server's time goes once the DNS work is cheap. All
//! buffers are allocated once per worker and reused: a steady stream of
//! queries causes no heap allocation here. The system calls themselves
//! are `heron_sys::udp`'s.
//!
//! With segmentation on ([`Batch::segment_replies`]), a batch's replies
//! are grouped by peer, larger first, so that runs of equal size to one
//! peer leave as one UDP GSO message: the kernel runs its IP and UDP
//! output path (and, over loopback, the receive path) once per run and
//! cuts it into datagrams at the end. A batch without such a run costs
//! the grouping only (a sort of at most 32 keys).

use std::cmp::Reverse;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Instant;

use heron_sys::udp::{MAX_SEGMENTED_BYTES, Peer, Receiver, Sender, Wait};

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
    /// Runs of replies to one peer of at most this many octets go out as
    /// one segmented message; 0: none.
    largest_segment: usize,
    /// The sort keys of `to_send` while grouping (peer, larger first,
    /// slot); kept to reuse.
    grouping: Vec<(u64, Reverse<usize>, usize)>,
}

impl Batch {
    /// Buffers for `capacity` datagrams of up to `query_size` bytes each.
    pub fn new(capacity: usize, query_size: usize) -> Batch {
        Batch::with_spill(capacity, query_size, query_size)
    }

    /// Buffers for `capacity` datagrams of up to `largest` bytes each,
    /// slots of `query_size` bytes and the rest spilt aside
    /// ([`Receiver::with_spill`]).
    pub fn with_spill(capacity: usize, query_size: usize, largest: usize) -> Batch {
        assert!(capacity > 0 && query_size > 0);
        Batch {
            received: Receiver::with_spill(capacity, query_size, largest),
            responses: (0..capacity).map(|_| Vec::with_capacity(4096)).collect(),
            to_send: Vec::with_capacity(capacity),
            sender: Sender::with_capacity(capacity),
            received_at: Instant::now(),
            largest_segment: 0,
            grouping: Vec::with_capacity(capacity),
        }
    }

    /// Sends runs of equal-sized replies to one peer as one segmented
    /// message (UDP GSO) when `on` and the kernel supports it on `socket`
    /// (Linux 4.18). Returns whether it will.
    pub fn segment_replies(&mut self, socket: &UdpSocket, on: bool) -> bool {
        let on = on && heron_sys::udp::segmentation_supported(socket);
        self.largest_segment = if on { MAX_SEGMENTED_BYTES } else { 0 };
        on
    }

    pub fn capacity(&self) -> usize {
        self.received.capacity()
    }

    /// Replies leave from the address each query was sent to, as the
    /// kernel says it on a socket bound to a wildcard address that asked
    /// ([`heron_sys::udp::receive_destinations`]).
    pub fn keep_destinations(&mut self) {
        self.received.keep_destinations();
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
    #[inline(always)]
    pub fn reply(&mut self, i: usize) {
        self.to_send.push(i);
    }

    /// The responses marked with [`Batch::reply`] so far.
    pub fn replies(&self) -> impl Iterator<Item = &[u8]> {
        self.to_send.iter().map(|&i| &self.responses[i][..])
    }

    /// Sends every response marked with [`Batch::reply`], retrying the part
    /// of the batch the kernel did not take. Returns how many were sent;
    /// a datagram the kernel refuses (e.g. an unreachable peer) is dropped,
    /// and an error is returned when the last one was.
    pub fn send(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        if self.largest_segment > 0 && self.to_send.len() > 1 {
            self.group_by_peer();
        }
        let (received, responses) = (&self.received, &self.responses);
        // The first reply (of `to_send`) of the current load.
        let mut start = 0;
        let mut sent = 0;
        let mut failed = None;
        'load: while start < self.to_send.len() {
            let outgoing = self.to_send[start..]
                .iter()
                .map(|&i| (&responses[i][..], Some(received.peer(i))));
            let mut loaded = if self.largest_segment > 0 {
                self.sender.load_segmented(outgoing, self.largest_segment)
            } else {
                self.sender.load(outgoing)
            };
            let mut message = 0;
            while message < loaded.len() {
                match loaded.send(socket, message, Wait::Blocking) {
                    Ok(n) => {
                        sent +=
                            loaded.datagrams_before(message + n) - loaded.datagrams_before(message);
                        message += n;
                        failed = None;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if let Some(size) = loaded.segment_size(message) => {
                        let Some(largest) = largest_after_refusal(&e, size) else {
                            message += 1;
                            failed = Some(e);
                            continue;
                        };
                        tracing::info!(
                            "UDP segmentation offload refused for {size}-octet replies ({e}); \
                             this worker segments only runs of at most {largest} octets from now on"
                        );
                        self.largest_segment = largest;
                        start += loaded.datagrams_before(message);
                        continue 'load;
                    }
                    Err(e) => {
                        // The first message of the rest failed: skip it, keep going.
                        message += 1;
                        failed = Some(e);
                    }
                }
            }
            break;
        }
        self.to_send.clear();
        match failed {
            Some(e) => Err(e),
            None => Ok(sent),
        }
    }

    /// Orders the replies to send so that those to one peer are adjacent,
    /// larger first (a run may end with one shorter datagram).
    fn group_by_peer(&mut self) {
        let (received, responses) = (&self.received, &self.responses);
        self.grouping.clear();
        self.grouping.extend(self.to_send.iter().map(|&i| {
            let peer = received.peer(i).to_std().map_or(0, peer_key);
            (peer, Reverse(responses[i].len()), i)
        }));
        self.grouping.sort_unstable();
        self.to_send.clear();
        self.to_send
            .extend(self.grouping.iter().map(|&(_, _, i)| i));
    }
}

/// Groups replies by peer: equal for the same address and port; two
/// peers that collide only miss a run (the sender compares them whole).
fn peer_key(peer: SocketAddr) -> u64 {
    let address = match peer.ip() {
        IpAddr::V4(ip) => u64::from(ip.to_bits()),
        IpAddr::V6(ip) => {
            let bits = ip.to_bits();
            (bits as u64) ^ ((bits >> 64) as u64).rotate_left(17) ^ (1 << 63)
        }
    };
    address.rotate_left(16) ^ u64::from(peer.port())
}

/// The largest segment size to use after a segmented message of `size`
/// octets failed with `e`, or None when the failure is not about
/// segmenting (the message's datagrams are then dropped as one would be).
/// A route whose MTU is below the size (EINVAL, EMSGSIZE) refuses that
/// size and larger ones; a device that cannot checksum the message (EIO)
/// or a kernel without the option refuses them all (0).
fn largest_after_refusal(e: &io::Error, size: usize) -> Option<usize> {
    match e.raw_os_error()? {
        libc::EINVAL | libc::EMSGSIZE => Some(size - 1),
        libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP => Some(0),
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
    /// Queries from several clients in one batch, each answered with
    /// `reply_size(query)` bytes that start with the query: every client
    /// gets each of its replies as its own whole datagram.
    fn answer_clients(server: &UdpSocket, clients: &[UdpSocket], queries: &[&[u8]]) -> usize {
        let to = server.local_addr().unwrap();
        for client in clients {
            for q in queries {
                client.send_to(q, to).unwrap();
            }
        }
        let want = clients.len() * queries.len();
        let mut batch = Batch::new(32, 512);
        assert!(batch.segment_replies(server, true));
        answer_sized(&mut batch, server, want);
        for client in clients {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            for _ in queries {
                let n = client.recv(&mut buf).unwrap();
                got.push(buf[..n].to_vec());
            }
            got.sort();
            let mut want: Vec<Vec<u8>> = queries
                .iter()
                .map(|q| {
                    let mut r = q.to_vec();
                    r.resize(reply_size(q), 0xAA);
                    r
                })
                .collect();
            want.sort();
            assert_eq!(got, want, "client {:?}", client.local_addr());
        }
        want
    }

    /// Receives until `want` queries came, answering each with
    /// [`reply_size`] octets that start with the query; every send must
    /// take the whole batch.
    fn answer_sized(batch: &mut Batch, server: &UdpSocket, want: usize) {
        let mut answered = 0;
        while answered < want {
            let n = batch.receive(server).unwrap();
            for i in 0..n {
                let (query, response) = batch.slot(i);
                response.clear();
                response.extend_from_slice(query);
                response.resize(reply_size(query), 0xAA);
                batch.reply(i);
            }
            assert_eq!(batch.send(server).unwrap(), n);
            answered += n;
        }
    }

    /// Sizes that make runs: the query's first byte picks one of three.
    fn reply_size(query: &[u8]) -> usize {
        [100, 100, 1232, 487][query[0] as usize % 4]
    }

    #[test]
    fn segmented_replies_reach_several_clients_as_separate_datagrams() {
        for (server, client) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let (server, first) = pair(server, client);
            let clients = [
                first,
                UdpSocket::bind(client).unwrap(),
                UdpSocket::bind(client).unwrap(),
            ];
            for c in &clients {
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            }
            // Equal sizes, a shorter one after them, a larger one.
            let queries: Vec<[u8; 3]> = (0..8u8).map(|i| [i, i, 7]).collect();
            let queries: Vec<&[u8]> = queries.iter().map(|q| &q[..]).collect();
            assert_eq!(answer_clients(&server, &clients, &queries), 24);
        }
    }

    #[test]
    fn replies_are_grouped_by_peer_larger_first() {
        let (server, a) = pair("127.0.0.1:0", "127.0.0.1:0");
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = server.local_addr().unwrap();
        for (client, size) in [(&a, 10), (&b, 10), (&a, 30), (&b, 10), (&a, 10)] {
            client.send_to(&[size], to).unwrap();
        }
        let mut batch = Batch::new(8, 64);
        batch.largest_segment = MAX_SEGMENTED_BYTES;
        // Sent over loopback, all are queued before the receive.
        assert_eq!(batch.receive(&server).unwrap(), 5);
        for i in 0..5 {
            let (query, response) = batch.slot(i);
            response.clear();
            response.resize(query[0] as usize, 1);
            batch.reply(i);
        }
        batch.group_by_peer();
        let order: Vec<(SocketAddr, usize)> = batch
            .to_send
            .iter()
            .map(|&i| (batch.peer(i).unwrap(), batch.responses[i].len()))
            .collect();
        let (a, b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let by_a = [(a, 30), (a, 10), (a, 10)];
        let by_b = [(b, 10), (b, 10)];
        let want: Vec<_> = if peer_key(a) < peer_key(b) {
            by_a.iter().chain(&by_b).copied().collect()
        } else {
            by_b.iter().chain(&by_a).copied().collect()
        };
        assert_eq!(order, want);
    }

    /// A route whose MTU is below a reply's size refuses a segmented
    /// message (EINVAL): the batch sends that run one datagram per message
    /// (fragmented by IP), segments only smaller replies from then on, and
    /// loses nothing.
    #[test]
    fn a_refused_segmented_send_falls_back_to_single_datagrams() {
        if !heron_sys::process::is_root() {
            eprintln!("skipped: needs root for a network namespace");
            return;
        }
        std::thread::spawn(|| {
            heron_sys::process::unshare_network_namespace().unwrap();
            let ip = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up", "mtu", "1000"])
                .status()
                .unwrap();
            assert!(ip.success());
            let (server, client) = pair("127.0.0.1:0", "127.0.0.1:0");
            // 1,232-byte replies exceed the MTU; 100-byte ones do not.
            let queries: [&[u8]; 4] = [&[2, 0], &[2, 1], &[0, 2], &[0, 3]];
            let mut batch = Batch::new(8, 64);
            batch.largest_segment = MAX_SEGMENTED_BYTES;
            let to = server.local_addr().unwrap();
            // The second round is sent without a refusal.
            for _round in 0..2 {
                for q in queries {
                    client.send_to(q, to).unwrap();
                }
                answer_sized(&mut batch, &server, queries.len());
                assert_eq!(batch.largest_segment, 1231, "only smaller runs segmented");
                let mut sizes: Vec<usize> = (0..queries.len())
                    .map(|_| client.recv(&mut [0u8; 2048]).unwrap())
                    .collect();
                sizes.sort();
                assert_eq!(sizes, [100, 100, 1232, 1232]);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_a_route_or_device_refusal_limits_segmentation() {
        let refusal = |errno| largest_after_refusal(&io::Error::from_raw_os_error(errno), 1232);
        assert_eq!(refusal(libc::EINVAL), Some(1231));
        assert_eq!(refusal(libc::EMSGSIZE), Some(1231));
        assert_eq!(refusal(libc::EIO), Some(0));
        assert_eq!(refusal(libc::ENETUNREACH), None);
        assert_eq!(refusal(libc::EPERM), None);
    }

    #[test]
    fn peers_that_differ_get_different_keys() {
        let keys: Vec<u64> = [
            "127.0.0.1:53",
            "127.0.0.1:54",
            "127.0.0.2:53",
            "[::1]:53",
            "[::1]:54",
            "[::2]:53",
            "[2001:db8::1]:53",
        ]
        .iter()
        .map(|p| peer_key(p.parse().unwrap()))
        .collect();
        let mut unique = keys.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), keys.len());
    }
}
