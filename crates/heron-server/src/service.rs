//! What the transports share around the [`Processor`]: the drivers of its
//! events (accepted NOTIFYs go to the secondary side's channel, refusals
//! are counted) and the limit on transfers running at once. The
//! processor itself does no I/O; this is where its results meet tokio.
//! The query counters every transport writes are here too ([`Stats`]).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use heron_xfr::stats::ZoneStats;

use tokio::sync::{Semaphore, SemaphorePermit, mpsc};

use heron_proto::Rcode;
use tokio::sync::mpsc::error::TrySendError;

use crate::processor::{Event, NotifyReceived, Processor, Refusal, UpdateRequest};
use crate::stats::Stats;
use crate::udp::limit::RrlTotals;
use crate::update::{Reply, Update, UpdateSender};

/// Outgoing transfers running at once; more wait their turn.
const MAX_TRANSFERS: usize = 64;

pub struct Service {
    pub processor: Processor,
    /// Where accepted NOTIFYs go; None when secondary for nothing.
    notify_in: Option<mpsc::UnboundedSender<NotifyReceived>>,
    refusals: [AtomicU64; Refusal::KINDS],
    /// The refusal counts at the last `ctl stats --reset`.
    refusals_reset: Mutex<[u64; Refusal::KINDS]>,
    transfers: Semaphore,
    /// What the UDP workers' rate limiting dropped and slipped.
    pub rrl: RrlTotals,
    /// Queries, responses and connections, per worker.
    pub stats: Arc<Stats>,
    /// Transfers and NOTIFYs out per primary zone (a secondary zone's
    /// counts are the refresh driver's).
    pub zones: Arc<ZoneStats>,
    /// Where admitted UPDATEs go; None: nobody takes them (answered
    /// SERVFAIL).
    updates: Option<UpdateSender>,
}

impl Service {
    pub fn new(
        processor: Processor,
        notify_in: Option<mpsc::UnboundedSender<NotifyReceived>>,
    ) -> Service {
        Service {
            processor,
            notify_in,
            refusals: Default::default(),
            refusals_reset: Default::default(),
            transfers: Semaphore::new(MAX_TRANSFERS),
            rrl: RrlTotals::default(),
            stats: Arc::default(),
            zones: Arc::default(),
            updates: None,
        }
    }

    /// Hands admitted UPDATEs to `updates` (the update task's queue).
    pub fn with_updates(mut self, updates: UpdateSender) -> Service {
        self.updates = Some(updates);
        self
    }

    /// Queues an admitted UPDATE for the update task; one that cannot be
    /// queued (the queue full, or no task) is answered SERVFAIL now.
    pub fn submit_update(&self, request: Box<UpdateRequest>, reply: Reply) {
        let update = Update::new(request, reply);
        let Some(queue) = &self.updates else {
            return update.answer_rcode(Rcode::SERVFAIL);
        };
        if let Err(e) = queue.try_send(update) {
            let update = match e {
                TrySendError::Full(u) | TrySendError::Closed(u) => u,
            };
            let refusal = crate::processor::Refusal::UpdateQueueFull;
            self.refusals[refusal.kind()].fetch_add(1, Ordering::Relaxed);
            (self.processor).log_update_queue_full(&update.request.origin, update.request.peer);
            update.answer_rcode(Rcode::SERVFAIL);
        }
    }

    /// Counts transfers out in `zones` (shared with the NOTIFY sender,
    /// which counts its own there).
    pub fn with_zone_stats(mut self, zones: Arc<ZoneStats>) -> Service {
        self.zones = zones;
        self
    }

    /// Acts on the processor's events and empties `events`.
    pub fn dispatch(&self, events: &mut Vec<Event>) {
        for event in events.drain(..) {
            match event {
                Event::Notify(notify) => {
                    // Counted by the secondary side, which has the zone.
                    if let Some(sender) = &self.notify_in {
                        // Closed only while shutting down.
                        let _ = sender.send(notify);
                    }
                }
                Event::Refused(why) => {
                    self.refusals[why.kind()].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Requests refused so far for reasons of `why`'s kind.
    pub fn refusals(&self, why: Refusal) -> u64 {
        self.refusals[why.kind()].load(Ordering::Relaxed)
    }

    /// Requests refused per kind ([`Refusal::kind`]) since the start.
    pub fn refusal_totals(&self) -> [u64; Refusal::KINDS] {
        std::array::from_fn(|kind| self.refusals[kind].load(Ordering::Relaxed))
    }

    /// Requests refused per kind since the last reset, which `reset`
    /// makes now (the totals go on, as Prometheus counters must).
    pub fn refusal_counts(&self, reset: bool) -> [u64; Refusal::KINDS] {
        let totals = self.refusal_totals();
        let mut base = self
            .refusals_reset
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let since = std::array::from_fn(|kind| totals[kind] - base[kind]);
        if reset {
            *base = totals;
        }
        since
    }

    /// A turn to send a transfer, waiting while [`MAX_TRANSFERS`] run.
    pub async fn transfer_slot(&self) -> SemaphorePermit<'_> {
        self.transfers
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }
}

/// Seconds since the Unix epoch: the `now` transports give the processor.
pub use heron_proto::time::unix_now;
