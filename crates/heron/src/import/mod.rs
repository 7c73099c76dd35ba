//! `heron import --from nsd|knot|bind FILE`: another server's
//! configuration read into one model ([`model::Imported`]) by a parser
//! per source, then written as heron.toml by one writer. Every setting
//! that could not be carried over is listed on stderr with its file and
//! line and what to do; secrets go into the written file only (mode
//! 0600), never to the terminal.

pub mod bind;
mod bind_syntax;
pub mod knot;
mod knot_syntax;
pub mod model;
pub mod nsd;
mod signing;
pub mod source;
#[cfg(test)]
mod testutil;
pub mod writer;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

use model::{Imported, NoteKind};
use source::ImportError;

/// Which server's configuration is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum From {
    /// nsd.conf (NSD 4)
    Nsd,
    /// knot.conf (Knot DNS 3)
    Knot,
    /// named.conf (BIND 9)
    Bind,
}

impl From {
    fn name(self) -> &'static str {
        match self {
            From::Nsd => "nsd",
            From::Knot => "knot",
            From::Bind => "bind",
        }
    }
}

/// Reads `file` as `from` writes it, in Heron's terms, with the checks
/// every source shares applied.
pub fn import(from: From, file: &Path) -> Result<Imported, ImportError> {
    let mut imported = match from {
        From::Nsd => nsd::parse(file)?,
        From::Knot => knot::parse(file)?,
        From::Bind => bind::parse(file)?,
    };
    finish(&mut imported);
    tsig_algorithms(&mut imported)?;
    Ok(imported)
}

/// The TSIG algorithms heron.toml takes.
const ALGORITHMS: &[&str] = &[
    "hmac-sha256",
    "hmac-sha384",
    "hmac-sha512",
    "hmac-sha224",
    "hmac-sha1",
    "hmac-md5",
];

/// Each key's algorithm as heron.toml spells it (BIND's
/// `HMAC-MD5.SIG-ALG.REG.INT` is `hmac-md5`); one Heron lacks is an
/// error, since the zones that name the key could not be translated.
/// The key of `keys` (names as defined) that `name` refers to: key names
/// are domain names to BIND and Knot, so case and a final dot do not
/// matter (`K.` is `k`).
pub(crate) fn defined_key<'k>(
    keys: impl IntoIterator<Item = &'k String>,
    name: &str,
) -> Option<&'k String> {
    let bare = |n: &str| n.trim_end_matches('.').to_ascii_lowercase();
    let wanted = bare(name);
    keys.into_iter().find(|k| bare(k) == wanted)
}

fn tsig_algorithms(config: &mut Imported) -> Result<(), ImportError> {
    for key in &mut config.keys {
        let name = key.algorithm.to_ascii_lowercase();
        let name = name
            .trim_end_matches('.')
            .trim_end_matches(".sig-alg.reg.int");
        if !ALGORITHMS.contains(&name) {
            // An algorithm name is short and plain: anything else may be
            // the secret written in its place, and is not shown.
            let plain = key.algorithm.len() <= 32
                && (key.algorithm.chars()).all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            let shown = match plain {
                true => key.algorithm.as_str(),
                false => "(not shown: it is not an algorithm name; the secret in its place?)",
            };
            return Err(ImportError::at(
                &key.loc,
                format!(
                    "key {}: algorithm {shown} is not one Heron has ({})",
                    key.name,
                    ALGORITHMS.join(", ")
                ),
            ));
        }
        key.algorithm = name.to_string();
    }
    Ok(())
}

/// The checks every source shares: one zone per name, keys that exist,
/// journals that do not take over the old server's files.
fn finish(config: &mut Imported) {
    let mut seen = HashSet::new();
    let zones = std::mem::take(&mut config.zones);
    for zone in zones {
        let key = zone.origin.to_ascii_lowercase();
        if seen.insert(key) {
            config.zones.push(zone);
        } else if let Some(loc) = &zone.loc {
            config.untranslated(
                loc,
                format!("zone {}", zone.origin),
                "configured twice; the first was kept",
            );
        }
    }
    let mut notes = Vec::new();
    let mut to_do = Vec::new();
    for zone in &mut config.zones {
        let Some(file) = &zone.file else { continue };
        let journal = PathBuf::from(format!("{}.jnl", file.display()));
        // Heron's own journal (Heron ran beside the old server on its
        // files, and the import runs again) is Heron's to keep.
        let others = heron_xfr::journal::file::holds_other_data(&journal).unwrap_or(true);
        if zone.journal_off || !journal.exists() || !others {
            continue;
        }
        let Some(loc) = zone.loc.clone() else {
            continue;
        };
        let setting = format!("zone {}: journal {}", zone.origin, journal.display());
        if !zone.allow_update.is_empty() {
            // Updates need the journal on disk (`journal = false` is an
            // error with allow-update), and Heron never writes over
            // another server's file: the zone's updates fail until it is
            // moved (black-box finding DB-6: nothing was said).
            to_do.push((loc, setting));
        } else if !zone.allow_transfer.is_empty() {
            zone.journal_off = true;
            notes.push((loc, setting));
        }
    }
    for (loc, setting) in notes {
        config.untranslated(
            &loc,
            setting,
            "the old server's journal is there: Heron keeps this zone's IXFR history in \
             memory (journal = false) so as not to replace it; once the old server is \
             gone, remove the file and the line",
        );
    }
    for (loc, setting) in to_do {
        config.step_to_do(
            &loc,
            setting,
            "the old server's journal is where Heron keeps this zone's, and a zone that \
             takes updates needs its own: Heron never writes over the file, and answers \
             this zone's updates SERVFAIL until it is moved away (once the old server \
             has written its changes into the zone file and will not be started again)",
        );
    }
    dedup_notes(&mut config.notes);
    if config.listen.is_empty() {
        config
            .listen
            .push("127.0.0.1:53".parse().expect("an address"));
    }
}

/// Each note once: a setting that every zone inherits (an `options`
/// list cut, a pattern's BLOCKED entries) is said once, not per zone.
fn dedup_notes(notes: &mut Vec<model::Note>) {
    let mut seen = HashSet::new();
    notes.retain(|n| {
        let line = (n.loc.file.clone(), n.loc.line);
        seen.insert((line, n.kind, n.setting.clone(), n.advice.clone()))
    });
}

/// `--tls-listen`: the DoT addresses written instead of the old
/// server's (noted in `header`); an error when the old server serves no
/// DoT to replace.
fn replace_tls_listen(
    imported: &mut Imported,
    tls_listen: &[std::net::SocketAddr],
    header: &mut String,
) -> Result<(), String> {
    if tls_listen.is_empty() {
        return Ok(());
    }
    let Some(tls) = imported.tls.as_mut() else {
        return Err(
            "--tls-listen: the old server serves no DNS over TLS (no certificate and key to use)"
                .into(),
        );
    };
    let old: Vec<String> = tls.listen.iter().map(|a| format!("\"{a}\"")).collect();
    header.push_str(&format!(
        "\n[tls] listen was given with --tls-listen; the old server's was [{}]",
        old.join(", ")
    ));
    tls.listen = tls_listen.to_vec();
    Ok(())
}

/// `heron import`'s command line.
pub struct Options {
    pub from: From,
    pub file: PathBuf,
    pub output: PathBuf,
    pub force: bool,
    /// Replaces the old server's listen addresses when not empty.
    pub listen: Vec<std::net::SocketAddr>,
    /// Replaces the old server's DNS-over-TLS addresses when not empty.
    pub tls_listen: Vec<std::net::SocketAddr>,
}

/// `heron import`: exit 0 when the file was written (whatever was listed
/// as not translated), 1 on an error (nothing usable written), 2 on a
/// usage error (clap's). What it says goes to stderr; when stderr cannot
/// be written (a full disk, a reader that went away) it stops with 1,
/// before the file is written if the listing could not be shown.
pub fn run(options: &Options) -> ExitCode {
    match run_to(options, &mut std::io::stderr().lock()) {
        Ok(code) => code,
        Err(_) => ExitCode::FAILURE,
    }
}

/// [`run`], saying what it does on `err`; an error when `err` fails.
fn run_to(options: &Options, err: &mut dyn Write) -> std::io::Result<ExitCode> {
    let mut imported = match import(options.from, &options.file) {
        Ok(i) => i,
        Err(e) => {
            writeln!(err, "{e}\nnothing written")?;
            return Ok(ExitCode::FAILURE);
        }
    };
    let header = match header(options, &mut imported, err)? {
        Ok(header) => header,
        Err(why) => {
            writeln!(err, "{why}\nnothing written")?;
            return Ok(ExitCode::FAILURE);
        }
    };
    if let Some(what) = old_servers_at_output(options, &imported) {
        let why = format!(
            "{}: {what}: heron.toml goes elsewhere (the old configuration is the way back)",
            options.output.display(),
        );
        writeln!(err, "{why}\nnothing written")?;
        return Ok(ExitCode::FAILURE);
    }
    let new_output = !options.output.exists();
    // What --force replaces comes back if the new file does not load.
    let replaced = (!new_output && options.force)
        .then(|| std::fs::read(&options.output).ok())
        .flatten();
    unit_notes(&mut imported, options);
    print_notes(&imported, err)?;
    if let Err(why) = write_output(options, &imported, &header) {
        writeln!(err, "{why}")?;
        return Ok(ExitCode::FAILURE);
    }
    let output = &options.output;
    if !loads_once_keys_are_imported(output, err)? {
        // Exit 1 means nothing usable was written (black-box finding
        // BT-11: a file with a malformed TSIG secret stayed, and a second
        // run needed --force).
        let undone = match replaced {
            Some(old) => std::fs::write(output, old),
            None => std::fs::remove_file(output),
        };
        let said = match undone {
            Ok(()) => "nothing written",
            Err(_) => "left as written: remove it",
        };
        writeln!(err, "{}: {said}", output.display())?;
        return Ok(ExitCode::FAILURE);
    }
    writeln!(err, "{}", summary(&imported, output))?;
    if new_output && !imported.keys.is_empty() {
        writeln!(
            err,
            "{}: holds TSIG secrets, so it was made readable by its owner only; the shipped \
             systemd unit runs as the heron user: `chgrp heron {0} && chmod 640 {0}` before \
             it serves from this file",
            output.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether Heron reads the written file, but for zones signed with keys
/// Heron does not make (RSASHA256) whose import is a step to do: those
/// are said, and check-config refuses them until then. What else it
/// refuses is said as an error (false).
fn loads_once_keys_are_imported(output: &Path, err: &mut dyn Write) -> std::io::Result<bool> {
    use crate::config::dnssec::NO_IMPORTED_KEY;
    let Err(errors) = crate::config::load(output) else {
        return Ok(true);
    };
    let wrong = errors.iter().any(|e| !e.contains(NO_IMPORTED_KEY));
    for e in &errors {
        writeln!(err, "{}", source::shown(e))?;
    }
    let said = match wrong {
        true => {
            "Heron cannot read what was translated: fix the lines above in the old configuration, or write heron.toml by hand"
        }
        false => {
            "Heron reads it once those zones' keys are imported (the `to do` lines): it \
             makes no keys of their algorithm, and check-config refuses them until then"
        }
    };
    writeln!(err, "{}: {said}", output.display())?;
    Ok(!wrong)
}

/// What `--output` is, when it is the old server's: its configuration,
/// a file it includes, a zone file (a secondary's, a file a zone file
/// includes), or its TLS certificate or key, by
/// any name (a symbolic or a hard link too), or a file an include
/// pattern reads (`include: nsd.conf.d/*.conf`: the old server,
/// restarted, would read heron.toml). Never written, `--force` or not.
fn old_servers_at_output(options: &Options, imported: &Imported) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(glob) = imported.sources.glob_matching(&options.output) {
        let glob = glob.display();
        return Some(format!(
            "the old server would read it as configuration (include {glob})"
        ));
    }
    let identity = |path: &Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
    let output = identity(&options.output)?;
    let zones = imported.zones.iter().filter_map(|z| z.file.as_deref());
    let tls = imported.tls.iter().flat_map(|t| [&t.certificate, &t.key]);
    std::iter::once(options.file.as_path())
        .chain(imported.sources.files.iter().map(PathBuf::as_path))
        .chain(imported.zone_data.iter().map(PathBuf::as_path))
        .chain(zones)
        .chain(tls.map(PathBuf::as_path))
        .find(|source| identity(source) == Some(output))
        .map(|source| format!("is {}, which the old server reads", source.display()))
}

/// The written file's header, `--listen` and `--tls-listen` applied to
/// `imported`; Err(why) when `--tls-listen` has nothing to replace.
fn header(
    options: &Options,
    imported: &mut Imported,
    err: &mut dyn Write,
) -> std::io::Result<Result<String, String>> {
    let (listen, tls_listen) = (&options.listen, &options.tls_listen);
    let mut header = format!(
        "Written by `heron import --from {} {}`.\nSettings it could not translate were listed \
         when it ran; check with `heron check-config`.",
        options.from.name(),
        options.file.display()
    );
    if !listen.is_empty() {
        let old: Vec<String> = imported.listen.iter().map(|a| format!("\"{a}\"")).collect();
        header.push_str(&format!(
            "\nlisten was given with --listen; the old server's was [{}]",
            old.join(", ")
        ));
        imported.listen = listen.clone();
    }
    if !listen.is_empty() && tls_listen.is_empty() && imported.tls.is_some() {
        writeln!(
            err,
            "note: [tls] listen keeps the old server's DNS-over-TLS addresses: give --tls-listen \
             too to run Heron beside it"
        )?;
    }
    Ok(replace_tls_listen(imported, tls_listen, &mut header).map(|()| header))
}

/// Folders the shipped systemd unit (docs/heron.service) lets Heron write
/// in: ReadWritePaths, StateDirectory, RuntimeDirectory, LogsDirectory.
const UNIT_WRITABLE: &[&str] = &["/var/lib/heron", "/run/heron", "/var/log/heron"];

/// Whether the shipped unit keeps `dir` read-only (ProtectSystem=strict
/// makes the whole system so). Temporary and home folders are left out:
/// the unit hides them anyway, and a configuration there is a trial.
fn read_only_under_unit(dir: &Path) -> bool {
    let trial = ["/tmp", "/var/tmp", "/home", "/root"];
    dir.is_absolute()
        && !UNIT_WRITABLE.iter().any(|w| dir.starts_with(w))
        && !trial.iter().any(|t| dir.starts_with(t))
}

/// Lists the folders Heron is to write in that the shipped systemd unit
/// keeps read-only: secondaries' kept copies (and generated catalogs)
/// beside heron.toml, and the journals beside primary zones' files.
fn unit_notes(imported: &mut Imported, options: &Options) {
    let output = std::path::absolute(&options.output).unwrap_or(options.output.clone());
    let root = source::Loc {
        file: std::sync::Arc::from(options.file.as_path()),
        line: 1,
    };
    let advice = |what: &str| {
        format!(
            "the shipped systemd unit keeps this folder read-only (ProtectSystem=strict; it \
             writes in /var/lib/heron only): {what}, or give the folder to the unit with a \
             drop-in (ReadWritePaths=)"
        )
    };
    let kept = !imported.catalogs.is_empty() || imported.zones.iter().any(|z| z.file.is_none());
    let folder = output
        .parent()
        .unwrap_or(Path::new("/"))
        .join(writer::SECONDARY_DIR);
    if kept && read_only_under_unit(&folder) {
        let setting = format!("kept copies of secondary zones in {}", folder.display());
        let what = "write heron.toml under /var/lib/heron, or set these zones' `file` there";
        imported.untranslated(&root, setting, advice(what));
    }
    let mut journals: std::collections::BTreeMap<PathBuf, usize> = Default::default();
    for zone in imported
        .zones
        .iter()
        .filter(|z| !z.allow_transfer.is_empty() && !z.journal_off)
    {
        let dir = zone.file.as_deref().and_then(Path::parent);
        if let Some(dir) = dir.filter(|d| read_only_under_unit(d)) {
            *journals.entry(dir.to_path_buf()).or_default() += 1;
        }
    }
    for (dir, zones) in journals {
        let setting = format!("journals (FILE.jnl) of {zones} zones in {}", dir.display());
        let what = "move the zone files under /var/lib/heron, or set `journal = false`";
        imported.untranslated(&root, setting, advice(what));
    }
}

/// Writes heron.toml, and the folder of secondaries' kept copies and
/// generated catalogs when it names one (Heron creates a secondary's
/// folder, not a generated catalog's); Err(what to say) when it cannot.
fn write_output(options: &Options, imported: &Imported, header: &str) -> Result<(), String> {
    let output = &options.output;
    let text = writer::write_toml(imported, header);
    let secrets = !imported.keys.is_empty();
    if let Err(e) = writer::write_file(output, &text, secrets, options.force) {
        let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
            " (give --force to replace it)"
        } else {
            ""
        };
        return Err(format!("{}: cannot write: {e}{hint}", output.display()));
    }
    let uses_folder =
        !imported.catalogs.is_empty() || imported.zones.iter().any(|z| z.file.is_none());
    if uses_folder {
        let parent = output.parent().unwrap_or(Path::new("."));
        let folder = parent.join(writer::SECONDARY_DIR);
        if let Err(e) = std::fs::create_dir_all(&folder) {
            return Err(format!("{}: cannot create: {e}", folder.display()));
        }
    }
    Ok(())
}

fn print_notes(imported: &Imported, err: &mut dyn Write) -> std::io::Result<()> {
    for kind in [NoteKind::ToDo, NoteKind::Untranslated, NoteKind::NotNeeded] {
        for note in imported.notes.iter().filter(|n| n.kind == kind) {
            let label = match kind {
                NoteKind::ToDo => "to do",
                NoteKind::Untranslated => "not translated",
                NoteKind::NotNeeded => "not needed",
            };
            let setting = redacted(&note.setting);
            let setting = source::shown(&setting);
            writeln!(err, "{}: {label}: {setting}: {}", note.loc, note.advice)?;
        }
    }
    Ok(())
}

/// A setting as it may be printed: the values after any word naming a
/// secret (`cookie-secret`, `secret`, `secret-file`...) are not shown,
/// nor a value joined to it (`secret:VALUE`, `secret=VALUE`).
pub(crate) fn redacted(setting: &str) -> String {
    let mut out = Vec::new();
    for word in setting.split(' ') {
        let lower = word.to_ascii_lowercase();
        let Some(at) = lower.find("secret") else {
            out.push(word);
            continue;
        };
        let joined = word[at..].find([':', '=']).map(|sep| at + sep + 1);
        out.push(joined.map_or(word, |end| &word[..end]));
        out.push("(not shown)");
        break;
    }
    out.join(" ")
}

fn summary(imported: &Imported, output: &Path) -> String {
    let count = |kind| imported.notes.iter().filter(|n| n.kind == kind).count();
    let secondaries = imported
        .zones
        .iter()
        .filter(|z| !z.primaries.is_empty())
        .count();
    let mut text = format!(
        "wrote {}: {} zones ({} secondary), {} catalogs consumed, {} TSIG keys; \
         {} settings not translated, {} not needed (listed above)",
        output.display(),
        imported.zones.len(),
        secondaries,
        imported.catalogs.len(),
        imported.keys.len(),
        count(NoteKind::Untranslated),
        count(NoteKind::NotNeeded),
    );
    let to_do = count(NoteKind::ToDo);
    if to_do > 0 {
        text.push_str(&format!(
            "; {to_do} steps to do before Heron takes over (listed first as `to do`)"
        ));
    }
    if !imported.keys.is_empty() {
        // Said as it is: a file replaced keeps its mode (DB-5).
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(output).map_or(0o600, |m| m.permissions().mode() & 0o777);
        let readers = match mode & 0o070 {
            0 => "its owner only".to_string(),
            _ => format!("its owner and group (mode {mode:o})"),
        };
        text.push_str(&format!(
            "; the file holds TSIG secrets and is readable by {readers}"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::testutil::write_files;
    use super::{From, import, redacted};

    /// What `heron import` lists for `text` read as `from`: "setting: advice".
    fn listed(from: From, name: &str, text: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let got = import(from, &write_files(dir.path(), &[(name, text)])).unwrap();
        (got.notes.iter())
            .map(|n| {
                format!(
                    "{}:{}: {}: {}",
                    n.loc.file.display(),
                    n.loc.line,
                    n.setting,
                    n.advice
                )
            })
            .collect()
    }

    /// What the shipped systemd unit keeps read-only is listed: the kept
    /// copies beside a heron.toml under /etc, journals beside zone files
    /// under /etc; nothing for a trial in /tmp or files in /var/lib/heron.
    #[test]
    fn folders_the_unit_keeps_read_only_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: a.test\n zonefile: /etc/nsd/a.zone\n provide-xfr: 192.0.2.2 NOKEY\n\
                    zone:\n name: b.test\n zonefile: /var/lib/heron/b.zone\n provide-xfr: 192.0.2.2 NOKEY\n\
                    zone:\n name: s.test\n request-xfr: 192.0.2.1 NOKEY\n";
        let conf = write_files(dir.path(), &[("nsd.conf", text)]);
        let listed = |output: &str| {
            let mut imported = import(From::Nsd, &conf).unwrap();
            let options = super::Options {
                from: From::Nsd,
                file: conf.clone(),
                output: output.into(),
                force: false,
                listen: Vec::new(),
                tls_listen: Vec::new(),
            };
            super::unit_notes(&mut imported, &options);
            let notes = imported
                .notes
                .iter()
                .filter(|n| n.advice.contains("read-only"));
            notes.map(|n| n.setting.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            listed("/etc/heron/heron.toml"),
            [
                "kept copies of secondary zones in /etc/heron/secondary",
                "journals (FILE.jnl) of 1 zones in /etc/nsd"
            ]
        );
        assert_eq!(
            listed("/var/lib/heron/heron.toml"),
            ["journals (FILE.jnl) of 1 zones in /etc/nsd"]
        );
    }

    /// The old server's journal beside a zone file turns Heron's journal
    /// off, not to replace it; Heron's own, left by a Heron run beside the
    /// old server, does not (black-box finding: a second import did).
    #[test]
    fn only_another_servers_journal_turns_the_journal_off() {
        let dir = tempfile::tempdir().unwrap();
        let zone = |name: &str| dir.path().join(format!("{name}.zone"));
        let text = format!(
            "zone:\n name: a.test\n zonefile: {}\n provide-xfr: 192.0.2.2 NOKEY\n\
             zone:\n name: b.test\n zonefile: {}\n provide-xfr: 192.0.2.2 NOKEY\n",
            zone("a").display(),
            zone("b").display()
        );
        std::fs::write(
            dir.path().join("a.zone.jnl"),
            b"\x00\x00\x00\x00BIND journal",
        )
        .unwrap();
        let mut ours = heron_xfr::journal::file::MAGIC.to_vec();
        ours.extend_from_slice(&[0; 8]);
        std::fs::write(dir.path().join("b.zone.jnl"), ours).unwrap();
        let conf = write_files(dir.path(), &[("nsd.conf", &text)]);
        let got = import(From::Nsd, &conf).unwrap();
        let off: Vec<bool> = got.zones.iter().map(|z| z.journal_off).collect();
        assert_eq!(off, [true, false]);
    }

    /// A zone that takes updates cannot have `journal = false`: the old
    /// server's journal where Heron keeps the zone's is a step to do, said
    /// at the zone's line (black-box finding DB-6: nothing was said, and
    /// every update then failed).
    #[test]
    fn another_servers_journal_beside_a_zone_taking_updates_is_a_step_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.zone");
        let text = format!(
            "acl:\n  - id: up\n    address: 127.0.0.1\n    action: update\n\
             zone:\n  - domain: a.test\n    file: {}\n    acl: up\n",
            file.display()
        );
        std::fs::write(dir.path().join("a.zone.jnl"), b";BIND LOG V9.2\n").unwrap();
        let conf = write_files(dir.path(), &[("knot.conf", &text)]);
        let got = import(From::Knot, &conf).unwrap();
        assert!(!got.zones[0].allow_update.is_empty());
        assert!(!got.zones[0].journal_off, "allow-update needs the journal");
        let said = (got.notes.iter()).find(|n| n.setting.contains("a.zone.jnl"));
        let said = said.unwrap_or_else(|| panic!("{:?}", got.notes));
        assert_eq!(
            (said.kind, said.loc.line),
            (super::model::NoteKind::ToDo, 6)
        );
        assert!(said.advice.contains("SERVFAIL until it is moved away"));
    }

    /// A default written out is listed at its own line.
    #[test]
    fn a_default_written_out_is_listed_at_its_line() {
        let notes = listed(
            From::Nsd,
            "nsd.conf",
            "server:\n ip-address: 127.0.0.1\n hide-version: no\n",
        );
        let line = notes.iter().find(|n| n.contains("hide-version: no"));
        assert!(
            line.is_some_and(|l| l.contains("nsd.conf:3: ")),
            "{notes:?}"
        );
    }

    /// `-o` naming the old server's configuration is refused even with
    /// `--force`; a new file holding secrets says how the unit reads it.
    #[test]
    fn the_old_configuration_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let text = "key \"k\" { algorithm hmac-sha256; secret \"c2VjcmV0c2VjcmV0\"; };\n\
                    options { listen-on port 5300 { 127.0.0.1; }; };\n";
        let conf = write_files(dir.path(), &[("named.conf", text)]);
        let run = |output: &std::path::Path| {
            let options = super::Options {
                from: From::Bind,
                file: conf.clone(),
                output: output.into(),
                force: true,
                listen: Vec::new(),
                tls_listen: Vec::new(),
            };
            let mut err = Vec::new();
            let code = super::run_to(&options, &mut err).unwrap();
            (code, String::from_utf8(err).unwrap())
        };
        let (code, said) = run(&conf);
        assert_eq!(code, std::process::ExitCode::FAILURE, "{said}");
        assert!(said.contains("which the old server reads"), "{said}");
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
        let (code, said) = run(&dir.path().join("heron.toml"));
        assert_eq!(code, std::process::ExitCode::SUCCESS, "{said}");
        assert!(said.contains("chgrp heron"), "{said}");
    }

    /// DL-1: the old server's zone data is never written over either, by
    /// any of the three importers: a file a zone file `$INCLUDE`s, and a
    /// secondary zone's file, which the old server writes.
    #[test]
    fn zone_data_the_zone_files_include_and_secondaries_files_are_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let zone = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n$INCLUDE sub/hosts.inc\n";
        let configs = [
            (
                From::Nsd,
                format!(
                    "server:\n zonesdir: {d}\nzone:\n name: a.test\n zonefile: a.test.zone\n\
                     zone:\n name: s.test\n zonefile: s.test.zone\n request-xfr: 127.0.0.9 NOKEY\n"
                ),
            ),
            (
                From::Knot,
                format!(
                    "template:\n  - id: default\n    storage: {d}\n    file: \"%s.zone\"\n\
                     remote:\n  - id: p\n    address: 127.0.0.9\n\
                     zone:\n  - domain: a.test\n  - domain: s.test\n    master: p\n"
                ),
            ),
            (
                From::Bind,
                format!(
                    "options {{ directory \"{d}\"; }};\n\
                     zone \"a.test\" {{ type primary; file \"a.test.zone\"; }};\n\
                     zone \"s.test\" {{ type secondary; file \"s.test.zone\"; primaries {{ 127.0.0.9; }}; }};\n"
                ),
            ),
        ];
        for (from, text) in configs {
            let conf = write_files(
                dir.path(),
                &[
                    ("old.conf", &text),
                    ("a.test.zone", zone),
                    ("sub/hosts.inc", "www A 192.0.2.1\n"),
                    ("s.test.zone", "transferred\n"),
                ],
            );
            for kept in ["sub/hosts.inc", "s.test.zone"] {
                let output = dir.path().join(kept);
                let options = super::Options {
                    from,
                    file: conf.clone(),
                    output: output.clone(),
                    force: true,
                    listen: Vec::new(),
                    tls_listen: Vec::new(),
                };
                let mut err = Vec::new();
                let code = super::run_to(&options, &mut err).unwrap();
                let said = String::from_utf8(err).unwrap();
                assert_eq!(
                    code,
                    std::process::ExitCode::FAILURE,
                    "{from:?} {kept}: {said}"
                );
                assert!(said.contains("which the old server reads"), "{said}");
                let left = std::fs::read_to_string(&output).unwrap();
                assert!(
                    !left.contains("heron import"),
                    "{from:?} {kept} written over"
                );
            }
        }
    }

    /// A setting every zone inherits is listed once, not once per zone;
    /// no message has runs of spaces; each piece of advice is about its
    /// own setting.
    #[test]
    fn notes_are_said_once_each_in_plain_words_of_their_own() {
        let bind = "options { allow-transfer { 192.0.2.0/24; !192.0.2.5; any; };\n\
                    allow-query { !192.0.2.66; any; }; };\n\
                    zone \"a.test\" { type primary; file \"a\"; };\n\
                    zone \"b.test\" { type primary; file \"b\"; };\n";
        let nsd = "server:\n round-robin: yes\n refuse-any: yes\n\
                   pattern:\n name: p\n provide-xfr: 192.0.2.0/24 NOKEY\n provide-xfr: 192.0.2.5 BLOCKED\n\
                   zone:\n name: a.test\n zonefile: a\n include-pattern: p\n\
                   zone:\n name: b.test\n zonefile: b\n include-pattern: p\n\
                   zone:\n name: c.test\n request-xfr: 192.0.2.1 NOKEY\n";
        let knot = "server:\n    udp-workers: 4\n    rundir: /run/knot\n";
        let notes = [
            listed(From::Bind, "named.conf", bind),
            listed(From::Nsd, "nsd.conf", nsd),
            listed(From::Knot, "knot.conf", knot),
        ]
        .concat();
        let mut seen = std::collections::HashSet::new();
        for note in &notes {
            assert!(seen.insert(note), "said twice: {note}");
            assert!(!note.contains("  "), "runs of spaces: {note}");
        }
        let advice = |needle: &str| {
            let found = notes.iter().find(|n| n.contains(needle));
            found
                .unwrap_or_else(|| panic!("{needle}: {notes:#?}"))
                .clone()
        };
        assert!(!advice("round-robin").contains("ANY"));
        assert!(advice("refuse-any").contains("ANY"));
        assert!(!advice("udp-workers").contains("pid file"));
        assert!(advice("rundir").contains("run folder"));
    }

    #[test]
    fn secrets_in_untranslated_settings_are_not_shown() {
        assert_eq!(
            redacted("options: cookie-secret \"0123abcd\""),
            "options: cookie-secret (not shown)"
        );
        assert_eq!(
            redacted("server: cookie-secret: 0123"),
            "server: cookie-secret: (not shown)"
        );
        assert_eq!(redacted("zone a: notify yes"), "zone a: notify yes");
        assert_eq!(redacted("secret:c2VjcmV0"), "secret: (not shown)");
        assert_eq!(redacted("secret \"c2VjcmV0\""), "secret (not shown)");
    }
}
