use super::*;

/// An idle connection costs its task, and the task is as large as
/// its largest state: a transfer's or TLS's state inline would make
/// every connection pay for it (it was 4,416 bytes before they were
/// moved out).
#[tokio::test]
async fn a_plain_connection_task_stays_small() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, peer) = listener.accept().await.unwrap();
    let primary = heron_xfr::primary::Primary::new(HashMap::new(), 0);
    let processor = crate::processor::Processor::new(
        crate::SharedCatalog::default(),
        Default::default(),
        Arc::new(primary),
        Arc::default(),
    );
    let shared = Arc::new(Shared {
        service: Arc::new(Service::new(processor, None)),
        idle: Duration::from_secs(1),
        message_timeout: Duration::from_secs(1),
        nodelay_inherited: true,
    });
    let (_tx, shutdown) = watch::channel(false);
    let limiter = ConnectionLimiter::new(TcpLimits::default(), Vec::new());
    let slot = limiter.admit(peer.ip()).unwrap();
    let task = plain_task(stream, peer, shared, shutdown, slot);
    let size = std::mem::size_of_val(&task);
    assert!(size <= 1024, "a plain connection's task is {size} bytes");
}

#[test]
fn limiter_counts_total_and_per_client() {
    let limits = TcpLimits {
        max_connections: 3,
        max_connections_per_client: 2,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(limits, Vec::new());
    let a: IpAddr = "127.0.0.1".parse().unwrap();
    let b: IpAddr = "127.0.0.2".parse().unwrap();
    let a1 = limiter.admit(a).unwrap();
    let _a2 = limiter.admit(a).unwrap();
    assert!(limiter.admit(a).is_none(), "per-client limit");
    let _b1 = limiter.admit(b).unwrap();
    assert!(limiter.admit(b).is_none(), "total limit");
    drop(a1);
    assert_eq!(limiter.open_connections(), 2);
    assert!(limiter.admit(b).is_some(), "slot freed on drop");
}

#[test]
fn ipv6_clients_are_counted_per_prefix() {
    let limits = TcpLimits {
        max_connections_per_client: 2,
        ..TcpLimits::default()
    };
    assert_eq!(limits.ipv6_client_prefix, 56);
    let limiter = ConnectionLimiter::new(limits, Vec::new());
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let _a = limiter.admit(ip("2001:db8:0:1::1")).unwrap();
    let _b = limiter.admit(ip("2001:db8:0:ff:abcd::9")).unwrap();
    assert!(
        limiter.admit(ip("2001:db8:0:42::7")).is_none(),
        "one /56 shares one count"
    );
    assert!(
        limiter.admit(ip("2001:db8:0:100::1")).is_some(),
        "the next /56 has its own"
    );
    // IPv4 is counted per address unless configured otherwise.
    let _c = limiter.admit(ip("192.0.2.1")).unwrap();
    let _d = limiter.admit(ip("192.0.2.1")).unwrap();
    assert!(limiter.admit(ip("192.0.2.1")).is_none());
    assert!(limiter.admit(ip("192.0.2.2")).is_some());
}

#[test]
fn client_prefixes_are_configurable() {
    let limits = TcpLimits {
        max_connections_per_client: 1,
        ipv4_client_prefix: 24,
        ipv6_client_prefix: 128,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(limits, Vec::new());
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let _a = limiter.admit(ip("192.0.2.1")).unwrap();
    assert!(limiter.admit(ip("192.0.2.200")).is_none(), "one /24");
    assert!(limiter.admit(ip("192.0.3.1")).is_some());
    let _b = limiter.admit(ip("2001:db8::1")).unwrap();
    assert!(limiter.admit(ip("2001:db8::2")).is_some(), "per /128");
    let everyone = TcpLimits {
        max_connections_per_client: 1,
        ipv4_client_prefix: 0,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(everyone, Vec::new());
    let _c = limiter.admit(ip("10.0.0.1")).unwrap();
    assert!(limiter.admit(ip("203.0.113.9")).is_none(), "/0: one client");
}

#[test]
fn memory_is_released_once_after_a_peak_has_passed() {
    let limiter = ConnectionLimiter::new(
        TcpLimits {
            max_connections_per_client: usize::MAX,
            ..TcpLimits::default()
        },
        Vec::new(),
    );
    let ip: IpAddr = "192.0.2.1".parse().unwrap();
    let t0 = Instant::now();
    let mut slots: Vec<Slot> = (0..RELEASE_AFTER_PEAK - 1)
        .map(|_| limiter.admit(ip).unwrap())
        .collect();
    slots.truncate(0);
    assert!(!limiter.release_due(t0), "below a peak worth a release");
    slots = (0..RELEASE_AFTER_PEAK * 4)
        .map(|_| limiter.admit(ip).unwrap())
        .collect();
    slots.truncate(RELEASE_AFTER_PEAK + 1);
    assert!(
        !limiter.release_due(t0),
        "still above a quarter of the peak"
    );
    slots.truncate(RELEASE_AFTER_PEAK);
    assert!(limiter.release_due(t0), "at a quarter of the peak");
    assert!(!limiter.release_due(t0), "once per peak");
    // Another peak soon after: released only once the interval passed.
    slots.extend((0..RELEASE_AFTER_PEAK * 3).map(|_| limiter.admit(ip).unwrap()));
    slots.clear();
    assert!(!limiter.release_due(t0 + RELEASE_AT_MOST_EVERY / 2));
    assert!(limiter.release_due(t0 + RELEASE_AT_MOST_EVERY));
    assert_eq!(limiter.open_connections(), 0);
}

#[test]
fn a_message_deadline_is_kept_while_the_message_grows() {
    let (idle, message) = (Duration::from_secs(10), Duration::from_secs(5));
    let timeouts = (idle, message);
    let opened = Instant::now();
    let mut partial = Unanswered::new(opened, idle);
    assert_eq!(partial.deadline(), opened + idle, "between messages: idle");
    let now = opened + Duration::from_secs(1);
    partial.bytes = vec![0, 40, 1];
    partial.restart_deadline(false, timeouts, now);
    assert!(partial.in_message());
    let first = partial.deadline();
    assert_eq!(first, now + message);
    partial.bytes.push(2);
    partial.restart_deadline(false, timeouts, now + Duration::from_secs(1));
    assert_eq!(partial.deadline(), first, "more bytes do not extend it");
    partial.restart_deadline(true, timeouts, now + Duration::from_secs(2));
    assert!(partial.deadline() > first, "a new message, a new deadline");
    partial.bytes.clear();
    partial.restart_deadline(true, timeouts, now + Duration::from_secs(3));
    assert!(!partial.in_message());
    let idle_from = now + Duration::from_secs(3) + idle;
    assert_eq!(partial.deadline(), idle_from, "between messages: idle");
}

/// Only progress moves the idle timeout: a wake that took no byte of a
/// message leaves it where it was. TLS bytes that made no plaintext are
/// a message begun, under the message timeout, until plaintext ends it.
#[test]
fn only_progress_moves_the_idle_timeout() {
    let (idle, message) = (Duration::from_secs(10), Duration::from_secs(5));
    let opened = Instant::now();
    let mut partial = Unanswered::new(opened, idle);
    let answers_taken = opened + Duration::from_secs(1);
    partial.touch(answers_taken, idle);
    assert_eq!(partial.deadline(), answers_taken + idle);
    let sealed_at = opened + Duration::from_secs(2);
    partial.sealed_bytes(sealed_at, message);
    partial.sealed_bytes(sealed_at + Duration::from_secs(1), message);
    partial.touch(sealed_at + Duration::from_secs(2), idle);
    assert_eq!(
        partial.deadline(),
        sealed_at + message,
        "a message is under way"
    );
    let answered = opened + Duration::from_secs(4);
    partial.restart_deadline(true, (idle, message), answered);
    assert_eq!(partial.deadline(), answered + idle);
}

/// Both ends of a loopback connection: the client's (blocking) and
/// the server's.
async fn connected_pair() -> (std::net::TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

/// Whether tokio still takes `stream` for readable (a read would be
/// tried without waiting for epoll).
fn marked_readable(stream: &TcpStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    stream.poll_read_ready(&mut cx).is_ready()
}

async fn readable_within_5_s(stream: &TcpStream) {
    let ready = timeout(Duration::from_secs(5), stream.readable()).await;
    ready.expect("woken for the bytes sent").unwrap();
}

#[tokio::test]
async fn a_read_that_empties_the_socket_waits_for_epoll_and_misses_nothing() {
    use std::io::Write;
    let (mut client, server) = connected_pair().await;
    let mut chunk = [0u8; READ_CHUNK];
    client.write_all(&[7; 100]).unwrap();
    readable_within_5_s(&server).await;
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(100));
    assert!(
        !marked_readable(&server),
        "no read that could only return WouldBlock"
    );
    client.write_all(&[8; 30]).unwrap();
    readable_within_5_s(&server).await;
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(30));
    drop(client);
    readable_within_5_s(&server).await;
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(0));
}

#[tokio::test]
async fn a_read_that_fills_the_chunk_reads_again_before_waiting() {
    use std::io::Write;
    let (mut client, server) = connected_pair().await;
    let mut chunk = [0u8; 32];
    client.write_all(&[1; 48]).unwrap();
    readable_within_5_s(&server).await;
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(32));
    assert!(marked_readable(&server), "more may be queued");
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(16));
    // Exactly a chunk: the read after it finds nothing and clears.
    client.write_all(&[2; 32]).unwrap();
    readable_within_5_s(&server).await;
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(32));
    assert_eq!(read_available(&server, &mut chunk).unwrap(), None);
    assert!(!marked_readable(&server));
}

/// Answers are never held back by Nagle's algorithm: sockets accepted
/// from a listener given `TCP_NODELAY` have it without a call of
/// their own.
#[tokio::test]
async fn accepted_sockets_have_nodelay_from_their_listener() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
    assert!(nodelay_for_accepted(&listener));
    let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    assert!(stream.nodelay().unwrap());
}

/// Every read on a thread lands in one buffer, whatever the
/// connection (none is zeroed or allocated per read), and a short
/// read after a longer one shows only what it read.
#[tokio::test]
async fn reads_share_the_threads_buffer_and_see_only_their_bytes() {
    use std::io::Write;
    let (mut a, server_a) = connected_pair().await;
    let (mut b, server_b) = connected_pair().await;
    a.write_all(&[1; 300]).unwrap();
    b.write_all(&[2; 10]).unwrap();
    readable_within_5_s(&server_a).await;
    readable_within_5_s(&server_b).await;
    let read = |stream: &TcpStream| {
        with_read_buffer(|chunk| {
            let n = read_available(stream, chunk).unwrap().unwrap();
            (chunk.as_ptr(), chunk[..n].to_vec())
        })
    };
    let (first, long) = read(&server_a);
    let (second, short) = read(&server_b);
    assert_eq!((long, short), (vec![1; 300], vec![2; 10]));
    assert_eq!(first, second, "one buffer for both connections");
}

#[tokio::test]
async fn a_wait_ends_at_its_deadline_wherever_the_timer_was() {
    let (_client, server) = connected_pair().await;
    let stop = std::future::pending::<()>();
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(stop, timer);
    // A new socket may be taken for readable before a read says not.
    assert_eq!(read_available(&server, &mut [0u8; 8]).unwrap(), None);
    // Armed later than the deadline: moved to it.
    let deadline = Instant::now() + Duration::from_millis(50);
    let ready = wait_readable(&server, deadline, timer.as_mut(), stop.as_mut()).await;
    assert!(!ready.unwrap(), "nothing came: timed out");
    assert!(Instant::now() >= deadline);
    // Armed earlier than the deadline (it moved on since): the timer
    // fires first and is armed again, the wait goes on to the deadline.
    timer
        .as_mut()
        .reset(tokio::time::Instant::now() + Duration::from_millis(20));
    let deadline = Instant::now() + Duration::from_millis(150);
    let ready = wait_readable(&server, deadline, timer.as_mut(), stop.as_mut()).await;
    assert!(!ready.unwrap());
    assert!(Instant::now() >= deadline, "not ended when the timer fired");
}

#[tokio::test]
async fn a_wait_ends_when_bytes_come_or_on_shutdown() {
    use std::io::Write;
    let (mut client, server) = connected_pair().await;
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let stop = stop_rx.changed();
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(stop, timer);
    let far = Instant::now() + Duration::from_secs(3600);
    client.write_all(&[0, 1]).unwrap();
    let ready = wait_readable(&server, far, timer.as_mut(), stop.as_mut()).await;
    assert!(ready.unwrap(), "readable");
    let mut chunk = [0u8; 8];
    assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(2));
    stop_tx.send(true).unwrap();
    let ready = wait_readable(&server, far, timer.as_mut(), stop.as_mut()).await;
    assert!(!ready.unwrap(), "shut down");
}

#[test]
fn the_answers_buffer_is_reused_empty_once_written() {
    let mut written = Vec::with_capacity(4096);
    written.extend_from_slice(&[0, 3, 1, 2, 3]);
    give_back(written);
    let replies = Replies::new();
    assert!(replies.framed.is_empty(), "nothing of the last answers");
    assert!(replies.framed.capacity() >= 4096, "no new allocation");
    assert_eq!(
        Replies::new().framed.capacity(),
        0,
        "one connection at a time holds it"
    );
}

#[test]
fn secondaries_are_held_to_the_total_limit_only() {
    let limits = TcpLimits {
        max_connections: 4,
        max_connections_per_client: 1,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(limits, vec!["192.0.2.0/24".parse().unwrap()]);
    let secondary: IpAddr = "192.0.2.7".parse().unwrap();
    let other: IpAddr = "198.51.100.1".parse().unwrap();
    let slots: Vec<Slot> = (0..3).filter_map(|_| limiter.admit(secondary)).collect();
    assert_eq!(slots.len(), 3, "past the per-client limit");
    let _o = limiter.admit(other).unwrap();
    assert!(
        limiter.admit(other).is_none(),
        "others keep the per-client limit"
    );
    assert!(
        limiter.admit(secondary).is_none(),
        "the total limit holds for all"
    );
}

#[test]
fn secondaries_set_anew_are_exempt_from_then_on() {
    let limits = TcpLimits {
        max_connections_per_client: 1,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(limits, vec!["192.0.2.7".parse().unwrap()]);
    let (old, new): (IpAddr, IpAddr) = ("192.0.2.7".parse().unwrap(), "192.0.2.8".parse().unwrap());
    limiter.set_unlimited(vec!["192.0.2.8".parse().unwrap()]);
    let _held = (limiter.admit(old).unwrap(), limiter.admit(new).unwrap());
    assert!(limiter.admit(old).is_none(), "no longer exempt");
    assert!(limiter.admit(new).is_some(), "exempt now");
}

/// An exempt secondary's connections are not counted in its network's
/// tally: its neighbours keep their own (black-box finding AZ-5: a
/// secondary holding connections shut its /24 out).
#[test]
fn an_exempt_address_takes_nothing_of_its_networks_quota() {
    let limits = TcpLimits {
        max_connections_per_client: 2,
        ipv4_client_prefix: 24,
        ..TcpLimits::default()
    };
    let limiter = ConnectionLimiter::new(limits, vec!["192.0.2.9".parse().unwrap()]);
    let (secondary, neighbour): (IpAddr, IpAddr) =
        ("192.0.2.9".parse().unwrap(), "192.0.2.10".parse().unwrap());
    let held: Vec<Slot> = (0..5).map(|_| limiter.admit(secondary).unwrap()).collect();
    let neighbours = (
        limiter.admit(neighbour).unwrap(),
        limiter.admit(neighbour).unwrap(),
    );
    assert!(limiter.admit(neighbour).is_none(), "the network's own two");
    // Its exemption taken away, the secondary counts what it holds.
    limiter.set_unlimited(Vec::new());
    assert!(limiter.admit(secondary).is_none(), "five held, two allowed");
    drop(held);
    drop(neighbours);
    assert_eq!(limiter.open_connections(), 0);
    assert!(limiter.admit(neighbour).is_some());
    assert!(limiter.admit(secondary).is_some());
}

/// A write waits for the client `limit` from its last read, not in all:
/// a reader that takes 64 KB every 100 ms gets a megabyte though that
/// lasts many times the limit.
#[tokio::test]
async fn a_slow_but_steady_reader_is_written_all_it_asked_for() {
    use std::io::Read;
    let (mut client, mut server) = connected_pair().await;
    SockRef::from(&server).set_send_buffer_size(4096).unwrap();
    let reader = std::thread::spawn(move || {
        let mut taken = 0;
        let mut chunk = vec![0; 64 * 1024];
        while taken < 1 << 20 {
            std::thread::sleep(Duration::from_millis(100));
            taken += client.read(&mut chunk).unwrap();
        }
        taken
    });
    let limit = Duration::from_millis(300);
    write_all(&mut server, &vec![7; 1 << 20], limit)
        .await
        .unwrap();
    assert_eq!(reader.join().unwrap(), 1 << 20);
}
