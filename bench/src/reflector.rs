//! The reflector: Heron's own UDP worker loop (`heron_server::udp::run_loop`)
//! with a handler that copies the query back with QR set and does no DNS
//! work. Its queries per CPU-second are the ceiling of this kernel path for
//! Heron's I/O code, and it improves when that code does.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

static STOP: AtomicBool = AtomicBool::new(false);

/// The echo: the response is the query with the QR bit set.
pub fn reflect(query: &[u8], response: &mut Vec<u8>) -> bool {
    if query.len() < 12 {
        return false;
    }
    response.clear();
    response.extend_from_slice(query);
    response[2] |= 0x80;
    true
}

/// Serves until SIGTERM or SIGINT, one thread per worker.
pub fn run(listen: SocketAddr, workers: usize) -> io::Result<()> {
    heron_sys::process::set_on_termination(&STOP)?;
    let mut threads = Vec::new();
    for i in 0..workers.max(1) {
        let socket = heron_server::udp::bind_reuseport(listen)?;
        threads.push(
            std::thread::Builder::new()
                .name(format!("reflector-{i}"))
                .spawn(move || {
                    // Heron's default (no pacing), so that the two compare
                    // on one path.
                    let coalesce = std::time::Duration::ZERO;
                    let segment = true;
                    heron_server::udp::run_loop(&socket, &STOP, coalesce, segment, reflect)
                })?,
        );
    }
    eprintln!(
        "reflector answering on {listen} with {} workers",
        workers.max(1)
    );
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reflect_sets_qr_and_copies() {
        let q = [
            0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1,
        ];
        let mut r = Vec::new();
        assert!(super::reflect(&q, &mut r));
        assert_eq!(r.len(), q.len());
        assert_eq!(r[2], 0x81);
        assert!(!super::reflect(&q[..5], &mut r));
    }
}
