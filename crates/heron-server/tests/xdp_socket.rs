//! The AF_XDP socket and program of `heron_sys::xdp` on a veth pair
//! into a namespace: root only, skipped with the reason otherwise.

use heron_sys::xdp::{Attached, Interface, Mode, ServedAddresses, XskSocket};
use heron_testkit::netns::{VethNamespace, skip_without_xdp};

#[test]
fn a_socket_receives_udp_to_our_port_and_the_program_goes_with_the_link() {
    if skip_without_xdp() {
        return;
    }
    let veth = VethNamespace::new("s").unwrap();
    let interface = Interface::find(&veth.outside).unwrap();
    assert_eq!(interface.rx_queues, 1);
    for mode in [Mode::Native, Mode::Generic] {
        let attached = Attached::attach(&interface, &[5353], mode, ServedAddresses::all()).unwrap();
        assert_eq!(attached.native, mode == Mode::Native);
        assert!(veth.has_xdp());
        let mut socket = XskSocket::bind(interface.index, 0, true).unwrap();
        // veth has no zero-copy: the bind falls back to copy mode.
        assert!(!socket.is_zero_copy());
        attached.serve_queue(0, &socket).unwrap();
        let sent = veth.run(
            "dig",
            &[
                "@198.51.100.1",
                "-p",
                "5353",
                "+tries=1",
                "+time=1",
                "heron.example.",
            ],
        );
        assert!(!sent.status.success(), "nobody answers");
        let mut frames = Vec::new();
        let mut got = 0;
        while got == 0 && socket.wait(100).unwrap() {
            socket.recycle();
            got = socket.receive(&mut frames, 64);
        }
        assert!(got >= 1, "{mode:?}: the query reached the socket");
        assert_eq!(socket.statistics().unwrap().rx_dropped, 0);
        let packet = socket.packet(&frames[0]);
        assert_eq!(&packet[12..14], &[0x08, 0x00], "IPv4");
        assert_eq!(&packet[36..38], &5353u16.to_be_bytes());
        let question = b"\x05heron\x07example\x00";
        assert!(packet.windows(question.len()).any(|w| w == question));
        for frame in frames.drain(..) {
            socket.release(frame);
        }
        drop(socket);
        drop(attached);
        assert!(!veth.has_xdp(), "{mode:?}: detached with its link");
    }
}

/// Replies queued with `submit` go out with the next wait or pause (its
/// `poll()` sends them), without a `sendto()` of their own while fewer
/// than the kernel's copy-mode send budget are queued; a full budget is
/// sent at once. Checked at 1, just under, at and past the budget: every
/// query gets its reply.
#[test]
fn submitted_replies_go_out_with_the_next_wait_or_at_a_full_budget() {
    use heron_server::xdp::packet;
    use heron_sys::xdp::socket::COPY_TX_BUDGET;
    if skip_without_xdp() {
        return;
    }
    let veth = VethNamespace::new("t").unwrap();
    let interface = Interface::find(&veth.outside).unwrap();
    let attached =
        Attached::attach(&interface, &[5354], Mode::Native, ServedAddresses::all()).unwrap();
    let mut socket = XskSocket::bind(interface.index, 0, true).unwrap();
    attached.serve_queue(0, &socket).unwrap();
    let budget = COPY_TX_BUDGET as usize;
    for (count, queued_after_submit, pause) in [
        (1, 1, false),
        (budget - 1, budget - 1, true),
        (budget, 0, false),
        (budget + 8, 8, true),
    ] {
        let replies = std::thread::scope(|s| {
            let client = s.spawn(|| veth.within(|| ask_and_collect(count)));
            let mut frames = Vec::new();
            while frames.len() < count && socket.wait(2000).unwrap() {
                socket.recycle();
                socket.receive(&mut frames, 64);
            }
            assert_eq!(frames.len(), count, "every query reached the socket");
            for frame in frames.drain(..) {
                let host = packet::HostAddresses::default();
                let query = packet::parse(socket.packet(&frame), &host).unwrap();
                let mut answer = socket.packet(&frame)[query.payload.clone()].to_vec();
                answer[2] |= 0x80; // QR: a response
                let len = packet::write_reply(socket.frame_mut(&frame), &query, &answer).unwrap();
                assert!(socket.transmit(frame, len));
            }
            socket.submit();
            assert_eq!(socket.tx_queued() as usize, queued_after_submit, "{count}");
            match pause {
                true => heron_sys::xdp::pause(
                    std::slice::from_ref(&socket),
                    std::time::Duration::from_millis(1),
                )
                .unwrap(),
                false => {
                    socket.wait(0).unwrap();
                }
            }
            assert_eq!(socket.tx_queued(), 0, "{count}: the wait sent the rest");
            client.join().unwrap()
        });
        assert_eq!(replies, count, "{count} replies reached the client");
    }
}

/// Sends `count` DNS queries (IDs 0..count) from a fresh socket to the
/// server's address on the pair, port 5354; returns how many replies
/// with one of those IDs and QR set came back within 2 s of each other.
fn ask_and_collect(count: usize) -> usize {
    let client = std::net::UdpSocket::bind("198.51.100.2:0").unwrap();
    client
        .set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    let mut query = *b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05heron\x07example\x00\x00\x01\x00\x01";
    for id in 0..count as u16 {
        query[..2].copy_from_slice(&id.to_be_bytes());
        client.send_to(&query, "198.51.100.1:5354").unwrap();
    }
    let mut seen = vec![false; count];
    let mut buf = [0u8; 512];
    while let Ok(n) = client.recv(&mut buf) {
        let id = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
        if n == query.len() && buf[2] & 0x80 != 0 && id < count {
            seen[id] = true;
        }
        if seen.iter().all(|&s| s) {
            break;
        }
    }
    seen.iter().filter(|&&s| s).count()
}
