//! `heron serve`: load zones, start the transports, wait for a signal.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use arc_swap::ArcSwap;
use heron_proto::Name;
use heron_server::{ServerConfig, SharedCatalog, TcpLimits, tcp, udp};
use heron_zone::{AnswerConfig, Catalog, load_zone_str};
use tokio::sync::watch;

use crate::ServeArgs;
use crate::config::{self, Settings};
use crate::reload::ZoneFiles;

/// The zone served when nothing is configured, so the first command a new
/// user types answers queries.
const EXAMPLE_ZONE: &str = include_str!("example.com.zone");

pub fn run(args: ServeArgs) -> ExitCode {
    let settings = match settings(&args) {
        Ok(s) => s,
        Err(errors) => {
            errors.iter().for_each(|e| tracing::error!("{e}"));
            return ExitCode::FAILURE;
        }
    };
    let use_example = args.config.is_none() && settings.zones.is_empty();
    let mut files = ZoneFiles::new(&settings.zones);
    let catalog = load_catalog(use_example, &mut files);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.server.workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(settings.server, catalog, files)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration file (if any) with the command line laid over it.
fn settings(args: &ServeArgs) -> Result<Settings, Vec<String>> {
    let mut settings = match &args.config {
        Some(path) => config::load(path)?,
        None => Settings {
            server: ServerConfig {
                listen: vec![config::DEFAULT_LISTEN.parse().unwrap()],
                workers: config::default_workers(),
                cpu_affinity: Vec::new(),
                tcp: TcpLimits::default(),
                answer: AnswerConfig::default(),
            },
            zones: Vec::new(),
        },
    };
    if !args.listen.is_empty() {
        settings.server.listen = args.listen.clone();
    }
    if let Some(workers) = args.workers {
        if workers == 0 {
            return Err(vec!["--workers must be at least 1".into()]);
        }
        settings.server.workers = workers;
    }
    if !args.cpu_affinity.is_empty() {
        settings.server.cpu_affinity = args.cpu_affinity.clone();
    }
    settings.zones.extend(args.zone.iter().cloned());
    Ok(settings)
}

/// The built-in example zone, if nothing else is configured, and every
/// configured zone that loads; one that fails is reported and skipped.
fn load_catalog(use_example: bool, files: &mut ZoneFiles) -> Catalog {
    let mut catalog = Catalog::new();
    if use_example {
        let origin = Name::parse("example.com").unwrap();
        let loaded = load_zone_str(EXAMPLE_ZONE, "built-in example.com.zone", &origin)
            .expect("the built-in zone is valid");
        tracing::info!("no zones configured: serving the built-in example.com zone");
        catalog.insert(loaded.zone);
    }
    let started = Instant::now();
    let (catalog, outcome) = files.load_changed(&catalog);
    let records: usize = catalog.zones().map(|z| z.record_count()).sum();
    tracing::info!(
        "{} zones loaded ({} records) in {} ms; {} failed",
        outcome.loaded,
        records,
        started.elapsed().as_millis(),
        outcome.failed
    );
    catalog
}

async fn serve(server: ServerConfig, catalog: Catalog, files: ZoneFiles) -> Result<(), String> {
    let catalog: SharedCatalog = Arc::new(ArcSwap::from_pointee(catalog));
    let answer_config = Arc::new(server.answer.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let limiter = tcp::ConnectionLimiter::new(server.tcp.clone());
    let mut threads = Vec::new();
    let mut tasks = Vec::new();
    for &addr in &server.listen {
        let workers = udp::spawn_workers(
            addr,
            server.workers,
            &server.cpu_affinity,
            catalog.clone(),
            answer_config.clone(),
            stop.clone(),
        )
        .map_err(|e| format!("cannot listen on UDP {addr}: {e}"))?;
        threads.extend(workers);
        let listener = tcp::bind(addr).map_err(|e| format!("cannot listen on TCP {addr}: {e}"))?;
        tasks.push(tokio::spawn(tcp::serve(
            listener,
            catalog.clone(),
            answer_config.clone(),
            limiter.clone(),
            shutdown_rx.clone(),
        )));
        tracing::info!("answering on {addr} (UDP and TCP)");
    }
    tracing::info!(
        "ready: serving {} zones with {} workers, {} ms after start",
        catalog.load().len(),
        server.workers,
        crate::started().elapsed().as_millis()
    );
    wait_for_signals(&catalog, files).await;
    tracing::info!("shutting down");
    stop.store(true, Ordering::Relaxed);
    let _ = shutdown_tx.send(true);
    for task in tasks {
        let _ = task.await;
    }
    for thread in threads {
        let _ = thread.join();
    }
    Ok(())
}

/// Serves until SIGTERM or SIGINT; on SIGHUP, reloads changed zone files.
async fn wait_for_signals(catalog: &SharedCatalog, files: ZoneFiles) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    let files = Arc::new(std::sync::Mutex::new(files));
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
            _ = hup.recv() => reload(catalog, &files).await,
        }
    }
}

/// Re-reads changed zone files off the async threads and swaps the new
/// catalog in; queries in flight finish on the old one.
async fn reload(catalog: &SharedCatalog, files: &Arc<std::sync::Mutex<ZoneFiles>>) {
    tracing::info!("SIGHUP: reloading changed zone files");
    let (catalog, files) = (catalog.clone(), files.clone());
    let started = Instant::now();
    let work = tokio::task::spawn_blocking(move || {
        let current = catalog.load_full();
        let (next, outcome) = files.lock().unwrap().load_changed(&current);
        catalog.store(Arc::new(next));
        outcome
    });
    match work.await {
        Ok(o) => tracing::info!(
            "reload done in {} ms: {} zones re-read, {} unchanged, {} failed",
            started.elapsed().as_millis(),
            o.loaded,
            o.unchanged,
            o.failed
        ),
        Err(e) => tracing::error!("reload failed: {e}"),
    }
}
