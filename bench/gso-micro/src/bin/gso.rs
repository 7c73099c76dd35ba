//! Kernel cost per datagram of sendmmsg over loopback, plain against
//! UDP GSO, for runs of `run` datagrams per peer: the sender's thread CPU
//! time (schedstat) per datagram sent, which over loopback includes the
//! receive path up to the receiver's socket queue. Drained by a thread on
//! another CPU. Alternating trials.
use gso_micro::thread_ns;
use heron_sys::udp::{MAX_SEGMENTED_BYTES, Receiver, Sender, Wait};
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let run: usize = args[1].parse().unwrap();
    let peers: usize = args[2].parse().unwrap();
    let size: usize = args[3].parse().unwrap();
    let trials: usize = args.get(4).map_or(10, |s| s.parse().unwrap());
    heron_sys::cpu::pin_current_thread(&[0]).unwrap();
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    let mut drains = Vec::new();
    for _ in 0..peers {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        heron_sys::socket::grow_receive_buffer(&c, 64 << 20).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        c.send_to(b"q", server.local_addr().unwrap()).unwrap();
        let c2 = c.try_clone().unwrap();
        let stop = stop.clone();
        drains.push(std::thread::spawn(move || {
            heron_sys::cpu::pin_current_thread(&[1]).unwrap();
            let mut rx = Receiver::new(64, 2048);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(k) = rx.receive(&c2, Wait::Blocking) {
                    n += k as u64;
                }
            }
            n
        }));
        clients.push(c);
    }
    // Peers as the kernel wrote them, all from one receive.
    let mut rx = Receiver::new(64, 64);
    let got = rx.receive(&server, Wait::Blocking).unwrap();
    assert_eq!(got, peers, "all peers in one receive");
    // The batch: `run` datagrams for each peer, the last of a run one byte
    // shorter (a run of distinct sizes pairs up the same way).
    let bufs: Vec<Vec<u8>> = (0..peers * run)
        .map(|k| {
            vec![
                7u8;
                if k % run == run - 1 && run > 1 {
                    size - 1
                } else {
                    size
                }
            ]
        })
        .collect();
    let mut tx = Sender::with_capacity(64);
    let batches = 20_000 / (peers * run) + 1;
    let label = format!("run {run} peers {peers} size {size}: gso/plain");
    gso_micro::alternate(trials, &label, |segmented| {
        let t0 = thread_ns();
        for _ in 0..batches {
            let msgs = (0..peers * run).map(|k| (&bufs[k][..], Some(rx.peer(k / run))));
            let mut loaded = if segmented {
                tx.load_segmented(msgs, MAX_SEGMENTED_BYTES)
            } else {
                tx.load(msgs)
            };
            let mut sent = 0;
            while sent < loaded.len() {
                sent += loaded.send(&server, sent, Wait::Blocking).unwrap();
            }
        }
        let cost = (thread_ns() - t0) as f64 / (batches * peers * run) as f64;
        std::thread::sleep(Duration::from_millis(50));
        cost
    });
    stop.store(true, Ordering::Relaxed);
    for d in drains {
        d.join().unwrap();
    }
}
