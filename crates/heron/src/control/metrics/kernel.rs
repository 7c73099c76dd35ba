//! The kernel's own counters of what it dropped before Heron saw it, read
//! at scrape time: a full socket buffer, a full listen queue. They count
//! for the whole network namespace, not only Heron's sockets.

/// One counter: its metric name, help, and where the kernel keeps it.
#[derive(Debug)]
pub struct KernelCounter {
    pub metric: &'static str,
    pub help: &'static str,
    /// The IP version it is counted for, as labelled.
    pub ip: &'static str,
    pub file: &'static str,
    /// The table's prefix in `file` (`Udp`, `TcpExt`), or "" for
    /// `/proc/net/snmp6`'s one name per line.
    pub table: &'static str,
    pub field: &'static str,
}

const fn counter(
    metric: &'static str,
    help: &'static str,
    ip: &'static str,
    (file, table, field): (&'static str, &'static str, &'static str),
) -> KernelCounter {
    KernelCounter {
        metric,
        help,
        ip,
        file,
        table,
        field,
    }
}

const RCVBUF: &str = "heron_kernel_udp_receive_buffer_errors";
const RCVBUF_HELP: &str = "UDP datagrams the kernel dropped because a socket's receive buffer was full (RcvbufErrors), whole namespace";
const IN_ERRORS: &str = "heron_kernel_udp_in_errors";
const IN_ERRORS_HELP: &str =
    "UDP datagrams the kernel could not deliver (InErrors, includes RcvbufErrors), whole namespace";

/// What is read, in the order exported.
pub const COUNTERS: [KernelCounter; 7] = [
    counter(
        RCVBUF,
        RCVBUF_HELP,
        "4",
        ("/proc/net/snmp", "Udp", "RcvbufErrors"),
    ),
    counter(
        RCVBUF,
        RCVBUF_HELP,
        "6",
        ("/proc/net/snmp6", "", "Udp6RcvbufErrors"),
    ),
    counter(
        IN_ERRORS,
        IN_ERRORS_HELP,
        "4",
        ("/proc/net/snmp", "Udp", "InErrors"),
    ),
    counter(
        IN_ERRORS,
        IN_ERRORS_HELP,
        "6",
        ("/proc/net/snmp6", "", "Udp6InErrors"),
    ),
    counter(
        "heron_kernel_tcp_listen_overflows",
        "Connections dropped because a listen queue was full (ListenOverflows), whole namespace",
        "any",
        ("/proc/net/netstat", "TcpExt", "ListenOverflows"),
    ),
    counter(
        "heron_kernel_tcp_listen_drops",
        "Connections dropped at the listen stage for any reason (ListenDrops), whole namespace",
        "any",
        ("/proc/net/netstat", "TcpExt", "ListenDrops"),
    ),
    counter(
        "heron_kernel_tcp_syncookies_sent",
        "SYN cookies sent because a listen queue was full (SyncookiesSent), whole namespace",
        "any",
        ("/proc/net/netstat", "TcpExt", "SyncookiesSent"),
    ),
];

/// Each of [`COUNTERS`] with its value, None where the kernel has no such
/// counter (or the file cannot be read).
pub fn read() -> Vec<(&'static KernelCounter, Option<u64>)> {
    let mut files: Vec<(&str, Option<String>)> = Vec::new();
    COUNTERS
        .iter()
        .map(|c| {
            let text = match files.iter().find(|(f, _)| *f == c.file) {
                Some((_, text)) => text.clone(),
                None => {
                    let text = std::fs::read_to_string(c.file).ok();
                    files.push((c.file, text.clone()));
                    text
                }
            };
            (c, text.and_then(|t| field(&t, c.table, c.field)))
        })
        .collect()
}

/// `name` in `text`: in the table whose two lines begin `table:` (a line
/// of names, then a line of values), or with an empty `table` on a line
/// `name value` (`/proc/net/snmp6`).
pub fn field(text: &str, table: &str, name: &str) -> Option<u64> {
    if table.is_empty() {
        return text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(name)).then(|| words.next()?.parse().ok())?
        });
    }
    let prefix = format!("{table}:");
    let mut rows = text.lines().filter(|l| l.starts_with(&prefix));
    let (names, values) = (rows.next()?, rows.next()?);
    let at = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 2 64\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
        Udp: 10 1 7 12 5 0\n\
        UdpLite: InDatagrams NoPorts InErrors\nUdpLite: 0 0 99\n";

    #[test]
    fn fields_are_found_by_name_in_their_table() {
        assert_eq!(field(SNMP, "Udp", "RcvbufErrors"), Some(5));
        assert_eq!(field(SNMP, "Udp", "InErrors"), Some(7));
        assert_eq!(field(SNMP, "UdpLite", "InErrors"), Some(99));
        assert_eq!(field(SNMP, "Udp", "NoSuchField"), None);
        assert_eq!(field(SNMP, "Tcp", "InErrors"), None);
    }

    #[test]
    fn damaged_tables_give_none_not_a_panic() {
        assert_eq!(
            field("Udp: InErrors RcvbufErrors\n", "Udp", "InErrors"),
            None
        );
        assert_eq!(field("Udp: InErrors\nUdp: x\n", "Udp", "InErrors"), None);
        assert_eq!(field("Udp: A B\nUdp: 1\n", "Udp", "B"), None);
        assert_eq!(field("", "", "Udp6InErrors"), None);
    }

    #[test]
    fn snmp6_has_one_counter_per_line() {
        let text = "Udp6InDatagrams    \t12\nUdp6InErrors\t3\nUdp6RcvbufErrors 2\n";
        assert_eq!(field(text, "", "Udp6InErrors"), Some(3));
        assert_eq!(field(text, "", "Udp6RcvbufErrors"), Some(2));
    }

    #[test]
    fn this_kernel_has_the_counters() {
        let read = read();
        let names: Vec<&str> = read.iter().map(|(c, _)| c.field).collect();
        for (counter, value) in &read {
            assert!(value.is_some(), "{} missing from {names:?}", counter.field);
        }
    }
}
