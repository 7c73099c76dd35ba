//! The query log (`[dnstap]`) as the running server holds it: the
//! processor's tap layer, always in place (off when `[dnstap]` is not
//! configured), and the writer feeding it, which a reload may start,
//! replace or end ([`QueryLog::apply`]).

use std::sync::{Arc, Mutex};

use heron_server::dnstap::{self, Writer};
use heron_server::processor::tap::{Tap, TapSettings};

use crate::config::dnstap::Dnstap;

/// The tap layer and the writer it feeds, with the settings they run with.
pub struct QueryLog {
    tap: Arc<Tap>,
    running: Mutex<Option<(Arc<Writer>, Dnstap)>>,
    /// Writers being ended on threads of their own, with their output: a
    /// new writer on the same file waits for the old one's last frames.
    ending: Mutex<Vec<(dnstap::Output, std::thread::JoinHandle<()>)>>,
}

impl QueryLog {
    /// The layer, with a writer started if `settings` asks for one (a file
    /// that cannot be opened is an error).
    pub fn start(settings: Option<Dnstap>) -> Result<QueryLog, String> {
        let log = QueryLog {
            tap: Arc::new(Tap::off()),
            running: Mutex::new(None),
            ending: Mutex::new(Vec::new()),
        };
        if let Some(settings) = settings {
            let writer = start_writer(&settings)?;
            log.tap.set(Some(tap_settings(&settings, &writer)));
            *log.lock() = Some((writer, settings));
        }
        Ok(log)
    }

    /// The processor's layer.
    pub fn tap(&self) -> Arc<Tap> {
        self.tap.clone()
    }

    /// The writer, if the log is on.
    pub fn writer(&self) -> Option<Arc<Writer>> {
        self.lock().as_ref().map(|(writer, _)| writer.clone())
    }

    /// A reload's `[dnstap]`: the sampling applies at once; another
    /// output (or identity, version, queue) starts a new writer and ends
    /// the old one, None ends it. Whether anything changed; on an error
    /// (the new file cannot be opened) the log runs on as before, or is
    /// off if the old writer had to end first (the same file).
    pub fn apply(&self, new: Option<Dnstap>) -> Result<bool, String> {
        let mut running = self.lock();
        let old_settings = running.as_ref().map(|(_, s)| s);
        if old_settings == new.as_ref() {
            return Ok(false);
        }
        let Some(new) = new else {
            self.tap.set(None);
            if let Some((old, settings)) = running.take() {
                self.end(old, &settings);
            }
            tracing::info!("dnstap: off");
            return Ok(true);
        };
        if let Some((writer, old)) = running.as_mut()
            && old.writer == new.writer
        {
            self.tap.set(Some(tap_settings(&new, writer)));
            *old = new;
            tracing::info!("dnstap: logging one query in {}", old.sample);
            return Ok(true);
        }
        // The same file must be ended before it is continued.
        let same_output =
            (running.as_ref()).is_some_and(|(_, old)| old.writer.output == new.writer.output);
        if same_output && let Some((old, _)) = running.take() {
            self.tap.set(None);
            old.finish();
        }
        // A writer ended earlier on this output (turned off, moved away
        // and back) may still be writing its last frames: they go first.
        self.wait_for_ending(&new.writer.output);
        let writer = start_writer(&new)?;
        self.tap.set(Some(tap_settings(&new, &writer)));
        if let Some((old, settings)) = running.replace((writer, new)) {
            self.end(old, &settings);
        }
        Ok(true)
    }

    /// Ends a writer no longer fed, on a thread of its own: its flush may
    /// take up to [`dnstap::FLUSH_BUDGET`] and a reload need not wait.
    fn end(&self, writer: Arc<Writer>, settings: &Dnstap) {
        let ended = std::thread::Builder::new()
            .name("dnstap-end".into())
            .spawn(move || writer.finish());
        match ended {
            Ok(thread) => {
                let mut ending = self.ending.lock().unwrap_or_else(|e| e.into_inner());
                ending.retain(|(_, t)| !t.is_finished());
                ending.push((settings.writer.output.clone(), thread));
            }
            Err(e) => tracing::warn!("dnstap: no thread to end the old writer: {e}"),
        }
    }

    /// Waits for the writers being ended on `output`.
    fn wait_for_ending(&self, output: &dnstap::Output) {
        let mut ending = self.ending.lock().unwrap_or_else(|e| e.into_inner());
        let (same, others): (Vec<_>, Vec<_>) = std::mem::take(&mut *ending)
            .into_iter()
            .partition(|(o, _)| o == output);
        *ending = others;
        drop(ending);
        for (_, thread) in same {
            let _ = thread.join();
        }
    }

    /// Turns the layer off and ends the writer (at shutdown); what it
    /// wrote and dropped.
    pub fn finish(&self) -> Option<heron_server::processor::tap::TapTotals> {
        self.tap.set(None);
        let (writer, _) = self.lock().take()?;
        writer.finish();
        Some(dnstap_totals(&writer))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Arc<Writer>, Dnstap)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn dnstap_totals(writer: &Writer) -> heron_server::processor::tap::TapTotals {
    use heron_server::processor::tap::TapSink;
    writer.totals()
}

fn tap_settings(d: &Dnstap, writer: &Arc<Writer>) -> TapSettings {
    TapSettings {
        every: d.sample,
        queries: d.queries,
        responses: d.responses,
        sink: writer.clone(),
    }
}

/// Starts a writer (a file is opened here, a socket is connected to by
/// the writer's thread).
fn start_writer(d: &Dnstap) -> Result<Arc<Writer>, String> {
    let target = match &d.writer.output {
        dnstap::Output::File(p) => format!("file {}", p.display()),
        dnstap::Output::Socket(p) => format!("socket {}", p.display()),
    };
    let writer = Writer::start(d.writer.clone()).map_err(|e| format!("dnstap {target}: {e}"))?;
    tracing::info!("dnstap: logging one query in {} to {target}", d.sample);
    Ok(writer)
}
