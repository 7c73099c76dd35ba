//! The refresh loop of one secondary zone (RFC 1034 4.3.5, RFC 1996).
//!
//! At start the zone file kept from the last transfer, if any, is served
//! at once. Then: check the primaries' SOA when the refresh timer fires or
//! a NOTIFY arrives; transfer when their serial is newer (IXFR from the
//! version served, AXFR if that fails, logged); publish and keep the new
//! version on disk. Failures retry after a wait that doubles up to the
//! retry interval, with jitter, and not before a primary found down is
//! tried again ([`super::backoff`]); NOTIFYs arriving together make one
//! check. Past the expire interval with no successful check the zone
//! stops answering (SERVFAIL). The file's modification time records the last
//! successful check, so the timers survive a restart; when a newer serial
//! is seen it is dated one refresh interval back, so a restart before that
//! transfer completes checks again at once.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use heron_proto::Name;
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::backoff::retry_delay;
use super::client::{ClientError, Connections, Upstream};
use super::keeper::Keeper;
use super::receive::{Outcome, Request};
use crate::serial;

/// One zone this server is a secondary for.
#[derive(Clone, Debug, Hash)]
pub struct SecondaryZone {
    pub origin: Name,
    /// Tried in order.
    pub primaries: Vec<Upstream>,
    /// Where the received zone is kept.
    pub file: PathBuf,
}

/// Bounds on the SOA timers, whatever the primary's SOA says.
#[derive(Clone, Copy, Debug)]
pub struct TimerBounds {
    pub min_refresh: Duration,
    pub max_refresh: Duration,
    pub min_retry: Duration,
    pub max_retry: Duration,
    pub min_expire: Duration,
    pub max_expire: Duration,
}

impl Default for TimerBounds {
    fn default() -> Self {
        TimerBounds {
            min_refresh: Duration::from_secs(30),
            max_refresh: Duration::from_secs(86_400),
            min_retry: Duration::from_secs(5),
            max_retry: Duration::from_secs(3_600),
            // An SOA expire of minutes would turn a short outage of the
            // primary into SERVFAIL; one of years serves data long stale.
            min_expire: Duration::from_secs(3_600),
            max_expire: Duration::from_secs(31_536_000),
        }
    }
}

/// Where new versions go: the server's catalog and journal.
pub trait Publisher: Send + Sync + 'static {
    /// Serves `zone` from now on; `diffs` are the IXFR steps from the
    /// previous version, when it came by IXFR.
    fn publish(&self, zone: Arc<Zone>, diffs: Option<Vec<ZoneDiff>>);
    /// Stops answering for the zone (expired).
    fn expire(&self, origin: &Name);
}

/// What the refresh loops of every zone share.
pub struct Context {
    pub conns: Connections,
    pub publisher: Arc<dyn Publisher>,
    pub keeper: Keeper,
    pub bounds: TimerBounds,
}

/// Runs the refresh loop until `wake` closes, starting from `kept` (the
/// zone read from `zone.file`, if it could be). A message on `wake` (a
/// NOTIFY, from the address it carries) triggers an SOA check now; those
/// that arrive together, or during a check, make one check.
pub async fn run(
    zone: SecondaryZone,
    ctx: Arc<Context>,
    mut wake: mpsc::UnboundedReceiver<IpAddr>,
    kept: Option<Arc<Zone>>,
) {
    let mut state = State::start(&zone, &ctx, kept);
    loop {
        let now = Instant::now();
        if let Some(expire_at) = state.expire_at
            && now >= expire_at
            && state.current.is_some()
        {
            tracing::error!(
                zone = %zone.origin,
                "zone expired: no answer from any primary; answering SERVFAIL"
            );
            ctx.publisher.expire(&zone.origin);
            state.current = None;
        }
        let next = state.next_check;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            woke = wake.recv() => match woke {
                Some(from) => take_notifies(from, &mut wake, &ctx.conns),
                None => return,
            },
        }
        // Boxed: a check's state (the transfer in progress) is large, and
        // 100,000 idle loops should not each hold room for one.
        Box::pin(state.check(&zone, &ctx)).await;
    }
}

/// Takes every NOTIFY waiting, so that they make one check; whoever sent
/// them is up, so a primary there is no longer left alone.
fn take_notifies(first: IpAddr, wake: &mut mpsc::UnboundedReceiver<IpAddr>, conns: &Connections) {
    conns.health().heard_from(first);
    while let Ok(from) = wake.try_recv() {
        conns.health().heard_from(from);
    }
}

struct State {
    current: Option<Arc<Zone>>,
    next_check: Instant,
    expire_at: Option<Instant>,
    /// Checks failed in a row.
    failures: u32,
}

impl State {
    /// The kept copy, if any (read by the caller with the other zones at
    /// start), is served at once; timers resume from the file's
    /// modification time.
    fn start(zone: &SecondaryZone, ctx: &Context, kept: Option<Arc<Zone>>) -> State {
        let now = Instant::now();
        let mut state = State {
            current: None,
            next_check: now,
            expire_at: None,
            failures: 0,
        };
        let Some(kept) = kept else {
            return state;
        };
        let age = std::fs::metadata(&zone.file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .unwrap_or_default();
        let (refresh, _, expire) = timers(&kept, ctx.bounds);
        if age >= expire {
            tracing::warn!(
                "zone {}: kept copy is past its expire time; not served",
                zone.origin
            );
            return state;
        }
        tracing::info!(
            zone = %zone.origin,
            file = %zone.file.display(),
            serial = kept.serial(),
            "serving kept serial {}",
            kept.serial()
        );
        ctx.publisher.publish(kept.clone(), None);
        state.next_check = now + refresh.saturating_sub(age);
        state.expire_at = Some(now + expire - age);
        state.current = Some(kept);
        state
    }

    async fn check(&mut self, zone: &SecondaryZone, ctx: &Context) {
        // The soonest a primary left alone may be tried, if all are.
        let mut primaries_back: Option<Instant> = None;
        let mut all_left_alone = true;
        for up in &zone.primaries {
            match self.check_one(zone, up, ctx).await {
                Ok(()) => return self.succeeded(zone, ctx),
                Err(CheckError {
                    error: ClientError::PrimaryDown { until },
                    ..
                }) => {
                    // Not logged as a failure: 100,000 zones would say so.
                    tracing::debug!("zone {}: {} left alone for now", zone.origin, up.addr);
                    primaries_back = Some(primaries_back.map_or(until, |t| t.min(until)));
                }
                Err(e) => {
                    all_left_alone = false;
                    tracing::warn!("zone {}: refresh from {} failed: {e}", zone.origin, up.addr)
                }
            }
        }
        self.failures = self.failures.saturating_add(1);
        let retry = self
            .current
            .as_ref()
            .map_or(ctx.bounds.min_retry, |z| timers(z, ctx.bounds).1);
        let now = Instant::now();
        let back = primaries_back
            .filter(|_| all_left_alone)
            .map(|t| t.saturating_duration_since(now));
        self.next_check = now + retry_delay(self.failures, back, retry);
    }

    fn succeeded(&mut self, zone: &SecondaryZone, ctx: &Context) {
        let current = self.current.as_ref().expect("set by a successful check");
        let (refresh, _, expire) = timers(current, ctx.bounds);
        let now = Instant::now();
        self.failures = 0;
        self.next_check = now + refresh;
        self.expire_at = Some(now + expire);
        // The record of this successful check.
        ctx.keeper.date(&zone.file, SystemTime::now());
    }

    async fn check_one(
        &mut self,
        zone: &SecondaryZone,
        up: &Upstream,
        ctx: &Context,
    ) -> Result<(), CheckError> {
        let conns = &ctx.conns;
        // With nothing to serve yet there is nothing to compare: the AXFR
        // itself says which serial it brings.
        if let Some(have) = &self.current {
            let theirs = conns.soa_serial(up, &zone.origin).await?;
            if !serial::is_newer(theirs, have.serial()) {
                return Ok(());
            }
        }
        // Should we stop before this transfer completes, a restart must
        // not wait out the refresh interval to fetch it again.
        // (Its last check dated one refresh interval back.)
        if let Some(have) = &self.current {
            let refresh = timers(have, ctx.bounds).0;
            ctx.keeper.date(&zone.file, SystemTime::now() - refresh);
        }
        let started = std::time::Instant::now();
        let outcome = match &self.current {
            Some(have) => {
                let ixfr = Request::Ixfr { have: have.clone() };
                match conns.transfer(up, &zone.origin, ixfr).await {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        tracing::warn!(
                            "zone {}: IXFR from {} failed ({e}); trying AXFR",
                            zone.origin,
                            up.addr
                        );
                        axfr(zone, up, conns).await?
                    }
                }
            }
            None => axfr(zone, up, conns).await?,
        };
        let (new, diffs, kind) = match outcome {
            Outcome::UpToDate => return Ok(()),
            Outcome::Full(z) => (Arc::new(z), None, "AXFR"),
            Outcome::Incremental { zone: z, diffs } => (Arc::new(z), Some(diffs), "IXFR"),
        };
        tracing::info!(
            zone = %zone.origin,
            peer = %up.addr,
            serial = new.serial(),
            "zone transferred in: {kind} from {} to serial {} ({} records) in {} ms",
            up.addr,
            new.serial(),
            new.record_count(),
            started.elapsed().as_millis()
        );
        ctx.publisher.publish(new.clone(), diffs);
        ctx.keeper.write(&zone.file, new.clone());
        self.current = Some(new);
        Ok(())
    }
}

async fn axfr(
    zone: &SecondaryZone,
    up: &Upstream,
    conns: &Connections,
) -> Result<Outcome, CheckError> {
    conns
        .transfer(up, &zone.origin, Request::Axfr)
        .await
        .map_err(CheckError::during("AXFR: "))
}

/// Why checking one primary failed, and in which step (unnamed: the
/// first).
struct CheckError {
    step: &'static str,
    error: ClientError,
}

impl From<ClientError> for CheckError {
    fn from(error: ClientError) -> CheckError {
        CheckError { step: "", error }
    }
}

impl CheckError {
    fn during(step: &'static str) -> impl Fn(ClientError) -> CheckError {
        move |error| CheckError { step, error }
    }
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.step, self.error)
    }
}

/// (refresh, retry, expire) from the zone's SOA, within the bounds.
fn timers(zone: &Zone, bounds: TimerBounds) -> (Duration, Duration, Duration) {
    let rdata = zone.soa().first_rdata();
    let field = |i: usize| {
        let at = rdata.len() - 20 + 4 * i;
        Duration::from_secs(u32::from_be_bytes(rdata[at..at + 4].try_into().unwrap()) as u64)
    };
    let refresh = field(1).clamp(bounds.min_refresh, bounds.max_refresh);
    let retry = field(2).clamp(bounds.min_retry, bounds.max_retry);
    // Never before one refresh and one retry have had their chance.
    let expire = field(3)
        .clamp(bounds.min_expire, bounds.max_expire)
        .max(refresh + retry);
    (refresh, retry, expire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_zone::load_zone_str;

    /// A zone whose SOA says `refresh retry expire`.
    fn zone_with_timers(refresh_retry_expire: &str) -> Zone {
        let text =
            format!("$TTL 60\n@ SOA ns h 1 {refresh_retry_expire} 60\n@ NS ns\nns A 192.0.2.1\n");
        load_zone_str(&text, "t", &Name::parse("t.test").unwrap())
            .unwrap()
            .zone
    }

    #[test]
    fn timers_come_from_the_soa_within_bounds() {
        let z = zone_with_timers("7200 1 1209600");
        let (refresh, retry, expire) = timers(&z, TimerBounds::default());
        assert_eq!(refresh, Duration::from_secs(7200));
        assert_eq!(retry, Duration::from_secs(5), "raised to the minimum");
        assert_eq!(expire, Duration::from_secs(1_209_600));
    }

    #[test]
    fn expire_is_held_within_its_bounds() {
        let secs = Duration::from_secs;
        let bounds = TimerBounds {
            min_expire: secs(7_200),
            max_expire: secs(86_400),
            ..TimerBounds::default()
        };
        let expire =
            |soa_expire: u32| timers(&zone_with_timers(&format!("60 10 {soa_expire}")), bounds).2;
        assert_eq!(expire(7_199), secs(7_200), "raised to the minimum");
        assert_eq!(expire(7_200), secs(7_200));
        assert_eq!(expire(40_000), secs(40_000), "inside the bounds: the SOA's");
        assert_eq!(expire(86_400), secs(86_400));
        assert_eq!(expire(86_401), secs(86_400), "lowered to the maximum");
        // Whatever the bounds, a refresh and a retry come first.
        let short = TimerBounds {
            min_expire: secs(1),
            ..bounds
        };
        let (refresh, retry, expire) = timers(&zone_with_timers("3600 600 60"), short);
        assert_eq!(expire, refresh + retry);
    }

    /// Serves nothing; remembers the serials it was given.
    #[derive(Default)]
    pub(super) struct Recorder {
        pub(super) published: std::sync::Mutex<Vec<u32>>,
    }

    impl Publisher for Recorder {
        fn publish(&self, zone: Arc<Zone>, _: Option<Vec<ZoneDiff>>) {
            self.published.lock().unwrap().push(zone.serial());
        }
        fn expire(&self, _: &Name) {}
    }

    /// What a refresh loop needs, with the default bounds.
    pub(super) fn context(publisher: Arc<Recorder>) -> Arc<Context> {
        Arc::new(Context {
            conns: Connections::new(Arc::new(Vec::new()), 4, Duration::from_secs(10)),
            publisher,
            keeper: Keeper::start().unwrap(),
            bounds: TimerBounds::default(),
        })
    }

    /// t.test from `primaries`, kept in `file`.
    fn secondary(file: &std::path::Path, primaries: &[std::net::SocketAddr]) -> SecondaryZone {
        SecondaryZone {
            origin: Name::parse("t.test").unwrap(),
            primaries: primaries
                .iter()
                .map(|&addr| Upstream {
                    addr,
                    key: None,
                    tls: None,
                })
                .collect(),
            file: file.to_path_buf(),
        }
    }

    /// Dates `file` as if its last check were `ago` in the past.
    fn checked_ago(file: &std::path::Path, ago: Duration) {
        let f = std::fs::File::options()
            .append(true)
            .create(true)
            .open(file)
            .unwrap();
        f.set_modified(SystemTime::now() - ago).unwrap();
    }

    /// An address where nothing listens.
    fn nobody() -> std::net::SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[tokio::test]
    async fn a_restart_resumes_the_timers_from_the_kept_copys_age() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        let zone = secondary(&file, &[]);
        let recorder = Arc::new(Recorder::default());
        let ctx = context(recorder.clone());
        // refresh 2 h, expire 1 day.
        let kept = Arc::new(zone_with_timers("7200 600 86400"));
        let start_checked_ago = |ago: u64| {
            checked_ago(&file, secs(ago));
            let before = Instant::now();
            let state = State::start(&zone, &ctx, Some(kept.clone()));
            (before, state, Instant::now())
        };
        // Checked 2000 s ago: the next check is due in 5200 s, not in a
        // whole refresh interval, nor now; the zone expires in 84400 s.
        let (before, state, after) = start_checked_ago(2000);
        let slack = secs(2); // the clock moves on while the file is dated
        assert!(state.next_check >= before + secs(5200) - slack);
        assert!(state.next_check <= after + secs(5200));
        let expire_at = state.expire_at.unwrap();
        assert!(expire_at >= before + secs(84_400) - slack && expire_at <= after + secs(84_400));
        assert_eq!(state.current.as_ref().map(|z| z.serial()), Some(1));
        assert_eq!(*recorder.published.lock().unwrap(), [1], "served at once");
        // Checked longer ago than the refresh interval: due now, still served.
        let (_, state, after) = start_checked_ago(8000);
        assert!(state.next_check <= after);
        assert!(state.current.is_some());
        // Past the expire interval: not served; transferred at once.
        let (_, state, after) = start_checked_ago(90_000);
        assert!(state.current.is_none() && state.next_check <= after);
        assert_eq!(recorder.published.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn failed_checks_back_off_up_to_the_retry_interval_and_a_success_starts_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        let down = secondary(&file, &[nobody()]);
        let ctx = context(Arc::default());
        // refresh 2 h, retry 20 s.
        let kept = Arc::new(zone_with_timers("7200 20 86400"));
        let mut state = State::start(&down, &ctx, Some(kept));
        // The wait each check leaves before the next, at least and at most.
        async fn wait_after(
            state: &mut State,
            zone: &SecondaryZone,
            ctx: &Context,
        ) -> (Duration, Duration) {
            let before = Instant::now();
            state.check(zone, ctx).await;
            let after = Instant::now();
            (state.next_check - after, state.next_check - before)
        }
        // The first fails to connect; the next ones fail at once, the
        // primary being left alone meanwhile; each waits twice as long.
        for expected in [1, 2, 4, 8, 16, 20, 20] {
            let (least, most) = wait_after(&mut state, &down, &ctx).await;
            let expected = secs(expected);
            assert!(
                most >= expected && least <= expected * 6 / 5,
                "{least:?}..{most:?}, not {expected:?}"
            );
        }
        assert_eq!(state.failures, 7);
        assert_eq!(ctx.conns.opened(), 0, "no connection made");
        // A primary that answers: the next check is a refresh interval on.
        let primary = heron_testkit::FakePrimary::start(&["t.test"], 1);
        let up = secondary(&file, &[primary.addr()]);
        let (least, most) = wait_after(&mut state, &up, &ctx).await;
        assert!(
            most >= secs(7200) && least <= secs(7200),
            "{least:?}..{most:?}"
        );
        assert_eq!(state.failures, 0);
        // And the next failure waits the first retry again.
        let (least, _) = wait_after(&mut state, &secondary(&file, &[nobody()]), &ctx).await;
        assert!(least <= secs(1) * 6 / 5, "{least:?}");
    }

    #[tokio::test]
    async fn notifies_that_arrive_together_make_one_check_and_end_the_primarys_wait() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        let primary = heron_testkit::FakePrimary::start(&["t.test"], 1);
        let zone = secondary(&file, &[primary.addr()]);
        checked_ago(&file, Duration::ZERO); // no check due for a refresh interval
        let ctx = context(Arc::default());
        // The primary failed a moment ago: left alone, but for its NOTIFYs.
        ctx.conns.health().failed(primary.addr(), Instant::now());
        let (wake, woken) = mpsc::unbounded_channel();
        for _ in 0..50 {
            wake.send(primary.addr().ip()).unwrap();
        }
        drop(wake); // the loop ends once it has seen them all
        let kept = Arc::new(zone_with_timers("7200 600 86400"));
        let run = run(zone, ctx.clone(), woken, Some(kept));
        tokio::time::timeout(secs(60), run)
            .await
            .expect("the loop ends");
        assert_eq!(
            primary.count(heron_proto::RType::SOA),
            1,
            "{:?}",
            primary.seen()
        );
    }
}

/// 100,000 zones mean 100,000 refresh loops: what each holds between
/// checks is kept small.
#[cfg(test)]
mod footprint {
    use super::*;

    #[test]
    fn an_idle_refresh_loop_is_small() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _in_runtime = runtime.enter();
        let zone = SecondaryZone {
            origin: Name::parse("a.test").unwrap(),
            primaries: Vec::new(),
            file: "/nonexistent".into(),
        };
        let ctx = tests::context(Arc::default());
        let (_wake, woken) = mpsc::unbounded_channel();
        let size = std::mem::size_of_val(&run(zone, ctx, woken, None));
        assert!(size <= 512, "{size} bytes");
    }
}
