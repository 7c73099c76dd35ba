//! Connection limits, accept back-off and memory handed back after a
//! peak of connections.

use super::*;

use arc_swap::ArcSwap;

/// Counts open connections in total and per client, a client being an
/// address cut to its configured prefix (`ipv4-client-prefix`,
/// `ipv6-client-prefix`: one host with a /64 is one client).
pub struct ConnectionLimiter {
    pub(super) limits: TcpLimits,
    /// Addresses the per-client limit does not apply to: the secondaries
    /// of some zone (NSD's opens up to 128 transfer connections at once),
    /// replaced when a reload changes them ([`ConnectionLimiter::set_unlimited`]).
    pub(super) unlimited: ArcSwap<Vec<Prefix>>,
    pub(super) open: Mutex<Open>,
}

/// The counts behind a [`ConnectionLimiter`].
#[derive(Default)]
pub(super) struct Open {
    pub(super) total: usize,
    pub(super) per_client: HashMap<IpAddr, usize>,
    /// Connections open from each address exempt from the per-client
    /// limit when they opened: not in their network's tally, but its own
    /// once a reload takes the exemption away.
    pub(super) exempt: HashMap<IpAddr, usize>,
    /// The most open at once since memory was last released.
    pub(super) peak: usize,
    pub(super) released_at: Option<Instant>,
}

impl Open {
    /// The map and key `counted` is tallied under.
    fn tally(&mut self, counted: &Counted) -> (&mut HashMap<IpAddr, usize>, IpAddr) {
        match *counted {
            Counted::Network(client) => (&mut self.per_client, client),
            Counted::Exempt(ip) => (&mut self.exempt, ip),
        }
    }
}

/// Connections at a peak worth releasing memory after: thousands of slow
/// clients each left up to 64 KiB of freed buffers in the allocator,
/// which glibc keeps resident (560 MB after 10,000 closed, issue 24).
pub const RELEASE_AFTER_PEAK: usize = 512;
/// Memory is released once the open connections fall to this share of
/// the peak (a quarter)...
pub(super) const RELEASE_BELOW_PEAK_DIVISOR: usize = 4;
/// ...and at most this often: a trim walks the whole heap under the
/// allocator's locks.
pub const RELEASE_AT_MOST_EVERY: Duration = Duration::from_secs(5);
/// How often the count is looked at for a release.
pub(super) const RELEASE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// An admitted connection; dropping it frees its slot.
pub struct Slot {
    pub(super) limiter: Arc<ConnectionLimiter>,
    /// Where it is counted: its client's network, or for an address the
    /// per-client limit does not apply to, that address alone, not its
    /// network (black-box finding AZ-5: a secondary's transfer
    /// connections shut its neighbours out).
    pub(super) counted: Counted,
}

/// The tally a [`Slot`] is in.
pub(super) enum Counted {
    Network(IpAddr),
    Exempt(IpAddr),
}

impl ConnectionLimiter {
    pub fn new(limits: TcpLimits, unlimited: Vec<Prefix>) -> Arc<ConnectionLimiter> {
        Arc::new(ConnectionLimiter {
            limits,
            unlimited: ArcSwap::from_pointee(unlimited),
            open: Mutex::new(Open::default()),
        })
    }

    /// The addresses the per-client limit no longer applies to from now
    /// on (the secondaries of the configuration read again); connections
    /// open stay open.
    pub fn set_unlimited(&self, unlimited: Vec<Prefix>) {
        self.unlimited.store(Arc::new(unlimited));
    }

    /// A slot for a new connection from `ip`, or None if a limit is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        self.admit_or_why(ip).ok()
    }

    /// A slot for a new connection from `ip`, or the limit reached.
    pub fn admit_or_why(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Limit> {
        self.admit_within(ip, self.limits.max_connections)
    }

    /// [`ConnectionLimiter::admit_or_why`] past the total limit by at most
    /// `lent` connections: for a newcomer at the limit whose room another
    /// event loop is asked to make by closing an idle connection.
    pub(super) fn admit_lent(self: &Arc<Self>, ip: IpAddr, lent: usize) -> Result<Slot, Limit> {
        self.admit_within(ip, self.limits.max_connections.saturating_add(lent))
    }

    fn admit_within(self: &Arc<Self>, ip: IpAddr, max_connections: usize) -> Result<Slot, Limit> {
        let client = self.client(ip);
        let mut open = self.open.lock().unwrap();
        // The client's own limit first: a loop makes room at the total
        // limit by closing an idle connection, never for a client that
        // would be refused anyway.
        let exempt = self.unlimited.load().iter().any(|p| p.contains(ip));
        // An address no longer exempt counts what it opened while it was.
        let own = open.exempt.get(&ip).copied().unwrap_or(0);
        let per_client = open.per_client.get(&client).copied().unwrap_or(0) + own;
        if per_client >= self.limits.max_connections_per_client && !exempt {
            return Err(Limit::PerClient);
        }
        if open.total >= max_connections {
            return Err(Limit::Total);
        }
        let counted = match exempt {
            true => Counted::Exempt(ip),
            false => Counted::Network(client),
        };
        let (tally, key) = open.tally(&counted);
        *tally.entry(key).or_insert(0) += 1;
        open.total += 1;
        open.peak = open.peak.max(open.total);
        Ok(Slot {
            limiter: self.clone(),
            counted,
        })
    }

    /// Who `ip` counts as for the per-client limit: its network of the
    /// configured prefix length (one host may well hold a whole IPv6 /64).
    pub(super) fn client(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - self.limits.ipv4_client_prefix.min(32) as u32);
                IpAddr::V4(Ipv4Addr::from_bits(a.to_bits() & mask.unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                let mask =
                    u128::MAX.checked_shl(128 - self.limits.ipv6_client_prefix.min(128) as u32);
                IpAddr::V6(Ipv6Addr::from_bits(a.to_bits() & mask.unwrap_or(0)))
            }
        }
    }

    pub fn open_connections(&self) -> usize {
        self.open.lock().unwrap().total
    }

    /// Whether freed memory should go back to the kernel `now`: after a
    /// peak of at least [`RELEASE_AFTER_PEAK`] connections the count has
    /// fallen to a quarter of it, and no release was made in the last
    /// [`RELEASE_AT_MOST_EVERY`]. A yes starts the next peak from here.
    pub fn release_due(&self, now: Instant) -> bool {
        let mut open = self.open.lock().unwrap();
        let due = open.peak >= RELEASE_AFTER_PEAK
            && open.total <= open.peak / RELEASE_BELOW_PEAK_DIVISOR
            && open
                .released_at
                .is_none_or(|at| now.saturating_duration_since(at) >= RELEASE_AT_MOST_EVERY);
        if due {
            open.peak = open.total;
            open.released_at = Some(now);
        }
        due
    }
}

/// Lines of connections refused at a limit, per reason per interval
/// ([`crate::processor::log_limit::LOG_INTERVAL`]).
static REFUSED_LOG: std::sync::LazyLock<crate::processor::log_limit::LogLimiter<2>> =
    std::sync::LazyLock::new(|| {
        crate::processor::log_limit::LogLimiter::new(crate::processor::log_limit::LOG_INTERVAL)
    });

/// Says that a connection from `peer` was refused at `limit`: one line
/// per limit per interval, counting those left out (black-box finding
/// CC-4: honest clients turned away left no line, only a counter).
pub(super) fn log_refused(peer: SocketAddr, limit: Limit) {
    let (reason, what) = match limit {
        Limit::Total => (0, "max-connections"),
        Limit::PerClient => (1, "max-connections-per-client"),
        Limit::Blackhole => return, // closed unanswered, as configured
    };
    let Some(due) = REFUSED_LOG.admit(reason, heron_proto::time::unix_now()) else {
        return;
    };
    let more = match due.suppressed {
        0 => String::new(),
        n => format!(" ({n} more refused so in the last {} s)", due.since),
    };
    tracing::warn!("TCP connection from {peer} refused: [tcp] {what} reached{more}");
}

/// Says how many connections were refused at each limit, not one by one,
/// in an interval that ended with no refusal since: those were said only
/// with the next refusal, maybe long after, or never (black-box finding
/// DF-5). Called every interval, as the processor's refusals are.
pub fn log_refused_left_over(now: u64) {
    for (reason, due) in REFUSED_LOG.left_over(now) {
        let what = ["max-connections", "max-connections-per-client"][reason];
        tracing::warn!(
            "{} more TCP connections refused ([tcp] {what} reached) in the last {} s, not logged one by one",
            due.suppressed,
            due.since
        );
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap();
        open.total -= 1;
        let (tally, key) = open.tally(&self.counted);
        if let Some(n) = tally.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                tally.remove(&key);
            }
        }
    }
}

/// Hands the heap that closed connections freed back to the kernel once
/// a peak of connections has passed ([`ConnectionLimiter::release_due`]),
/// until `shutdown` turns true. The trim runs off the runtime's threads.
pub async fn release_memory_after_peaks(
    limiter: Arc<ConnectionLimiter>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(RELEASE_CHECK_EVERY);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        if limiter.release_due(Instant::now()) {
            let started = Instant::now();
            let _ = tokio::task::spawn_blocking(heron_sys::memory::release_free_heap).await;
            tracing::debug!(
                "TCP connections fell after a peak: freed heap returned in {} ms",
                started.elapsed().as_millis()
            );
        }
    }
}

/// Pause after a failed accept: the connection stays queued, so accepting
/// again at once would fail again at once.
pub(super) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one warning about failing accepts this often: out of file
/// descriptors, a listener fails twenty times a second.
pub(super) const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// Failed accepts, told in the log at most every [`ACCEPT_WARN_EVERY`].
#[derive(Default)]
pub struct AcceptFailures {
    pub(super) last_warning: Option<Instant>,
    pub(super) since_warning: u64,
}

impl AcceptFailures {
    pub(super) fn failed(&mut self, e: &io::Error) {
        self.since_warning += 1;
        if self
            .last_warning
            .is_some_and(|at| at.elapsed() < ACCEPT_WARN_EVERY)
        {
            return;
        }
        let advice = if e.raw_os_error() == Some(libc::EMFILE)
            || e.raw_os_error() == Some(libc::ENFILE)
        {
            "; connections already open are still served and new ones wait; raise the open-files limit (see `heron doctor`)"
        } else {
            ""
        };
        tracing::warn!(
            "TCP accept failed: {e} ({} time(s) since the last such warning){advice}",
            self.since_warning
        );
        self.last_warning = Some(Instant::now());
        self.since_warning = 0;
    }
}

/// The next connection on `listener`, or None once `shutdown` turns
/// true. A failed accept (out of file descriptors and the like) is told
/// to `failures` and retried after a pause rather than at once:
/// connections already open keep working, and new ones wait in the
/// backlog until descriptors free.
pub async fn next_connection(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    failures: &mut AcceptFailures,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return None,
        };
        match accepted {
            Ok(got) => return Some(got),
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Out of descriptors, a listener fails its accepts twenty times a
    /// second: one warning, then the failures counted until the next one
    /// is due.
    #[test]
    fn failed_accepts_are_warned_about_once_an_interval_and_counted() {
        let mut failures = AcceptFailures::default();
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        failures.failed(&emfile);
        assert_eq!(failures.since_warning, 0, "the first is said at once");
        let said = failures.last_warning.expect("said");
        for _ in 0..20 {
            failures.failed(&emfile);
        }
        assert_eq!(
            (failures.since_warning, failures.last_warning),
            (20, Some(said))
        );
        failures.last_warning = said.checked_sub(ACCEPT_WARN_EVERY);
        failures.failed(&emfile);
        assert_eq!(
            failures.since_warning, 0,
            "due again: said, with the 21 counted"
        );
    }
}
