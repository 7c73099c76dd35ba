//! `heron check-zone` and `heron check-config`.

use std::path::Path;
use std::process::ExitCode;

use heron_dnssec::zonemd::Verdict;
use heron_proto::Name;
use heron_zone::{Problem, Severity, load_zone_file};

use crate::config;

/// Prints each problem of one zone; true if it loads, and its ZONEMD (if
/// it has one Heron can check) matches, as `heron serve` requires. The
/// dates of its signatures are not looked at when Heron signs it
/// (`signed_here`): it signs it anew (black-box finding DG-3).
fn report_zone(file: &Path, origin: &Name, signed_here: bool) -> bool {
    // Read as the server reads a zone it signs: its denial chain is the
    // signer's, not looked for (black-box finding DH-5).
    let load = match signed_here {
        true => heron_zone::load_zone_file_to_sign,
        false => load_zone_file,
    };
    let loaded = load(file, origin).and_then(|loaded| {
        match heron_dnssec::zonemd::verify(&loaded.zone) {
            Verdict::Failed(why) => Err(vec![Problem {
                severity: Severity::Error,
                // The file as a whole: the digest is over all of it.
                location: Some(heron_zone::zonefile::Location {
                    file: file.into(),
                    line: 0,
                }),
                message: format!("ZONEMD verification failed: {why}"),
            }]),
            _ => Ok(loaded),
        }
    });
    match loaded {
        Ok(loaded) => {
            print_problems(&loaded.warnings);
            let now = heron_proto::time::unix_now();
            let dates = (!signed_here)
                .then(|| heron_dnssec::validity::warning(&loaded.zone, now))
                .flatten();
            if let Some(dates) = dates {
                outln!("{}: warning: {dates}", file.display());
            }
            outln!(
                "{}: zone {} OK: serial {}, {} records",
                file.display(),
                origin,
                loaded.zone.serial(),
                loaded.zone.record_count()
            );
            true
        }
        Err(problems) => {
            print_problems(&problems);
            outln!("{}: zone {} has errors", file.display(), origin);
            false
        }
    }
}

fn print_problems(problems: &[Problem]) {
    for p in problems {
        outln!("{p}");
    }
}

pub fn zone(file: &Path, origin: &str) -> ExitCode {
    let origin = match Name::parse(origin) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bad origin '{origin}': {e}");
            return ExitCode::from(2);
        }
    };
    exit(report_zone(file, &origin, false))
}

pub fn config(file: &Path) -> ExitCode {
    let settings = match config::load(file) {
        Ok(s) => s,
        Err(errors) => {
            errors.iter().for_each(|e| outln!("{e}"));
            // The zone files too, so that one run says every problem.
            for (origin, zone_file) in primary_zone_files(file) {
                report_zone(&zone_file, &origin, false);
            }
            return ExitCode::FAILURE;
        }
    };
    heron_zone::zonefile::set_max_load_size(settings.max_zone_file_size);
    settings
        .warnings
        .iter()
        .chain(&missing_xdp_interfaces(&settings.server))
        .chain(&xdp_ports_without_tcp(&settings.server))
        .for_each(|w| outln!("warning: {w}"));
    let mut ok = true;
    let refused = crate::plan::key_state::unsigned_with_ds_at_start(&settings, file);
    let moved = crate::plan::key_state::moved_keys_at_start(&settings, file);
    let (keys, unread) = crate::plan::key_state::keys_refused(&settings);
    unread.iter().for_each(|w| outln!("warning: {w}"));
    for refused in refused.into_iter().chain(moved).chain(keys) {
        outln!("{}: error: {refused}", file.display());
        ok = false;
    }
    let problems = dnstap_file_problem(settings.dnstap.as_ref())
        .into_iter()
        .chain(settings.control.as_deref().and_then(control_socket_problem));
    for problem in problems {
        outln!("{}: error: {problem}", file.display());
        ok = false;
    }
    for spec in &settings.zones {
        ok &= report_zone(&spec.file, &spec.origin, spec.signing.is_some());
    }
    if ok {
        // Generated catalogs are served primary zones too (as `ctl status`
        // counts them; black-box finding: one fewer here).
        let files = settings.zones.len() + settings.generated_catalogs.len();
        let secondaries = settings.secondaries.len();
        match secondaries {
            0 => outln!("{}: OK, {files} zones", file.display()),
            _ => outln!(
                "{}: OK, {files} zones and {secondaries} secondary zones",
                file.display()
            ),
        }
    }
    exit(ok)
}

/// The files of the `[[zone]]` entries that name an origin and a file
/// and no primaries (a secondary's file is its kept copy), read from the
/// text alone: a configuration with errors elsewhere still has its zone
/// files checked. Nothing when the text is not TOML.
fn primary_zone_files(config: &Path) -> Vec<(Name, std::path::PathBuf)> {
    let Ok(text) = heron_sys::files::read_settings_text(config) else {
        return Vec::new();
    };
    let Ok(table) = toml::from_str::<toml::Table>(&text) else {
        return Vec::new();
    };
    let base = config.parent().unwrap_or(Path::new("."));
    let entries = table.get("zone").and_then(toml::Value::as_array);
    (entries.into_iter().flatten())
        .filter_map(|entry| {
            let entry = entry.as_table().filter(|e| !e.contains_key("primaries"))?;
            // A catalog Heron generates: its file is written, not read
            // (black-box finding BF-1: "cannot read zone file" after
            // any other error).
            if entry.get("catalog").and_then(toml::Value::as_str) == Some("generate") {
                return None;
            }
            let origin = Name::parse(entry.get("origin")?.as_str()?).ok()?;
            Some((origin, base.join(entry.get("file")?.as_str()?)))
        })
        .collect()
}

/// `[xdp]` interfaces this machine does not have, or that are loopback
/// ones: `heron serve` would stop at them. A warning, not an error: a configuration may be checked on
/// another machine than the one that serves it.
fn missing_xdp_interfaces(server: &heron_server::ServerConfig) -> Vec<String> {
    let Some(xdp) = &server.xdp else {
        return Vec::new();
    };
    let names: std::collections::BTreeSet<&str> =
        xdp.listen.iter().map(|l| l.interface.as_str()).collect();
    let problem = |name: &str| match heron_sys::xdp::Interface::find(name) {
        Err(e) => Some(format!("{e} on this machine")),
        Ok(found) if found.loopback => Some(heron_server::xdp::loopback_refused(name)),
        Ok(_) => None,
    };
    (names.into_iter().filter_map(problem))
        .map(|e| format!("[xdp] listen: {e}: `heron serve` here would not start"))
        .collect()
}

/// XDP answers UDP only: an answer too long for it is truncated, and the
/// client asks again over TCP on the same port, which a `[server] listen`
/// address must take (an IPv6-only `[::]` takes no IPv4). Said for each
/// XDP port no listen address of a matching family has (black-box
/// finding: truncated answers sent clients where nothing listened).
fn xdp_ports_without_tcp(server: &heron_server::ServerConfig) -> Vec<String> {
    let Some(xdp) = &server.xdp else {
        return Vec::new();
    };
    let ports: std::collections::BTreeSet<u16> = xdp.listen.iter().map(|l| l.port).collect();
    let takes_ipv4 = |a: &std::net::SocketAddr| a.is_ipv4();
    (ports.into_iter())
        .filter(|port| {
            !server
                .listen
                .iter()
                .any(|a| a.port() == *port && takes_ipv4(a))
        })
        .map(|port| {
            format!(
                "[xdp] port {port}: no [server] listen IPv4 address on port {port}, so TCP \
                 there (where clients ask again after a truncated answer) is not served"
            )
        })
        .collect()
}

/// Something other than a socket where the control socket goes (a
/// folder, a file, a link): `heron serve` refuses to start over it and
/// never replaces it, so check-config says so too.
fn control_socket_problem(path: &Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let found = std::fs::symlink_metadata(path).ok()?;
    (!found.file_type().is_socket()).then(|| {
        format!(
            "[server] control {}: something that is not a socket is there; heron serve \
             would not start (it never replaces it): remove it or choose another path",
            path.display()
        )
    })
}

/// Why `heron serve` could not create the `[dnstap] file`, if it could
/// not: its folder is not writable here (a read-only file system, as
/// systemd's `ProtectSystem=strict` makes /var/log, or permissions). Asked
/// of the file system itself, with a file made and removed at once, so
/// that the unit's pre-start check sees what the server would.
fn dnstap_file_problem(dnstap: Option<&config::dnstap::Dnstap>) -> Option<String> {
    let heron_server::dnstap::Output::File(path) = &dnstap?.writer.output else {
        return None;
    };
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let probe = folder.join(format!(".heron-check-{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match made {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            let continued = heron_server::dnstap::check_continuable(path);
            (continued.err()).map(|e| format!("[dnstap] file {}: {e}", path.display()))
        }
        Err(e) => Some(format!(
            "[dnstap] file {}: cannot create a file in {} ({e}): heron serve would not start; \
             under systemd, put it in /var/log/heron (LogsDirectory=heron)",
            path.display(),
            folder.display()
        )),
    }
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
