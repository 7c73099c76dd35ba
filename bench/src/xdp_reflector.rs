//! The XDP floor: Heron's AF_XDP worker loop (the same program, sockets,
//! rings and header code as `heron_server::xdp`) with the DNS work
//! replaced by an echo of the query with QR set. What it costs per query
//! is what the AF_XDP path costs any server on this kernel and interface
//! before it does any DNS work: the bound on what Heron-XDP can save.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use heron_server::xdp::packet;
use heron_sys::xdp::{Attached, Interface, Mode, ServedAddresses, XskSocket};

static STOP: AtomicBool = AtomicBool::new(false);

/// Packets taken from the RX ring at a time, as Heron's XDP worker.
const BATCH: usize = 32;
/// How long an idle loop waits before looking at `STOP` again.
const SHUTDOWN_POLL_MS: i32 = 200;

/// Serves UDP to `port` on `interface` until SIGTERM or SIGINT, one
/// thread for every queue of the interface.
pub fn run(interface: &str, port: u16) -> io::Result<()> {
    heron_sys::process::set_on_termination(&STOP)?;
    let interface = Interface::find(interface)?;
    let attached = Attached::attach(&interface, &[port], Mode::Auto, ServedAddresses::all())?;
    let mut sockets = Vec::new();
    for queue in 0..interface.rx_queues {
        let socket = XskSocket::bind(interface.index, queue, true)?;
        attached.serve_queue(queue, &socket)?;
        sockets.push(socket);
    }
    eprintln!(
        "XDP reflector on {}@{port} ({} mode, {} queue(s))",
        interface.name,
        if attached.native { "native" } else { "generic" },
        sockets.len()
    );
    // The host's addresses as Heron's workers have them (read once here).
    let host = heron_sys::xdp::local::host_addresses()?;
    let broadcasts = host
        .iter()
        .flat_map(|a| a.broadcasts.iter().map(|&b| b.into()));
    let host = packet::HostAddresses::new(host.iter().map(|a| a.ip).chain(broadcasts));
    reflect_until_stopped(&mut sockets, &host);
    drop(attached);
    Ok(())
}

/// The worker's loop: take a batch from each socket, echo it, leave the
/// replies for the `poll()` that waits for the next queries to send.
fn reflect_until_stopped(sockets: &mut [XskSocket], host: &packet::HostAddresses) {
    let mut frames = Vec::with_capacity(BATCH);
    let mut echo = Vec::with_capacity(2048);
    while !STOP.load(Ordering::Relaxed) {
        let mut received = 0;
        for socket in sockets.iter_mut() {
            socket.recycle();
            received += socket.receive(&mut frames, BATCH);
            for frame in frames.drain(..) {
                // Echoed through a buffer, as Heron writes its answers.
                let written = packet::parse(socket.packet(&frame), host)
                    .ok()
                    .filter(|datagram| {
                        let query = &socket.packet(&frame)[datagram.payload.clone()];
                        crate::reflector::reflect(query, &mut echo)
                    })
                    .and_then(|datagram| {
                        packet::write_reply(socket.frame_mut(&frame), &datagram, &echo)
                    });
                match written {
                    Some(len) => {
                        socket.transmit(frame, len);
                    }
                    None => socket.release(frame),
                }
            }
            socket.submit();
        }
        if received == 0
            && let Err(e) = heron_sys::xdp::wait_any(sockets, SHUTDOWN_POLL_MS)
        {
            eprintln!("XDP wait failed: {e}");
        }
    }
    for socket in sockets {
        socket.flush();
    }
}
