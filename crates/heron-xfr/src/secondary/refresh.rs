//! The refresh loop of one secondary zone (RFC 1034 4.3.5, RFC 1996).
//!
//! At start the zone file kept from the last transfer, if any, is served
//! at once. Then: check the primaries' SOA when the refresh timer fires or
//! a NOTIFY arrives; transfer when their serial is newer (IXFR from the
//! version served, AXFR if that fails, logged); publish and keep the new
//! version on disk. Failures retry after the retry interval with jitter;
//! past the expire interval with no successful check the zone stops
//! answering (SERVFAIL). The file's modification time records the last
//! successful check, so the timers survive a restart; when a newer serial
//! is seen it is dated one refresh interval back, so a restart before that
//! transfer completes checks again at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use heron_proto::Name;
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client::{Connections, Upstream};
use super::keeper::Keeper;
use super::receive::{Outcome, Request};
use crate::serial;

/// One zone this server is a secondary for.
#[derive(Clone, Debug)]
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
/// NOTIFY) triggers an SOA check now.
pub async fn run(
    zone: SecondaryZone,
    ctx: Arc<Context>,
    mut wake: mpsc::UnboundedReceiver<()>,
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
                "zone {}: expired, no answer from any primary; answering SERVFAIL",
                zone.origin
            );
            ctx.publisher.expire(&zone.origin);
            state.current = None;
        }
        let next = state.next_check;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            woke = wake.recv() => if woke.is_none() { return },
        }
        // Boxed: a check's state (the transfer in progress) is large, and
        // 100,000 idle loops should not each hold room for one.
        Box::pin(state.check(&zone, &ctx)).await;
    }
}

struct State {
    current: Option<Arc<Zone>>,
    next_check: Instant,
    expire_at: Option<Instant>,
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
            "zone {}: serving kept serial {} from {}",
            zone.origin,
            kept.serial(),
            zone.file.display()
        );
        ctx.publisher.publish(kept.clone(), None);
        state.next_check = now + refresh.saturating_sub(age);
        state.expire_at = Some(now + expire - age);
        state.current = Some(kept);
        state
    }

    async fn check(&mut self, zone: &SecondaryZone, ctx: &Context) {
        for up in &zone.primaries {
            match self.check_one(zone, up, ctx).await {
                Ok(()) => {
                    let current = self.current.as_ref().expect("set by a successful check");
                    let (refresh, _, expire) = timers(current, ctx.bounds);
                    let now = Instant::now();
                    self.next_check = now + refresh;
                    self.expire_at = Some(now + expire);
                    // The record of this successful check.
                    ctx.keeper.date(&zone.file, SystemTime::now());
                    return;
                }
                Err(e) => {
                    tracing::warn!("zone {}: refresh from {} failed: {e}", zone.origin, up.addr)
                }
            }
        }
        let retry = self
            .current
            .as_ref()
            .map_or(ctx.bounds.min_retry, |z| timers(z, ctx.bounds).1);
        self.next_check = Instant::now() + jitter(retry);
    }

    async fn check_one(
        &mut self,
        zone: &SecondaryZone,
        up: &Upstream,
        ctx: &Context,
    ) -> Result<(), String> {
        let conns = &ctx.conns;
        // With nothing to serve yet there is nothing to compare: the AXFR
        // itself says which serial it brings.
        if let Some(have) = &self.current {
            let theirs = conns
                .soa_serial(up, &zone.origin)
                .await
                .map_err(|e| e.to_string())?;
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
            "zone {}: {kind} from {} to serial {} ({} records) in {} ms",
            zone.origin,
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

async fn axfr(zone: &SecondaryZone, up: &Upstream, conns: &Connections) -> Result<Outcome, String> {
    conns
        .transfer(up, &zone.origin, Request::Axfr)
        .await
        .map_err(|e| format!("AXFR: {e}"))
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

/// `d` plus up to a fifth more, so zones that failed together do not all
/// retry in the same instant.
fn jitter(d: Duration) -> Duration {
    let r = crate::primary::notify::random_id() as u32;
    d + d / 5 * r / u16::MAX as u32
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

    #[test]
    fn jitter_adds_at_most_a_fifth() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(10));
            assert!(d >= Duration::from_secs(10) && d <= Duration::from_secs(12));
        }
    }
}
/// 100,000 zones mean 100,000 refresh loops: what each holds between
/// checks is kept small.
#[cfg(test)]
mod footprint {
    use super::*;

    struct Nothing;
    impl Publisher for Nothing {
        fn publish(&self, _: Arc<Zone>, _: Option<Vec<ZoneDiff>>) {}
        fn expire(&self, _: &Name) {}
    }

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
        let ctx = Arc::new(Context {
            conns: Connections::new(Arc::new(Vec::new()), 1, Duration::from_secs(1)),
            publisher: Arc::new(Nothing),
            keeper: Keeper::start().unwrap(),
            bounds: TimerBounds::default(),
        });
        let (_wake, woken) = mpsc::unbounded_channel();
        let size = std::mem::size_of_val(&run(zone, ctx, woken, None));
        assert!(size <= 512, "{size} bytes");
    }
}
