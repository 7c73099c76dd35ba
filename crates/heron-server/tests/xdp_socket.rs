//! The AF_XDP socket and program of `heron_sys::xdp` on a veth pair
//! into a namespace: root only, skipped with the reason otherwise.

use heron_sys::xdp::{Attached, Interface, Mode, XskSocket};
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
        let attached = Attached::attach(&interface, &[5353], mode).unwrap();
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
