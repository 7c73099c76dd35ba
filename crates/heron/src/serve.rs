//! `heron serve`: load zones, start the transports, wait for a signal.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

use arc_swap::ArcSwap;
use clap::Args;
use heron_proto::Name;
use heron_server::processor::cookies::{self, Cookies};
use heron_server::processor::tap::Tap;
use heron_server::processor::{NotifyReceived, Processor, SharedOrigins, SharedQueryPolicy};
use heron_server::service::{Service, unix_now};
use heron_server::{ServerConfig, SharedCatalog, TcpLimits, tcp, tls, udp};
use heron_xfr::journal::DEFAULT_MAX_BYTES;
use heron_xfr::journal::files as journal_files;
use heron_xfr::keys::SharedKeys;
use heron_xfr::primary::notify::Notifier;
use heron_xfr::primary::{Primary, ZonePolicy};
use heron_xfr::secondary::client::Connections;
use heron_xfr::secondary::tls::TlsClients;
use heron_xfr::stats::ZoneStats;
use heron_zone::{AnswerConfig, Catalog, Zone, load_zone_str};
use tokio::sync::{mpsc, watch};

use crate::config::{self, RunAs, Settings};
use crate::control::socket as control;
use crate::notify;
use crate::plan::catalog_producer;
use crate::plan::consumer::Consumers;
use crate::plan::zone_files::{ConfigSource, ZoneFiles};
use crate::runtime::query_log::QueryLog;
use crate::runtime::secondary;
use crate::runtime::signed_copies;
use crate::runtime::{Selection, Transfers, reload};
use crate::{background, memory};

/// `heron serve`'s options.
#[derive(Args)]
pub struct ServeArgs {
    /// Configuration file (TOML).
    #[arg(long, short)]
    pub(crate) config: Option<PathBuf>,
    /// Address to answer on, UDP and TCP (repeatable). Overrides the file.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
    /// A zone to serve as ORIGIN=FILE (repeatable). Added to the file's zones.
    #[arg(long, value_name = "ORIGIN=FILE", value_parser = config::parse_zone_arg)]
    zone: Vec<config::ZoneSpec>,
    /// Worker threads (default: one per core). Overrides the file.
    #[arg(long)]
    workers: Option<usize>,
    /// Pin UDP workers to these CPUs, round robin (e.g. 0,1). Overrides the file.
    #[arg(long, value_delimiter = ',', value_name = "CPU,...")]
    cpu_affinity: Vec<usize>,
    /// The control socket `heron reload` talks to. Overrides the file.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
}

/// The zone served when nothing is configured, so the first command a new
/// user types answers queries.
const EXAMPLE_ZONE: &str = include_str!("example.com.zone");

pub fn run(args: ServeArgs) -> ExitCode {
    match start(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_empty() {
                tracing::error!("{e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// A SIGHUP while the zones load (a reload asked too early, a deploy
/// hook) must not kill the server: noted, and done once it serves.
fn hold_hangups_while_starting() {
    if let Err(e) = heron_sys::process::hold_hangups() {
        tracing::warn!("cannot hold SIGHUP while starting: {e}");
    }
    // A file past `LimitFSIZE=` is a failed write, as on a full disk,
    // not the end of the server (black-box finding BO1: one journal write
    // past it killed it; BIND answers SERVFAIL and goes on).
    if let Err(e) = heron_sys::process::survive_file_size_limit() {
        tracing::warn!("cannot ignore SIGXFSZ: {e}");
    }
}

/// What the settings ask of the process before anything is read: the
/// largest zone file loaded, the open files its connections need.
fn process_limits(settings: &mut Settings) {
    heron_zone::zonefile::set_max_load_size(settings.max_zone_file_size);
    let tcp = &mut settings.server.tcp;
    tcp.max_connections = raise_open_files(tcp.max_connections);
}

/// The soft open-files limit raised to what `[tcp] max-connections`
/// needs, up to the hard limit (as any process may): started from a shell
/// at 1024, the server reached it at a tenth of the connections it was
/// set for, and the kernel refused the rest before any idle one was shed
/// (black-box finding CC-2). A hard limit short of it is said, and the
/// connections served lowered to what it leaves (see
/// [`connections_within`]). The connections to serve come back.
fn raise_open_files(max_connections: usize) -> usize {
    let want = max_connections as u64 + crate::doctor::RESERVED_FILES;
    let (soft, hard) = heron_sys::process::open_files_limit();
    let Some(soft) = soft.filter(|&soft| soft < want) else {
        return max_connections; // unlimited, or enough
    };
    let target = hard.map_or(want, |hard| hard.min(want));
    if target > soft {
        match heron_sys::process::set_open_files_limit(Some(target), hard) {
            Ok(()) => tracing::info!(
                "open-files limit raised from {soft} to {target} for [tcp] max-connections = {max_connections}"
            ),
            Err(e) => {
                tracing::warn!("cannot raise the open-files limit from {soft} to {target}: {e}")
            }
        }
    }
    let now = heron_sys::process::open_files_limit().0.unwrap_or(u64::MAX);
    if now >= want {
        return max_connections;
    }
    let served = connections_within(max_connections, now);
    tracing::warn!(
        "the open-files limit is {now}, below the {want} that [tcp] max-connections = {max_connections} needs: {served} connections at most are served, so that idle ones are shed before the kernel refuses new ones and the control socket, zone files and transfers keep descriptors; raise it (LimitNOFILE= in the unit, ulimit -n) or lower max-connections (heron doctor)"
    );
    served
}

/// The TCP and TLS connections served under an open-files limit of
/// `limit`, below what `max_connections` needs: what is left after the
/// descriptors kept for the rest (`RESERVED_FILES`, or half the limit
/// when that is less), at least one. All of them went to a flood of idle
/// connections, and `heron ctl` could not connect until they timed out
/// (black-box finding DM-3).
fn connections_within(max_connections: usize, limit: u64) -> usize {
    let kept = crate::doctor::RESERVED_FILES.min(limit / 2);
    let left = usize::try_from(limit - kept).unwrap_or(usize::MAX);
    left.clamp(1, max_connections.max(1))
}

/// Reads the settings, loads the zones and serves them until told to
/// stop. An error already logged comes back empty.
fn start(args: ServeArgs) -> Result<(), String> {
    let (mut settings, control) = begin(&args)?;
    let use_example = args.config.is_none()
        && settings.zones.is_empty()
        && settings.generated_catalogs.is_empty();
    let mut files = zone_files(&args, &settings);
    let Loaded {
        catalog,
        journals,
        signed,
        signed_before,
        replayed,
        carried,
        still_frozen,
    } = load_zones(use_example, &mut files, &mut settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.server.workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let query_log = Arc::new(QueryLog::start(settings.dnstap.take())?);
    let mut kept = secondary::load_kept(&settings.secondaries);
    let signed_kept =
        secondary::load_signed_kept(&settings.secondaries, &settings.signed_secondaries);
    let mut consumers = Consumers::new(std::mem::take(&mut settings.catalogs));
    let members = secondary::members_at_start(
        &mut consumers,
        &mut settings.secondaries,
        &mut kept,
        &catalog,
    );
    // Before anything is served: an IXFR may come at once.
    let policies = std::mem::take(&mut settings.policies);
    let primary = primary(
        policies,
        journals,
        &catalog,
        (&signed_kept, &kept, &signed_before),
    );
    let primary = Arc::new(carry_on(primary, &catalog, &signed_before));
    set_member_policies(&primary, members, &settings.secondaries, &kept);
    let catalog =
        catalog_producer::update_at_start(&settings.generated_catalogs, catalog, &primary);
    let keys = SharedKeys::new(Arc::new(std::mem::take(&mut settings.keys)));
    let (notify_tx, notifies) = mpsc::unbounded_channel();
    let queries = Queries::new(
        &settings,
        primary.clone(),
        keys.clone(),
        notify_tx,
        query_log.tap(),
    );
    let mut transfers = new_transfers(&runtime, &keys, &query_log, primary);
    transfers.tls_certificate = settings.server.tls.as_ref().map(|t| t.certificate.clone());
    transfers.query_policy = queries.query_policy.clone();
    mark_replayed(&transfers, &replayed, (&carried, &still_frozen));
    transfers.signings.set(signed);
    keep_signed_copies(&transfers, &files, &catalog, &signed_before);
    transfers
        .signed_secondaries
        .set(&settings.signed_secondaries);
    transfers.signed_secondaries.restore(signed_kept);
    let secondaries = secondaries(&mut settings, kept, keys, notifies, consumers);
    let process = ProcessSettings {
        control,
        control_socket: settings.control,
        run_as: settings.shield.run_as,
        query_log,
        metrics: settings.metrics,
    };
    let prepared = Prepared {
        catalog,
        files,
        transfers,
        queries,
        secondaries,
    };
    runtime.block_on(serve(settings.server, process, prepared))
}

/// The control socket from the start of `heron serve`: bound before any
/// zone, journal or key is read, so that a second server started on the
/// same files stops at once (black-box finding DE-1: during a long load
/// it went on, signed a zone and wrote keys beside the first). Clients
/// wait in its backlog until it is served; its file is removed if the
/// start fails before then.
struct EarlyControl {
    bound: Option<(std::os::unix::net::UnixListener, PathBuf)>,
}

impl EarlyControl {
    fn bind(path: Option<&std::path::Path>) -> Result<EarlyControl, String> {
        let bound = match path {
            Some(path) => Some((control::bind_std(path)?, path.to_path_buf())),
            None => None,
        };
        Ok(EarlyControl { bound })
    }

    /// The socket for the runtime's tasks (inside the runtime), taken out.
    fn take_for_tokio(&mut self) -> Result<Option<(tokio::net::UnixListener, PathBuf)>, String> {
        let Some((listener, path)) = self.bound.take() else {
            return Ok(None);
        };
        let failed = |e: std::io::Error| format!("control socket {}: {e}", path.display());
        listener.set_nonblocking(true).map_err(failed)?;
        let listener = tokio::net::UnixListener::from_std(listener).map_err(failed)?;
        Ok(Some((listener, path)))
    }
}

impl Drop for EarlyControl {
    fn drop(&mut self) {
        if let Some((_, path)) = self.bound.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The settings, and the control socket bound before anything else is
/// read, so that a second start on the same files stops here (it finds
/// the socket) however long this one loads.
fn begin(args: &ServeArgs) -> Result<(Settings, EarlyControl), String> {
    hold_hangups_while_starting();
    let settings = read_settings(args)?;
    let control = EarlyControl::bind(settings.control.as_deref())?;
    let mut settings = settings;
    process_limits(&mut settings);
    Ok((settings, control))
}

/// The zones whose journal was replayed at the start: their files lack
/// its updates, which the journal keeps until they are written back. The
/// signed zones `carried` lack them too; their journal is carried by
/// content, not pinned. The zones `still_frozen` are frozen.
fn mark_replayed(
    transfers: &Transfers,
    replayed: &[(Name, u32)],
    (carried, still_frozen): (&[Name], &[Name]),
) {
    (still_frozen.iter()).for_each(|origin| _ = transfers.frozen.freeze(origin));
    for (origin, file_serial) in replayed {
        transfers.unwritten.mark(origin);
        transfers.primary.pin_history(origin, Some(*file_serial));
    }
    carried
        .iter()
        .for_each(|origin| transfers.unwritten.mark(origin));
}

/// What transfers, NOTIFY and the zones' changes share; its NOTIFY
/// driver started on `runtime`.
fn new_transfers(
    runtime: &tokio::runtime::Runtime,
    keys: &Arc<SharedKeys>,
    query_log: &Arc<QueryLog>,
    primary: Arc<Primary>,
) -> Transfers {
    let zone_stats = Arc::new(ZoneStats::default());
    Transfers {
        // Its driver task runs on the runtime.
        notifier: runtime.block_on(async { Notifier::start(keys.clone(), zone_stats.clone()) }),
        keys: keys.clone(),
        query_log: query_log.clone(),
        zone_stats,
        catalog_writer: Mutex::new(()),
        primary,
        secondaries: Mutex::new(None),
        frozen: Default::default(),
        signings: Default::default(),
        signed_secondaries: Default::default(),
        signed_copies: Default::default(),
        unwritten: Default::default(),
        tls_certificate: None,
        query_policy: Default::default(),
        connections: Default::default(),
    }
}

/// The zones as loaded at start, before anything is served.
struct Loaded {
    catalog: Catalog,
    journals: journal_files::Found,
    /// The zones Heron signs from their files, with their signing.
    signed: Vec<(Name, Arc<crate::config::dnssec::Signing>)>,
    /// The signed versions served before the restart (`FILE.signed`).
    signed_before: Vec<Arc<Zone>>,
    /// The zones whose journals' updates were applied to their files.
    replayed: Vec<(Name, u32)>,
    /// The signed zones served with updates their files lack.
    carried: Vec<Name>,
    /// The zones frozen when the server stopped whose edited file does
    /// not load: they stay frozen.
    still_frozen: Vec<Name>,
}

/// Loads the zone files, the signed versions kept before the restart
/// being the previous versions of the first signing (and where the
/// journals end); replays the journals (those of zones that take no
/// updates but hold some too), carries the signed zones' updates, and
/// adds the generated catalogs' kept files.
fn load_zones(use_example: bool, files: &mut ZoneFiles, settings: &mut Settings) -> Loaded {
    let signed_before: Vec<Arc<Zone>> = (signed_copies::load(&files.signed_copies()))
        .into_iter()
        .map(Arc::new)
        .collect();
    let signed_before =
        crate::runtime::update_signed::bring_forward(signed_before, &settings.policies);
    let (mut catalog, mut journals) =
        load_catalog_and_find_journals(use_example, files, settings, &signed_before);
    // Before the replay: a zone that takes no updates may hold some.
    let held =
        crate::runtime::update::hold_journals(&catalog, &settings.zones, &mut settings.policies);
    held.iter()
        .for_each(|(origin, path)| journals.add(origin, path));
    let signed = files.signed_files();
    let replayed =
        crate::runtime::update::replay_journals(&mut catalog, &settings.policies, &signed);
    let loaded = |o: &Name| {
        files
            .loaded_at(&o.to_lowercase())
            .is_some_and(|at| at.is_some())
    };
    let ((mut frozen, signed_edits), still_frozen) = crate::runtime::update::thaw_at_start(
        &mut catalog,
        &settings.zones,
        &settings.policies,
        &loaded,
    );
    frozen.extend(still_frozen.iter().cloned());
    let carried = crate::runtime::update_signed::carry_journals(
        &mut catalog,
        &settings.policies,
        (&signed, &frozen),
        &signed_before,
    );
    signed_copies::past_the_served_serial(&mut catalog, &signed, &signed_before);
    crate::runtime::update::write_served_serials(&catalog, signed_edits);
    catalog_producer::insert_kept(&settings.generated_catalogs, &mut catalog);
    Loaded {
        catalog,
        journals,
        signed,
        signed_before,
        replayed,
        carried,
        still_frozen,
    }
}

/// Where the signed zones' copies go, and the copies of the versions
/// served now written: every signed zone but one served as kept before
/// the restart (a first start writes them all).
fn keep_signed_copies(
    transfers: &Transfers,
    files: &ZoneFiles,
    catalog: &Catalog,
    signed_before: &[Arc<Zone>],
) {
    let copies = files.signed_copies();
    let kept = |zone: &Arc<Zone>| signed_before.iter().any(|before| Arc::ptr_eq(zone, before));
    let signed_now: Vec<Arc<Zone>> = (copies.iter())
        .filter_map(|(origin, _)| catalog.get(origin))
        .filter(|zone| !kept(zone))
        .cloned()
        .collect();
    transfers.signed_copies.set(copies);
    transfers.signed_copies.keep(&signed_now);
}

/// The settings, their warnings logged; errors logged here, so the one
/// returned is empty.
fn read_settings(args: &ServeArgs) -> Result<Settings, String> {
    let started = Instant::now();
    match settings(args) {
        Ok(s) => {
            tracing::info!(
                "configuration read: {} zones, {} secondary zones, in {} ms",
                s.zones.len(),
                s.secondaries.len(),
                started.elapsed().as_millis()
            );
            s.warnings.iter().for_each(|w| tracing::warn!("{w}"));
            Ok(s)
        }
        Err(errors) => {
            errors.iter().for_each(|e| tracing::error!("{e}"));
            Err(String::new())
        }
    }
}

/// The zone files to watch, and the configuration file when there is one.
fn zone_files(args: &ServeArgs, settings: &Settings) -> ZoneFiles {
    let files = ZoneFiles::new(&settings.zones)
        .with_catalogs(&settings.generated_catalogs)
        .with_signed_secondaries(&settings.signed_secondaries)
        .with_warned(&settings.warnings);
    match &args.config {
        Some(path) => files.with_config(ConfigSource {
            path: path.clone(),
            extra_zones: args.zone.clone(),
            restart_only: settings.restart_only.clone(),
            live: settings.live.clone(),
        }),
        None => files,
    }
}

/// What the secondary zones' task starts from.
fn secondaries(
    settings: &mut Settings,
    kept: Vec<Option<Zone>>,
    keys: Arc<SharedKeys>,
    notifies: mpsc::UnboundedReceiver<NotifyReceived>,
    consumers: Consumers,
) -> secondary::Secondaries {
    let limits = &settings.secondary;
    secondary::Secondaries {
        kept,
        zones: std::mem::take(&mut settings.secondaries),
        connections: Connections::new(
            Arc::default(),
            limits.concurrency,
            Duration::from_secs(limits.timeout),
        )
        .with_keys(keys)
        .with_tls(settings.xot.clone())
        .with_transfer_limits(limits.transfer_limits()),
        notifies,
        bounds: limits.bounds(),
        keep_removed: limits.keep_removed,
        consumers,
    }
}

/// Gives the load's scratch back and moves the zones to huge pages, on a
/// thread of its own: for 2,000,000 records that takes about 0.2 s,
/// which answering need not wait for (answers are the same before).
/// At housekeeping priority (nice 10), not SCHED_IDLE: a busy server
/// would never get its zones into huge pages.
fn settle_once_answering(catalog: &SharedCatalog) {
    let catalog = catalog.clone();
    let spawned = std::thread::Builder::new()
        .name("settle".into())
        .spawn(move || {
            if !background::to_housekeeping_priority() {
                tracing::debug!("the settle thread keeps its CPU priority");
            }
            memory::settle(&catalog.load_full())
        });
    if let Err(e) = spawned {
        tracing::warn!("no thread to move zone memory to huge pages: {e}");
    }
}

/// Under a systemd unit with `RuntimeDirectory=` (the shipped one has
/// `heron`, so `/run/heron`), the control socket `control.sock` there
/// when the configuration names none: where `heron ctl` looks by default.
fn control_in_runtime_directory() -> Option<PathBuf> {
    crate::control::ctl::runtime_directory_socket()
}

/// The configuration file (if any) with the command line laid over it.
fn settings(args: &ServeArgs) -> Result<Settings, Vec<String>> {
    let mut settings = match &args.config {
        Some(path) => {
            let settings = config::load(path)?;
            let mut refused = crate::plan::key_state::unsigned_with_ds_at_start(&settings, path);
            refused.extend(crate::plan::key_state::moved_keys_at_start(&settings, path));
            if !refused.is_empty() {
                return Err(refused);
            }
            crate::plan::key_notes::note_key_directories(&settings, path);
            crate::plan::signing::find_unsigned_served(&settings, path);
            settings
        }
        None => Settings {
            server: ServerConfig {
                listen: vec![config::DEFAULT_LISTEN.parse().unwrap()],
                workers: config::default_workers(),
                cpu_affinity: Vec::new(),
                udp_coalesce: Duration::ZERO,
                udp_segmentation: config::DEFAULT_UDP_SEGMENTATION,
                tcp: TcpLimits::default(),
                answer: AnswerConfig::default(),
                tls: None,
                xdp: None,
                rrl: None,
            },
            zones: Vec::new(),
            signed_secondaries: Vec::new(),
            keys: Vec::new(),
            policies: Default::default(),
            secondaries: Vec::new(),
            catalogs: Vec::new(),
            generated_catalogs: Vec::new(),
            secondary: Default::default(),
            xot: TlsClients::new(None).expect("no CA to read"),
            control: None,
            max_zone_file_size: heron_zone::zonefile::DEFAULT_MAX_LOAD_SIZE,
            shield: Default::default(),
            warnings: Vec::new(),
            restart_only: Default::default(),
            live: Default::default(),
            cookies: Default::default(),
            dnstap: None,
            metrics: None,
            log: Default::default(),
        },
    };
    if let Some(path) = &args.control {
        settings.control = Some(path.clone());
    }
    if settings.control.is_none() {
        settings.control = control_in_runtime_directory();
    }
    // Before any journal or kept copy is read back: those are its files.
    if let Some(taken) = settings.control.as_deref().and_then(control::in_use) {
        return Err(vec![taken]);
    }
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
    let repeated = config::command_line_problems(&settings, &args.zone, &args.listen);
    if !repeated.is_empty() {
        return Err(repeated);
    }
    settings.zones.extend(args.zone.iter().cloned());
    Ok(settings)
}

/// [`load_catalog`], while another thread looks for the zones' journal
/// files (listing a folder of 100,000 zones takes tens of ms).
fn load_catalog_and_find_journals(
    use_example: bool,
    files: &mut ZoneFiles,
    settings: &Settings,
    signed_before: &[Arc<Zone>],
) -> (Catalog, journal_files::Found) {
    std::thread::scope(|s| {
        let journal_paths = (settings.policies.iter())
            .filter_map(|(origin, policy)| Some((origin, policy.journal_path()?)));
        let finding = s.spawn(|| journal_files::find(journal_paths));
        let catalog = load_catalog(use_example, files, signed_before);
        let journals = finding.join().unwrap_or_else(|_| {
            tracing::error!("looking for journal files failed; journals start over");
            Default::default()
        });
        (catalog, journals)
    })
}

/// The catalog members' policies, known only once the catalogs' kept
/// copies are read; their journals are read back against their `kept`
/// copies (aligned with `secondaries`) as the configured zones' were.
fn set_member_policies(
    primary: &Primary,
    members: Vec<(Name, Arc<ZonePolicy>)>,
    secondaries: &[heron_xfr::secondary::refresh::SecondaryZone],
    kept: &[Option<Zone>],
) {
    let with_journal = members.iter().any(|(_, p)| p.journal_path().is_some());
    let kept_of: HashMap<&Name, &Zone> = match with_journal {
        true => (secondaries.iter().zip(kept))
            .filter_map(|(z, k)| Some((&z.origin, k.as_ref()?)))
            .collect(),
        false => HashMap::new(),
    };
    for (origin, policy) in members {
        let journal = policy.journal_path().is_some();
        primary.set_member_policy(&origin, Some(policy));
        if let Some(zone) = kept_of.get(&origin).filter(|_| journal) {
            primary.restore_kept_journal(zone);
        }
    }
}

/// The primary side, with the journal files `found` read back for the
/// zones served now: those of `catalog` and the secondaries' `kept` copies.
fn primary(
    policies: HashMap<Name, ZonePolicy>,
    found: journal_files::Found,
    catalog: &Catalog,
    (signed, kept, signed_before): (&[Zone], &[Option<Zone>], &[Arc<Zone>]),
) -> Primary {
    let mut primary = Primary::new(policies, DEFAULT_MAX_BYTES);
    // Indexed only if a journal file asks for a kept copy; a secondary
    // zone signed here journals its signed versions.
    let kept_copies: OnceCell<HashMap<&Name, &Zone>> = OnceCell::new();
    let index = || {
        let unsigned = kept.iter().flatten().map(|z| (z.origin(), z));
        unsigned
            .chain(signed.iter().map(|z| (z.origin(), z)))
            .collect()
    };
    primary.open_journal_files(found, |origin| {
        let served = catalog.get(origin).map(|zone| &**zone);
        // A signed zone's journal ends at the version signed before.
        let before = signed_before.iter().find(|z| z.origin() == origin);
        let served = before.map(|zone| &**zone).or(served);
        let own = served.map(|zone| (zone, false));
        let kept_copy = || kept_copies.get_or_init(index).get(origin).copied();
        own.or_else(|| Some((kept_copy()?, true)))
    });
    primary
}

/// The journals of the signed zones `signed_before` (the versions kept
/// before the restart) carry on: each was read back against that
/// version, and the step from it to the one `catalog` serves now (signed
/// again keeping its signatures) is added.
fn carry_on(primary: Primary, catalog: &Catalog, signed_before: &[Arc<Zone>]) -> Primary {
    for before in signed_before {
        if let Some(now) = catalog
            .get(before.origin())
            .filter(|z| !Arc::ptr_eq(z, before))
        {
            primary.zone_changed(before, now);
        }
    }
    primary
}

/// The built-in example zone, if nothing else is configured, and every
/// configured zone that loads; one that fails is reported and skipped.
/// The signed zones are signed again from `signed_before`, the versions
/// kept before the restart; one whose file fails to load or to sign
/// serves its kept version, as a reload keeps the version served.
fn load_catalog(use_example: bool, files: &mut ZoneFiles, signed_before: &[Arc<Zone>]) -> Catalog {
    let mut catalog = Catalog::new();
    signed_before
        .iter()
        .for_each(|z| catalog.insert_shared(z.clone()));
    if use_example {
        let origin = Name::parse("example.com").unwrap();
        let loaded = load_zone_str(EXAMPLE_ZONE, "built-in example.com.zone", &origin)
            .expect("the built-in zone is valid");
        tracing::info!("no zones configured: serving the built-in example.com zone");
        catalog.insert(loaded.zone);
    }
    let started = Instant::now();
    let (catalog, outcome) = files.load_changed(&catalog);
    // Served counts the kept signed copies of zones whose file failed too.
    let (served, records) = catalog
        .zones()
        .fold((0, 0), |(n, r), z| (n + 1, r + z.record_count()));
    tracing::info!(
        "{} zones loaded in {} ms; {} failed; serving {served} zones ({records} records)",
        outcome.loaded,
        started.elapsed().as_millis(),
        outcome.failed
    );
    catalog
}

/// What the query processor is built from, once the catalog is shared.
struct Queries {
    primary: Arc<Primary>,
    keys: Arc<SharedKeys>,
    /// Zones we are secondary for: NOTIFY is accepted for these.
    secondaries: SharedOrigins,
    notify_in: Option<mpsc::UnboundedSender<NotifyReceived>>,
    /// Shared with the reload, which replaces it.
    query_policy: Arc<SharedQueryPolicy>,
    nsid: Vec<u8>,
    /// What edns-tcp-keepalive answers carry ([tcp] waits for a restart).
    tcp_idle_timeout: std::time::Duration,
    cookies: heron_proto::cookie::CookieSettings,
    /// The query log's layer (off unless `[dnstap]` turns it on).
    tap: Arc<Tap>,
}

impl Queries {
    fn new(
        settings: &Settings,
        primary: Arc<Primary>,
        keys: Arc<SharedKeys>,
        notify_in: mpsc::UnboundedSender<NotifyReceived>,
        tap: Arc<Tap>,
    ) -> Queries {
        Queries {
            primary,
            keys,
            secondaries: SharedOrigins::default(),
            notify_in: Some(notify_in),
            query_policy: SharedQueryPolicy::new(settings.shield.query_policy.clone()),
            nsid: settings.shield.nsid.clone(),
            tcp_idle_timeout: settings.server.tcp.idle_timeout,
            cookies: settings.cookies.clone(),
            tap,
        }
    }

    fn service(self, catalog: SharedCatalog, config: AnswerConfig) -> Service {
        let cookies = Cookies::new(
            &self.cookies,
            cookies::random_secret(),
            unix_now(),
            config.max_udp_payload,
        );
        let processor = Processor::new(catalog, config, self.primary, Arc::default())
            .with_keys(self.keys)
            .with_shared_secondaries(self.secondaries)
            .with_shared_query_policy(self.query_policy)
            .with_nsid(self.nsid)
            .with_tcp_idle_timeout(self.tcp_idle_timeout)
            .with_cookies(cookies)
            .with_shared_tap(self.tap);
        Service::new(processor, self.notify_in)
    }
}

/// How long the start waits for the kept copies of secondary zones to be
/// served before it answers all the same.
const KEPT_COPIES_WAIT: Duration = Duration::from_secs(60);

/// What the process is given besides what it serves.
struct ProcessSettings {
    /// The control socket, bound at the start.
    control: EarlyControl,
    control_socket: Option<PathBuf>,
    /// Whom to become once every socket is bound.
    run_as: Option<RunAs>,
    /// The query log, ended last.
    query_log: Arc<QueryLog>,
    /// Where the Prometheus endpoint listens, if anywhere.
    metrics: Option<config::metrics::MetricsSettings>,
}

/// Starts the query log's writer (a file is created here, a socket is
/// connected to by the writer's thread); returns it and the processor's
/// Everything loaded and built before the first socket is opened.
struct Prepared {
    catalog: Catalog,
    files: ZoneFiles,
    transfers: Transfers,
    queries: Queries,
    secondaries: secondary::Secondaries,
}

/// The transports' threads and tasks, and what stops them.
struct Transports {
    threads: Vec<std::thread::JoinHandle<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    xdp: Option<heron_server::xdp::XdpService>,
    limiter: Arc<tcp::ConnectionLimiter>,
    /// Tells the UDP and XDP workers to stop.
    stop: Arc<AtomicBool>,
    /// Tells every task to stop.
    shutdown: watch::Sender<bool>,
    /// TCP and TLS, when on Heron's own event loops (`[tcp] event-loop`).
    loops: Option<tcp::event_loop::Loops>,
}

async fn serve(
    server: ServerConfig,
    mut process: ProcessSettings,
    prepared: Prepared,
) -> Result<(), String> {
    let Prepared {
        catalog,
        files,
        transfers,
        queries,
        secondaries,
    } = prepared;
    // Secondaries may have missed changes while we were down: told once
    // we listen, or they would find nobody to transfer from.
    let every_zone = transfers.journal_changes(&Catalog::new(), &catalog);
    let catalog: SharedCatalog = Arc::new(ArcSwap::from_pointee(catalog));
    let transfers = Arc::new(transfers);
    let secondary_zones = secondaries.zones.len();
    let secondary_origins = queries.secondaries.clone();
    let (keeper, refresh_commands) =
        start_secondaries(secondaries, &secondary_origins, &catalog, &transfers).await;
    let refresh_stop = refresh_commands.clone();
    let service = Arc::new(
        (queries.service(catalog.clone(), server.answer.clone()))
            .with_zone_stats(transfers.zone_stats.clone())
            .with_updates(crate::runtime::update::start(
                catalog.clone(),
                transfers.clone(),
            )),
    );
    let mut transports = start_transports(&server, &service, &transfers)?;
    let metrics = bind_metrics(process.metrics.as_ref())?;
    // Every socket is bound (the control socket first of all).
    give_up_privileges(&process, &server, &files)?;
    notify_at_start(every_zone, &catalog, &secondary_origins, &transfers);
    log_ready(catalog.load().len(), secondary_zones, server.workers);
    settle_once_answering(&catalog);
    let files = Arc::new(std::sync::Mutex::new(files));
    let stop_asked = Arc::new(tokio::sync::Notify::new());
    let (xdp_listeners, xdp_lost) = xdp_seen(&server, &transports);
    // What `heron ctl` and the metrics endpoint see of the server.
    let controller = Arc::new(crate::control::commands::Controller {
        catalog: catalog.clone(),
        files: files.clone(),
        transfers: transfers.clone(),
        secondaries: secondary_origins,
        listeners: server.listen.clone(),
        tls_listeners: server.tls.as_ref().map_or(Vec::new(), |t| t.listen.clone()),
        xdp_listeners,
        xdp_lost,
        workers: server.workers,
        stop: stop_asked.clone(),
        refresh: refresh_commands,
        service: service.clone(),
        connections: transports.limiter.clone(),
    });
    let shutdown = transports.shutdown.subscribe();
    let tasks = [
        // Taken from its guard only now: a start that fails before (a
        // port taken) removes the socket file (black-box finding DG-4).
        serve_control(process.control.take_for_tokio()?, &controller, &shutdown),
        Some(log_left_over(service.clone(), shutdown.clone())),
        Some(write_catalogs_again(shutdown.clone())),
        serve_metrics(metrics, controller, shutdown),
    ];
    transports.tasks.extend(tasks.into_iter().flatten());
    wait_for_signals(&catalog, &files, &transfers, &stop_asked).await;
    tracing::info!("shutting down");
    notify::stopping();
    stop_refreshing(refresh_stop).await;
    stop_transports(transports).await;
    log_rrl_totals(&service, server.rrl.is_some());
    finish_writing(&process.query_log, keeper, &transfers);
    Ok(())
}

/// Stops the secondary zones' transfers (what they would bring is not
/// kept: the next start asks again), waiting a second at most: the kept
/// copies to write at the exit are only those received before.
async fn stop_refreshing(
    commands: Option<mpsc::UnboundedSender<heron_xfr::secondary::refresh::Command>>,
) {
    let Some(commands) = commands else {
        return;
    };
    let (stopped, done) = tokio::sync::oneshot::channel();
    if commands
        .send(heron_xfr::secondary::refresh::Command::Stop(stopped))
        .is_ok()
    {
        let _ = tokio::time::timeout(Duration::from_secs(1), done).await;
    }
}

/// Once listening, tells our secondaries of every zone loaded (they may
/// have missed changes while we were down; `every_zone` is not held past
/// here, or a reload could not free it), and of the secondary zones
/// served before we listened: their kept copies are served before the
/// listeners open ([`start_secondaries`]), so the NOTIFYs of their
/// publishing (a signed one re-signed at start, say) reached secondaries
/// that could not transfer yet.
fn notify_at_start(
    every_zone: Vec<Arc<Zone>>,
    catalog: &SharedCatalog,
    origins: &SharedOrigins,
    transfers: &Transfers,
) {
    transfers.notify(&every_zone);
    drop(every_zone);
    let origins = origins.load();
    let served: Vec<Arc<Zone>> = (catalog.load().zones())
        .filter(|zone| origins.contains(&zone.origin().to_lowercase()))
        .cloned()
        .collect();
    transfers.notify(&served);
}

/// The XDP listeners as `heron ctl status` names them, and the
/// interfaces lost since the start.
fn xdp_seen(server: &ServerConfig, transports: &Transports) -> (Vec<String>, XdpLost) {
    let listeners = (server.xdp.iter().flat_map(|x| &x.listen))
        .map(|l| format!("{}@{}", l.interface, l.port))
        .collect();
    let lost = (transports.xdp.as_ref()).map_or_else(Arc::default, |x| x.lost.clone());
    (listeners, lost)
}

type XdpLost = Arc<std::sync::Mutex<Vec<String>>>;

/// Starts the secondary zones' refresh task and waits until their kept
/// copies are served: a zone answered SERVFAIL for the second that took
/// (black-box finding, 75% of queries at once with 100,000 secondary
/// zones), and resolvers cache that. Gives up waiting, and says so,
/// after [`KEPT_COPIES_WAIT`].
async fn start_secondaries(
    secondaries: secondary::Secondaries,
    origins: &SharedOrigins,
    catalog: &SharedCatalog,
    transfers: &Arc<Transfers>,
) -> (
    Option<heron_xfr::secondary::keeper::Keeper>,
    Option<mpsc::UnboundedSender<heron_xfr::secondary::refresh::Command>>,
) {
    let Some((keeper, commands, started)) =
        secondary::start(secondaries, origins.clone(), catalog, transfers)
    else {
        return (None, None);
    };
    if tokio::time::timeout(KEPT_COPIES_WAIT, started)
        .await
        .is_err()
    {
        tracing::warn!(
            "the kept copies of secondary zones were not all served within {} s; answering \
             meanwhile",
            KEPT_COPIES_WAIT.as_secs()
        );
    }
    (Some(keeper), Some(commands))
}

/// Binds every listener of `server` and starts its workers and tasks.
fn start_transports(
    server: &ServerConfig,
    service: &Arc<Service>,
    transfers: &Transfers,
) -> Result<Transports, String> {
    warn_of_shared_ports(server);
    let stop = Arc::new(AtomicBool::new(false));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let limiter =
        tcp::ConnectionLimiter::new(server.tcp.clone(), transfers.primary.transfer_clients());
    // A reload gives it the secondaries it reads.
    let _ = transfers.connections.set(limiter.clone());
    let spawn_stream = |listener, tls| {
        tokio::spawn(tcp::serve(
            listener,
            tls,
            service.clone(),
            limiter.clone(),
            shutdown_rx.clone(),
        ))
    };
    let mut threads = Vec::new();
    let mut tasks = vec![tokio::spawn(tcp::release_memory_after_peaks(
        limiter.clone(),
        shutdown_rx.clone(),
    ))];
    let own_loops = server.tcp.event_loop;
    for &addr in &server.listen {
        let workers = udp::spawn_workers(addr, server, service.clone(), stop.clone())
            .map_err(|e| format!("cannot listen on UDP {addr}: {e}"))?;
        threads.extend(workers);
        if !own_loops {
            let listener =
                tcp::bind(addr).map_err(|e| format!("cannot listen on TCP {addr}: {e}"))?;
            tasks.push(spawn_stream(listener, None));
        }
        if !own_loops {
            tracing::info!("answering on {addr} (UDP and TCP)");
        }
    }
    // After the sockets: a server that cannot listen fails before it
    // attaches anything to an interface.
    let mut xdp = match &server.xdp {
        Some(xdp) => Some(
            heron_server::xdp::start(xdp, server, service.clone(), stop.clone())
                .map_err(|e| format!("cannot start XDP: {e}"))?,
        ),
        None => None,
    };
    if let Some(xdp) = &mut xdp {
        threads.extend(std::mem::take(&mut xdp.threads));
    }
    let loops = match own_loops {
        true => Some(start_tcp_loops(server, service, &limiter)?),
        false => None,
    };
    // Said once both sockets of an address are bound.
    if own_loops {
        (server.listen.iter()).for_each(|addr| tracing::info!("answering on {addr} (UDP and TCP)"));
    }
    for (addr, acceptor) in tls_listeners(server) {
        if !own_loops {
            let listener =
                tcp::bind(addr).map_err(|e| format!("cannot listen on TLS {addr}: {e}"))?;
            tasks.push(spawn_stream(listener, Some(acceptor)));
        }
        tracing::info!("answering on {addr} (DNS over TLS)");
    }
    Ok(Transports {
        threads,
        tasks,
        xdp,
        limiter,
        stop,
        shutdown,
        loops,
    })
}

/// Says so when another process already listens where this server is to:
/// both bind with `SO_REUSEPORT`, so the kernel would share the queries
/// between them without an error (a second server started by mistake).
/// Not refused: starting the new server before stopping the old one is a
/// way to restart without dropping a query.
fn warn_of_shared_ports(server: &ServerConfig) {
    use heron_server::ports::{Transport, shared_with_another};
    let tls = server.tls.iter().flat_map(|t| t.listen.iter());
    let udp = server.listen.iter().map(|&a| (a, Transport::Udp));
    let tcp = server
        .listen
        .iter()
        .chain(tls)
        .map(|&a| (a, Transport::Tcp));
    for (addr, transport) in udp.chain(tcp).filter(|&(a, t)| shared_with_another(a, t)) {
        let name = match transport {
            Transport::Udp => "UDP",
            Transport::Tcp => "TCP",
        };
        tracing::warn!(
            "{name} {addr} is already bound by another process: the kernel shares its \
             {name} traffic between that process and this server (SO_REUSEPORT); stop the \
             other one unless it is being replaced by this one"
        );
    }
}

/// TCP and TLS on one event loop per worker, each with its own listening
/// sockets (`SO_REUSEPORT`).
fn start_tcp_loops(
    server: &ServerConfig,
    service: &Arc<Service>,
    limiter: &Arc<tcp::ConnectionLimiter>,
) -> Result<tcp::event_loop::Loops, String> {
    use tcp::event_loop::Listen;
    let plain = server.listen.iter().map(|&addr| Listen { addr, tls: None });
    let tls = server.tls.iter().flat_map(|t| {
        let tls = Some(t.settings.clone());
        t.listen.iter().map(move |&addr| Listen {
            addr,
            tls: tls.clone(),
        })
    });
    let listen: Vec<Listen> = plain.chain(tls).collect();
    tcp::event_loop::start(&listen, server.workers, service.clone(), limiter.clone())
        .map_err(|e| format!("cannot listen on TCP: {e}"))
}

/// Stops the workers and tasks, then detaches the XDP programs.
async fn stop_transports(mut transports: Transports) {
    transports.stop.store(true, Ordering::Relaxed);
    let _ = transports.shutdown.send(true);
    if let Some(loops) = transports.loops {
        loops.stop();
        transports.threads.extend(loops.threads);
    }
    for task in transports.tasks {
        let _ = task.await;
    }
    for thread in transports.threads {
        let _ = thread.join();
    }
    // The workers are done with the sockets: the programs go.
    if let Some(xdp) = transports.xdp {
        drop(xdp);
        tracing::info!("XDP programs detached");
    }
}

/// Every log interval, says what refusal bursts that stopped left out of
/// the log ([`heron_server::processor::Processor::log_left_over`]).
fn log_left_over(
    service: Arc<Service>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    use heron_server::processor::log_limit::LOG_INTERVAL;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(LOG_INTERVAL));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = heron_proto::time::unix_now();
                    service.processor.log_left_over(now);
                    heron_server::tcp::log_refused_left_over(now);
                }
                _ = shutdown.changed() => return,
            }
        }
    })
}

/// Every minute, writes again the generated catalogs' files whose write
/// failed ([`crate::plan::catalog_producer::write_failed_again`]).
fn write_catalogs_again(mut shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    use crate::plan::catalog_producer::{write_failed_again, writes_failed};
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => if writes_failed() {
                    crate::background::run("catalog-write", write_failed_again).await;
                },
                _ = shutdown.changed() => return,
            }
        }
    })
}

/// The metrics endpoint's socket, if `[metrics]` is on.
fn bind_metrics(
    metrics: Option<&config::metrics::MetricsSettings>,
) -> Result<Option<(tokio::net::TcpListener, bool, heron_server::http::Allowed)>, String> {
    let Some(m) = metrics else {
        return Ok(None);
    };
    let listener = tcp::bind(m.listen)
        .map_err(|e| format!("cannot listen for metrics on {}: {e}", m.listen))?;
    Ok(Some((listener, m.zone_metrics, m.allow.clone())))
}

/// The control socket's task, if there is a socket.
fn serve_control(
    control: Option<(tokio::net::UnixListener, PathBuf)>,
    controller: &Arc<crate::control::commands::Controller>,
    shutdown: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let (listener, path) = control?;
    let controller = controller.clone();
    Some(tokio::spawn(control::serve(
        listener,
        path,
        shutdown.clone(),
        move |request| {
            let controller = controller.clone();
            async move { controller.handle(request).await }
        },
    )))
}

/// The metrics endpoint's task, if it is on.
fn serve_metrics(
    metrics: Option<(tokio::net::TcpListener, bool, heron_server::http::Allowed)>,
    controller: Arc<crate::control::commands::Controller>,
    shutdown: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let (listener, zone_metrics, allowed) = metrics?;
    if let Ok(addr) = listener.local_addr() {
        tracing::info!("metrics on http://{addr}/metrics");
    }
    let scrape = move |format| {
        let controller = controller.clone();
        async move { crate::control::metrics::scrape(&controller, zone_metrics, format).await }
    };
    Some(tokio::spawn(crate::control::metrics::http::serve(
        listener, allowed, scrape, shutdown,
    )))
}

/// `zones` counts every zone served now, the secondaries with a kept copy
/// among them; `secondary_zones` every secondary, served yet or not.
fn log_ready(zones: usize, secondary_zones: usize, workers: usize) {
    tracing::info!(
        "ready: serving {zones} zones ({secondary_zones} secondary zones configured) with {workers} worker{}, {} ms after start",
        if workers == 1 { "" } else { "s" },
        crate::process_start::started().elapsed().as_millis()
    );
}

/// Says what response rate limiting did over the run, when it is on.
fn log_rrl_totals(service: &Service, rrl_on: bool) {
    if !rrl_on {
        return;
    }
    let limited = service.rrl.snapshot();
    tracing::info!(
        "response rate limiting: {} responses dropped, {} slipped, {} would have been (log-only)",
        limited.dropped,
        limited.slipped,
        limited.log_only
    );
}

/// The last writes before the process ends: the query log, the kept
/// copies of zones received in the last moments, the journals.
fn finish_writing(
    query_log: &QueryLog,
    keeper: Option<heron_xfr::secondary::keeper::Keeper>,
    transfers: &Transfers,
) {
    if let Some(totals) = query_log.finish() {
        tracing::info!(
            "dnstap: {} messages written, {} dropped",
            totals.written,
            totals.dropped
        );
    }
    if let Some(keeper) = keeper
        && !keeper.flush(Duration::from_secs(10))
    {
        tracing::warn!(
            "kept copies of secondary zones not all written within 10 s: a zone whose copy is \
             not written is transferred again at the next start (until then it serves the copy \
             written before, or SERVFAIL if none was)"
        );
    }
    let failing = heron_xfr::secondary::keeper::failing_copies();
    if let Some((first, why)) = failing.first() {
        tracing::error!(
            "{} kept copies of secondary zones not written ({}: {why}): a restart serves their older copies",
            failing.len(),
            first.display()
        );
    }
    if !transfers.signed_copies.flush(Duration::from_secs(10)) {
        tracing::warn!("signed copies of zones not all written within 10 s");
    }
    // A journal file a failed write left a step short of is written
    // again whole now, if the disk has room again (else it was said).
    transfers.primary.heal_journal_files();
    use heron_xfr::journal::files::Flushed;
    match transfers
        .primary
        .flush_all_journal_files(Duration::from_secs(10))
    {
        Flushed::All => {}
        Flushed::TakeBacksOnly => tracing::warn!(
            "journal files not all cut back after updates answered SERVFAIL (see the errors above): every update answered NOERROR is in them, and a restart may also replay refused ones whose steps reached the disk"
        ),
        Flushed::Unwritten => tracing::error!(
            "journal files not all written (see the errors above): a restart may serve zones without their last changes"
        ),
    }
}

/// Once every socket is bound. While still privileged: the limit that
/// lets a reload kept from idle CPU be raised once no capability is left.
/// Then each file a reload reads again (`files`', `server`'s TLS
/// certificate and key) that the user cannot read is warned of.
fn give_up_privileges(
    process: &ProcessSettings,
    server: &ServerConfig,
    files: &ZoneFiles,
) -> Result<(), String> {
    let (run_as, control_socket) = (process.run_as.as_ref(), process.control_socket.as_deref());
    if !background::allow_the_raise() {
        tracing::debug!("RLIMIT_NICE stays below 10: background work will not go idle");
    }
    let Some(run_as) = run_as else {
        return Ok(());
    };
    if heron_sys::process::is_root() {
        let signed = files.signed_zones();
        let signed = signed.iter().chain(files.signed_secondaries());
        let dirs = signed.map(|(_, s)| s.key_directory.as_path());
        crate::privileges::hand_over_key_directories(dirs, run_as.ids);
        // Bound as root: the server's user may use it (`heron ctl` as that
        // user, as the docs say; black-box finding: only root could).
        if let Some(socket) = control_socket {
            crate::privileges::hand_over(socket, run_as.ids);
        }
    }
    drop_privileges(run_as)?;
    let tls_files = server.tls.iter().flat_map(|t| t.files.iter().cloned());
    warn_of_unreadable(files.files_read_again(), tls_files, &run_as.user);
    Ok(())
}

/// Warns, from a thread of its own (100,000 zone files take a while to
/// open), of each file a reload reads again that the user cannot.
fn warn_of_unreadable(
    zone_files: Vec<PathBuf>,
    tls_files: impl Iterator<Item = PathBuf>,
    user: &str,
) {
    let (files, user): (Vec<PathBuf>, String) = (
        zone_files.into_iter().chain(tls_files).collect(),
        user.into(),
    );
    let checked = std::thread::Builder::new()
        .name("readable".into())
        .spawn(move || {
            for warning in crate::privileges::unreadable(&files, &user) {
                tracing::warn!("{warning}");
            }
        });
    if let Err(e) = checked {
        tracing::debug!("files not checked for the user: {e}");
    }
}

/// Becomes `[server] user` (and `group`) in every thread, keeping no
/// capability. Not being root is fine: then only the same user is allowed.
fn drop_privileges(run_as: &RunAs) -> Result<(), String> {
    let (user, ids) = (&run_as.user, run_as.ids);
    // The user's own groups too, as initgroups(3) gives them (NSD, BIND,
    // systemd's User=): a file readable through a group stays readable.
    let groups = heron_sys::privileges::groups_of(user, ids.gid).unwrap_or_else(|e| {
        tracing::warn!(
            "the groups of user {user}: {e}; only group {} kept",
            ids.gid
        );
        Vec::new()
    });
    heron_sys::privileges::drop_to(ids, &groups)
        .map_err(|e| format!("cannot become user '{user}': {e}"))?;
    tracing::info!(
        "running as user {user} (uid {}, gid {}, groups {groups:?})",
        ids.uid,
        ids.gid
    );
    Ok(())
}

/// Each TLS address with what its handshakes use.
fn tls_listeners(server: &ServerConfig) -> Vec<(std::net::SocketAddr, tls::TlsAcceptor)> {
    let Some(tls) = &server.tls else {
        return Vec::new();
    };
    let acceptor = tls::TlsAcceptor::from(tls.settings.clone());
    tls.listen.iter().map(|&a| (a, acceptor.clone())).collect()
}

/// Tells the service manager the server is ready, then serves until
/// SIGTERM or SIGINT or the control socket's `stop`; on SIGHUP, reloads
/// (see [`reload`]).
async fn wait_for_signals(
    catalog: &SharedCatalog,
    files: &Arc<std::sync::Mutex<ZoneFiles>>,
    transfers: &Arc<Transfers>,
    stop_asked: &tokio::sync::Notify,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    // A SIGHUP from now on is this handler's alone (regression hunt: one
    // sent right after READY=1 was also taken as held, two reloads).
    heron_sys::process::release_hangups();
    let held = heron_sys::process::hangup_held();
    // Only now: a service manager may send SIGTERM or SIGHUP at once.
    notify::ready();
    if held {
        reload(
            catalog,
            files,
            transfers,
            "SIGHUP while starting",
            Selection::default(),
        )
        .await;
    }
    // Signed zones' key rollovers, until the server stops.
    let (c, f, t) = (catalog.clone(), files.clone(), transfers.clone());
    let _rollovers = AbortOnDrop(tokio::spawn(crate::runtime::rollover::drive(c, f, t)));
    let mut resign = tokio::time::interval(crate::plan::signing::REFRESH_CHECK);
    resign.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resign.tick().await;
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
            _ = stop_asked.notified() => return,
            _ = hup.recv() => {
                reload(catalog, files, transfers, "SIGHUP", Selection::default()).await;
            }
            _ = resign.tick() => {
                // Off the runtime and without the zone files' lock: the
                // walk reads every signature of every signed zone.
                let signed = files.lock().unwrap().signed_zones();
                let current = catalog.load_full();
                let due = background::run("resign-check", move || {
                    crate::plan::signing::zones_due(&current, signed)
                })
                .await;
                if !due.is_empty() {
                    let selection = Selection {
                        zones: Some(due),
                        force: true,
                        from_served: true,
                    };
                    reload(catalog, files, transfers, "signatures due", selection).await;
                }
            }
        }
    }
}

/// Ends a task when dropped (when the function holding it returns).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::connections_within;

    /// Under an open-files limit short of what `max-connections` needs,
    /// the connections served leave the rest their descriptors; never
    /// more than configured, never none.
    #[test]
    fn connections_are_lowered_to_what_the_open_files_limit_leaves() {
        assert_eq!(connections_within(1000, 150), 75);
        assert_eq!(connections_within(10_000, 4096), 3072);
        assert_eq!(connections_within(10, 4096), 10);
        assert_eq!(connections_within(1000, 1), 1);
        assert_eq!(connections_within(1000, 0), 1);
    }
}
