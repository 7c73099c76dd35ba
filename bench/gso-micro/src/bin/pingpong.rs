//! Server CPU per exchange when every query wakes it (low load): a
//! blocking recvmmsg with a read timeout (a timer armed per sleep)
//! against none. Client on CPU 1 sends one query and waits for the reply.
use gso_micro::thread_ns;
use heron_sys::udp::{Receiver, Sender, Wait};
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn serve(timeout: bool, exchanges: u64) -> f64 {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server
        .set_read_timeout(timeout.then_some(Duration::from_millis(200)))
        .unwrap();
    let to = server.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let client = std::thread::spawn(move || {
        heron_sys::cpu::pin_current_thread(&[1]).unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 512];
        for _ in 0..exchanges {
            c.send_to(&[1u8; 40], to).unwrap();
            c.recv(&mut buf).unwrap();
        }
        d2.store(true, Ordering::Relaxed);
        c.send_to(&[0u8; 1], to).unwrap();
    });
    heron_sys::cpu::pin_current_thread(&[0]).unwrap();
    let mut rx = Receiver::new(32, 512);
    let mut tx = Sender::with_capacity(32);
    let reply = [2u8; 100];
    let t0 = thread_ns();
    while !done.load(Ordering::Relaxed) {
        let n = match rx.receive(&server, Wait::Blocking) {
            Ok(n) => n,
            Err(_) => continue,
        };
        let msgs = (0..n)
            .filter(|&i| rx.datagram(i).len() > 1)
            .map(|i| (&reply[..], Some(rx.peer(i))));
        let mut l = tx.load(msgs);
        if !l.is_empty() {
            l.send(&server, 0, Wait::Blocking).unwrap();
        }
    }
    let cost = (thread_ns() - t0) as f64 / exchanges as f64;
    client.join().unwrap();
    cost
}

fn main() {
    // true: without the timeout, the numerator.
    gso_micro::alternate(10, "without/with timeout", |without| {
        serve(!without, 20_000)
    });
}
