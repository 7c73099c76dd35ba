//! What the transports share around the [`Processor`]: the drivers of its
//! events (accepted NOTIFYs go to the secondary side's channel, refusals
//! are counted) and the limit on transfers running at once. The
//! processor itself does no I/O; this is where its results meet tokio.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit, mpsc};

use crate::processor::{Event, NotifyReceived, Processor, Refusal};

/// Outgoing transfers running at once; more wait their turn.
const MAX_TRANSFERS: usize = 64;

pub struct Service {
    pub processor: Processor,
    /// Where accepted NOTIFYs go; None when secondary for nothing.
    notify_in: Option<mpsc::UnboundedSender<NotifyReceived>>,
    refusals: [AtomicU64; Refusal::KINDS],
    transfers: Semaphore,
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
            transfers: Semaphore::new(MAX_TRANSFERS),
        }
    }

    /// Acts on the processor's events and empties `events`.
    pub fn dispatch(&self, events: &mut Vec<Event>) {
        for event in events.drain(..) {
            match event {
                Event::Notify(notify) => {
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

    /// Requests refused per kind ([`Refusal::kind`]), set back to zero
    /// if `reset` (each counter read and zeroed at once: none is lost).
    pub fn refusal_counts(&self, reset: bool) -> [u64; Refusal::KINDS] {
        std::array::from_fn(|kind| match reset {
            true => self.refusals[kind].swap(0, Ordering::Relaxed),
            false => self.refusals[kind].load(Ordering::Relaxed),
        })
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
pub use heron_xfr::primary::notify::unix_now;
