//! nsd.conf: `keyword: values` lines in sections (`server:`, `zone:`,
//! `pattern:`, `key:`, `remote-control:`, `tls-auth:`...), `#` comments,
//! `include:` anywhere (with globs), zones taking a pattern's settings
//! with `include-pattern:`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::model::{
    CatalogConsumer, Imported, Peer, Prefix, Rrl, Rule, TlsListener, TsigKey, Zone, parse_at_port,
    range_prefixes, without_denied,
};
use super::source::{ImportError, Loc, Reader, resolve, zone_file_includes};

/// One `keyword: values` of the file.
#[derive(Clone, Debug)]
struct Setting {
    key: String,
    values: Vec<String>,
    loc: Loc,
}

/// A section and its settings.
#[derive(Debug)]
struct Section {
    kind: String,
    loc: Loc,
    settings: Vec<Setting>,
}

const SECTIONS: &[&str] = &[
    "server",
    "zone",
    "pattern",
    "key",
    "remote-control",
    "tls-auth",
    "dnstap",
    "verify",
];

/// Reads `path` and everything it includes.
pub fn parse(path: &Path) -> Result<Imported, ImportError> {
    let mut reader = Reader::default();
    let mut settings = Vec::new();
    read_file(&mut reader, path, None, &mut settings)?;
    let sections = sections(settings)?;
    let root = Loc {
        file: Arc::from(path),
        line: 1,
    };
    let interpreter = Interpreter {
        root: Some(root),
        ..Interpreter::default()
    };
    let mut imported = interpreter.run(&sections)?;
    imported.sources = reader.into_sources();
    Ok(imported)
}

fn read_file(
    reader: &mut Reader,
    path: &Path,
    from: Option<&Loc>,
    out: &mut Vec<Setting>,
) -> Result<(), ImportError> {
    let text = reader.enter(path, from)?;
    let file: Arc<Path> = Arc::from(path);
    let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    for setting in settings_of(&text, &file)? {
        if setting.key != "include" {
            out.push(setting);
            continue;
        }
        let [name] = setting.values.as_slice() else {
            return Err(ImportError::at(
                &setting.loc,
                "include: takes one file name",
            ));
        };
        let pattern = resolve(&base, name);
        let files = (reader.include(&pattern)).map_err(|e| ImportError::at(&setting.loc, e))?;
        for file in files {
            read_file(reader, &file, Some(&setting.loc), out)?;
        }
    }
    reader.leave();
    Ok(())
}

/// Words of the text with their lines: `#` starts a comment at the
/// start of a word only (NSD reads `b#c.zone` as one word); a quoted word
/// may hold spaces.
fn words(
    text: &str,
    file: &Arc<Path>,
    mut out: impl FnMut(String, bool, Loc) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    for (index, line) in text.lines().enumerate() {
        let loc = Loc {
            file: file.clone(),
            line: index as u32 + 1,
        };
        let mut chars = line.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if c == '#' {
                break;
            } else if c == '"' || c == '\'' {
                chars.next();
                let mut word = String::new();
                let mut closed = false;
                while let Some(d) = chars.next() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    word.push(d);
                    // NSD keeps a backslash and the character after it,
                    // a quote too (`"x\"y"` is x\"y; black-box finding
                    // DB-12: the import stopped there).
                    if d == '\\' {
                        word.extend(chars.next());
                    }
                }
                if !closed {
                    return Err(ImportError::at(
                        &loc,
                        "a quoted string is not closed on its line",
                    ));
                }
                out(word, true, loc.clone())?;
            } else {
                let mut word = String::new();
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
                out(word, false, loc.clone())?;
            }
        }
    }
    Ok(())
}

/// Values one setting may have: NSD's take at most three
/// (`request-xfr: AXFR ADDRESS KEY`). A file of words with no keyword
/// is refused as it is read, not once all its words are held.
const MAX_VALUES: usize = 64;

fn is_keyword(word: &str) -> bool {
    let Some(name) = word.strip_suffix(':') else {
        return false;
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn settings_of(text: &str, file: &Arc<Path>) -> Result<Vec<Setting>, ImportError> {
    let mut out: Vec<Setting> = Vec::new();
    words(text, file, |word, quoted, loc| {
        if !quoted && is_keyword(&word) {
            out.push(Setting {
                key: word.trim_end_matches(':').to_ascii_lowercase(),
                values: Vec::new(),
                loc,
            });
        } else if let Some(last) = out.last_mut() {
            if last.values.len() == MAX_VALUES {
                let said = format!("{}: more than {MAX_VALUES} values", last.key);
                return Err(ImportError::at(&loc, said));
            }
            last.values.push(word);
        } else {
            return Err(ImportError::at(&loc, "a value before any keyword"));
        }
        Ok(())
    })?;
    Ok(out)
}

fn sections(settings: Vec<Setting>) -> Result<Vec<Section>, ImportError> {
    let mut out: Vec<Section> = Vec::new();
    for setting in settings {
        if SECTIONS.contains(&setting.key.as_str()) && setting.values.is_empty() {
            out.push(Section {
                kind: setting.key,
                loc: setting.loc,
                settings: Vec::new(),
            });
        } else if let Some(section) = out.last_mut() {
            section.settings.push(setting);
        } else {
            return Err(ImportError::at(
                &setting.loc,
                format!(
                    "{}: outside any section (server:, zone:, key:...)",
                    setting.key
                ),
            ));
        }
    }
    Ok(out)
}

/// Options of `server:` that Heron needs no equivalent of.
const SERVER_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "username",
        "set [server] user (the Debian package's unit starts Heron as `heron`)",
    ),
    (
        "chroot",
        "Heron does not chroot; the systemd unit confines it",
    ),
    (
        "pidfile",
        "Heron writes no pid file; systemd tracks the process",
    ),
    (
        "database",
        "Heron keeps no zone database; zones load from their files",
    ),
    (
        "zonelistfile",
        "zones added at run time are [[zone]] entries and `heron ctl reconfigure`",
    ),
    (
        "xfrdfile",
        "Heron keeps secondary timers in the kept copies' modification times",
    ),
    (
        "xfrdir",
        "transfers are checked in memory before they are written",
    ),
    (
        "logfile",
        "Heron logs to stderr (the journal under systemd); see [log]",
    ),
    (
        "log-only-syslog",
        "Heron logs to stderr (the journal under systemd); see [log]",
    ),
    ("log-time-ascii", "Heron's log lines carry RFC 3339 times"),
    ("verbosity", "see [log] level"),
    (
        "server-count",
        "see [server] workers (default: one per core)",
    ),
    ("difffile", "Heron keeps IXFR history in FILE.jnl"),
    (
        "xfrd-reload-timeout",
        "a transfer is served as soon as it is checked",
    ),
    (
        "reuseport",
        "Heron always opens one SO_REUSEPORT socket per worker",
    ),
    (
        "zonefiles-check",
        "Heron reloads files whose modification time changed (SIGHUP)",
    ),
    (
        "zonefiles-write",
        "Heron writes secondary copies after each transfer",
    ),
    ("statistics", "see [metrics] and `heron ctl stats`"),
    ("debug-mode", "heron serve runs in the foreground"),
];

#[derive(Default)]
struct Interpreter {
    out: Imported,
    keys: HashMap<String, TsigKey>,
    patterns: HashMap<String, Vec<Setting>>,
    tls_auth: HashMap<String, String>,
    zonesdir: Option<PathBuf>,
    /// The file's first line: where NSD's defaults are listed when no
    /// `server:` clause sets anything.
    root: Option<Loc>,
}

impl Interpreter {
    fn run(mut self, sections: &[Section]) -> Result<Imported, ImportError> {
        for section in sections {
            match section.kind.as_str() {
                "key" => self.key(section)?,
                "pattern" => self.pattern(section)?,
                "tls-auth" => self.tls_auth(section),
                _ => {}
            }
        }
        let server: Vec<&Setting> = sections
            .iter()
            .filter(|s| s.kind == "server")
            .flat_map(|s| &s.settings)
            .collect();
        self.server(&server)?;
        for section in sections {
            match section.kind.as_str() {
                "zone" => self.zone(section)?,
                "remote-control" => self.section_not_needed(
                    section,
                    "heron ctl talks over [server] control, a Unix socket",
                ),
                "dnstap" => self.section_untranslated(
                    section,
                    "write a [dnstap] section (socket or file) by hand",
                ),
                "verify" => self.section_untranslated(
                    section,
                    "Heron has no zone verifier hook: verify zones before they are loaded",
                ),
                _ => {}
            }
        }
        let mut keys: Vec<TsigKey> = self.keys.into_values().collect();
        keys.sort_by(|a, b| {
            a.loc
                .file
                .cmp(&b.loc.file)
                .then(a.loc.line.cmp(&b.loc.line))
        });
        self.out.keys = keys;
        Ok(self.out)
    }

    fn section_not_needed(&mut self, section: &Section, advice: &str) {
        for s in &section.settings {
            self.out
                .not_needed(&s.loc, format!("{}: {}", section.kind, s.key), advice);
        }
    }

    fn section_untranslated(&mut self, section: &Section, advice: &str) {
        self.out
            .untranslated(&section.loc, format!("{}:", section.kind), advice);
    }

    fn key(&mut self, section: &Section) -> Result<(), ImportError> {
        let (mut name, mut algorithm, mut secret) = (None, None, None);
        for s in &section.settings {
            match s.key.as_str() {
                "name" => name = first(s)?,
                "algorithm" => algorithm = first(s)?,
                "secret" => secret = first(s).map_err(|_| secret_error(s))?,
                _ => self.out.untranslated(
                    &s.loc,
                    format!("key: {}", s.key),
                    "not a key setting Heron knows",
                ),
            }
        }
        let (Some(name), Some(secret)) = (name, secret) else {
            return Err(ImportError::at(&section.loc, "key: needs name and secret"));
        };
        let key = TsigKey {
            name: name.clone(),
            algorithm: algorithm
                .unwrap_or_else(|| "hmac-sha256".into())
                .to_ascii_lowercase(),
            secret,
            loc: section.loc.clone(),
        };
        self.keys.insert(name, key);
        Ok(())
    }

    fn pattern(&mut self, section: &Section) -> Result<(), ImportError> {
        let name = section
            .settings
            .iter()
            .find(|s| s.key == "name")
            .ok_or_else(|| ImportError::at(&section.loc, "pattern: without a name"))?;
        let name = first(name)?.unwrap_or_default();
        let rest = section.settings.iter().filter(|s| s.key != "name").cloned();
        self.patterns.insert(name, rest.collect());
        Ok(())
    }

    fn tls_auth(&mut self, section: &Section) {
        let name = section.settings.iter().find(|s| s.key == "name");
        let domain = section
            .settings
            .iter()
            .find(|s| s.key == "auth-domain-name");
        if let (Some(name), Some(domain)) = (name, domain)
            && let (Some(n), Some(d)) = (name.values.first(), domain.values.first())
        {
            self.tls_auth.insert(n.clone(), d.clone());
        }
        for s in &section.settings {
            if !matches!(s.key.as_str(), "name" | "auth-domain-name") {
                self.out.untranslated(
                    &s.loc,
                    format!("tls-auth: {}", s.key),
                    "Heron checks a primary's certificate against [secondary] tls-ca; client \
                     certificates are not supported",
                );
            }
        }
    }
}

fn first(s: &Setting) -> Result<Option<String>, ImportError> {
    match s.values.as_slice() {
        [one] => Ok(Some(one.clone())),
        _ => Err(ImportError::at(
            &s.loc,
            format!("{}: takes one value", s.key),
        )),
    }
}

/// An error about a secret that does not repeat it.
fn secret_error(s: &Setting) -> ImportError {
    ImportError::at(&s.loc, "secret: takes one value (not shown)")
}

fn yes(s: &Setting) -> bool {
    s.values
        .first()
        .is_some_and(|v| v.eq_ignore_ascii_case("yes"))
}

impl Interpreter {
    fn server(&mut self, settings: &[&Setting]) -> Result<(), ImportError> {
        let find = |key: &str| settings.iter().rev().find(|s| s.key == key).copied();
        let port = match find("port") {
            Some(s) => number(s)?,
            None => 53,
        };
        let mut ip4 = !find("ip6-only").is_some_and(yes) && find("do-ip4").is_none_or(yes);
        let mut ip6 = !find("ip4-only").is_some_and(yes) && find("do-ip6").is_none_or(yes);
        if !ip4 && !ip6 {
            (ip4, ip6) = (true, true);
        }
        let mut listen = Vec::new();
        for s in settings
            .iter()
            .filter(|s| s.key == "ip-address" || s.key == "interface")
        {
            let text = s.values.first().map(String::as_str).unwrap_or("");
            match parse_at_port(text, port) {
                Some(addr) => listen.push(addr),
                None => self.out.untranslated(
                    &s.loc,
                    format!("server: {}: {text}", s.key),
                    "Heron listens on addresses, not interface names: write the interface's \
                     addresses in [server] listen",
                ),
            }
        }
        let any_written = settings
            .iter()
            .any(|s| s.key == "ip-address" || s.key == "interface");
        // Only when none is written: an interface name left out must not
        // widen the server to every address.
        if listen.is_empty() && !any_written {
            listen = wildcard(port, ip4, ip6);
        }
        self.out.listen = listen.clone();
        if let Some(s) = find("zonesdir") {
            self.zonesdir = first(s)?.map(PathBuf::from);
        }
        if find("minimal-responses").is_none()
            && let Some(loc) = self.defaults_loc(settings)
        {
            self.out.untranslated(
                &loc,
                "minimal-responses: no (the default)",
                "NSD adds the zone's NS records (and their addresses) to positive answers; Heron \
                 answers minimally, as NSD does with minimal-responses: yes",
            );
        }
        self.identity_and_version(settings)?;
        self.rrl(settings)?;
        self.tls(settings, &listen)?;
        for s in settings {
            self.server_setting(s);
        }
        Ok(())
    }

    /// Where NSD's defaults are listed: the `server:` clause's first
    /// setting, or the file's first line when there is none.
    fn defaults_loc(&self, settings: &[&Setting]) -> Option<Loc> {
        settings
            .first()
            .map(|s| s.loc.clone())
            .or(self.root.clone())
    }

    fn identity_and_version(&mut self, settings: &[&Setting]) -> Result<(), ImportError> {
        let find = |key: &str| settings.iter().rev().find(|s| s.key == key).copied();
        let loc = self.defaults_loc(settings);
        // Listed at the line that says so, when one does.
        let said_at = |key: &str| find(key).map(|s| s.loc.clone()).or(loc.clone());
        match (find("version"), find("hide-version").is_some_and(yes)) {
            (_, true) => {}
            (Some(s), false) => self.out.version = first(s)?,
            (None, false) => {
                if let Some(loc) = &said_at("hide-version") {
                    self.out.untranslated(
                        loc,
                        "hide-version: no (the default)",
                        "NSD answers version.bind with its version; Heron answers REFUSED unless \
                         [server] version is set",
                    );
                }
            }
        }
        match (find("identity"), find("hide-identity").is_some_and(yes)) {
            (_, true) => {}
            (Some(s), false) => self.out.identity = first(s)?,
            (None, false) => {
                if let Some(loc) = &said_at("hide-identity") {
                    self.out.untranslated(
                        loc,
                        "hide-identity: no (the default)",
                        "NSD answers id.server with the host name; Heron answers REFUSED unless \
                         [server] identity is set",
                    );
                }
            }
        }
        if let Some(s) = find("nsid") {
            let text = first(s)?.unwrap_or_default();
            self.out.nsid_hex = Some(match text.strip_prefix("ascii_") {
                Some(ascii) => ascii.bytes().map(|b| format!("{b:02x}")).collect(),
                None => text,
            });
        }
        Ok(())
    }

    fn rrl(&mut self, settings: &[&Setting]) -> Result<(), ImportError> {
        let find = |key: &str| settings.iter().rev().find(|s| s.key == key).copied();
        let rate = match find("rrl-ratelimit") {
            Some(s) => number(s)?,
            None => 200,
        };
        if rate == 0 {
            return Ok(());
        }
        let mut rrl = Rrl {
            responses_per_second: Some(rate),
            ipv6_prefix_length: Some(64),
            ..Rrl::default()
        };
        if let Some(s) = find("rrl-slip") {
            rrl.slip = Some(number(s)?);
        }
        if let Some(s) = find("rrl-ipv4-prefix-length") {
            rrl.ipv4_prefix_length = Some(number::<u8>(s)?);
        }
        if let Some(s) = find("rrl-ipv6-prefix-length") {
            rrl.ipv6_prefix_length = Some(number::<u8>(s)?);
        }
        if find("rrl-ratelimit").is_none()
            && let Some(loc) = self.defaults_loc(settings)
        {
            self.out.untranslated(
                &loc,
                "rrl-ratelimit: 200 (NSD's default, built with --enable-ratelimit)",
                "written as [rrl] responses-per-second = 200; remove [rrl] to answer without limits",
            );
        }
        self.out.rrl = Some(rrl);
        Ok(())
    }

    fn tls(&mut self, settings: &[&Setting], listen: &[SocketAddr]) -> Result<(), ImportError> {
        let find = |key: &str| settings.iter().rev().find(|s| s.key == key).copied();
        let (Some(key), Some(pem)) = (find("tls-service-key"), find("tls-service-pem")) else {
            return Ok(());
        };
        // NSD's default TLS port.
        let port: u16 = find("tls-port").map_or(Ok(853), number)?;
        // NSD answers TLS on its ip-addresses that carry the TLS port,
        // and nowhere else; those are not plain DNS listeners.
        let mut on: Vec<SocketAddr> = listen
            .iter()
            .filter(|a| a.port() == port)
            .copied()
            .collect();
        on.dedup();
        if on.is_empty() {
            let why = format!(
                "no ip-address carries the TLS port {port}, so NSD serves no DNS over TLS: no [tls] written"
            );
            self.out
                .not_needed(&key.loc, "server: tls-service-key", why);
            return Ok(());
        }
        self.out.listen.retain(|a| a.port() != port);
        if self.out.listen.is_empty() {
            self.out.listen = wildcard(53, true, true);
        }
        self.out.tls = Some(TlsListener {
            listen: on,
            certificate: PathBuf::from(first(pem)?.unwrap_or_default()),
            key: PathBuf::from(first(key)?.unwrap_or_default()),
        });
        Ok(())
    }

    /// Notes for the server settings not translated above.
    fn server_setting(&mut self, s: &Setting) {
        let translated = [
            "identity",
            "version",
            "nsid",
            "rrl-ratelimit",
            "rrl-slip",
            "rrl-ipv4-prefix-length",
            "rrl-ipv6-prefix-length",
            "tls-port",
            "tls-service-key",
            "tls-service-pem",
            "hide-version",
            "hide-identity",
            "zonesdir",
            "do-ip4",
            "do-ip6",
            "ip4-only",
            "ip6-only",
            "port",
            "ip-address",
            "interface",
        ];
        if translated.contains(&s.key.as_str()) {
            return;
        }
        if let Some((_, advice)) = SERVER_NOT_NEEDED.iter().find(|(k, _)| *k == s.key) {
            self.out
                .not_needed(&s.loc, format!("server: {}", s.key), *advice);
            return;
        }
        if s.key == "minimal-responses" && yes(s) {
            self.out.not_needed(
                &s.loc,
                "server: minimal-responses: yes",
                "Heron answers minimally too",
            );
            return;
        }
        let advice = match s.key.as_str() {
            "tcp-count" => "set [tcp] max-connections",
            "tcp-timeout" => "set [tcp] idle-timeout",
            "ipv4-edns-size" | "ipv6-edns-size" => "set [server] max-udp-payload",
            "rrl-whitelist-ratelimit" | "rrl-size" => {
                "Heron has one rate per kind of answer and sizes its table per worker ([rrl] table-size)"
            }
            // Black-box finding DL-7: these were said to have no
            // equivalent.
            "answer-cookie" => {
                "Heron answers DNS cookies unless [cookies] enabled = false (NSD 4.6 only with \
                 answer-cookie: yes)"
            }
            "cookie-secret" | "cookie-secret-file" => {
                "set [cookies] secret (the same 32 hexadecimal digits) for servers that share \
                 cookies; without it Heron makes a random one at each start"
            }
            "tls-cert-bundle" => "set [secondary] tls-ca for primaries reached over TLS",
            "outgoing-interface" => "set [xfr] source",
            "refuse-any" => {
                "Heron answers ANY over UDP with one RRset of the name (RFC 8482) and over TCP \
                 with all of them; compare the answers"
            }
            "minimal-responses" => {
                "Heron answers minimally (no NS records or addresses added to positive answers), \
                 as NSD does with minimal-responses: yes"
            }
            "round-robin" => {
                "Heron serves an RRset's records in the same order every time (no rotation); \
                 compare the answers if clients rely on it"
            }
            _ => "no Heron equivalent: check whether the behaviour matters",
        };
        self.out.untranslated(
            &s.loc,
            format!("server: {} {}", s.key, s.values.join(" ")),
            advice,
        );
    }
}

fn wildcard(port: u16, ip4: bool, ip6: bool) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    if ip4 {
        out.push(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port));
    }
    if ip6 {
        out.push(SocketAddr::new(IpAddr::from([0u16; 8]), port));
    }
    out
}

fn number<T: std::str::FromStr>(s: &Setting) -> Result<T, ImportError> {
    s.values
        .first()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| ImportError::at(&s.loc, format!("{}: expected a number", s.key)))
}

/// Patterns within patterns.
const MAX_PATTERN_DEPTH: usize = 16;

/// A zone's settings as NSD applies them: its own, with each
/// `include-pattern:` replaced by the pattern's.
impl Interpreter {
    fn expand(
        &self,
        settings: &[Setting],
        depth: usize,
        out: &mut Vec<Setting>,
    ) -> Result<(), ImportError> {
        for s in settings {
            if s.key != "include-pattern" {
                out.push(s.clone());
                continue;
            }
            let name = first(s)?.unwrap_or_default();
            if depth >= MAX_PATTERN_DEPTH {
                return Err(ImportError::at(
                    &s.loc,
                    format!(
                        "include-pattern: {name}: patterns nested more than {MAX_PATTERN_DEPTH} deep (a loop?)"
                    ),
                ));
            }
            let pattern = self.patterns.get(&name).ok_or_else(|| {
                ImportError::at(&s.loc, format!("include-pattern: no pattern named {name}"))
            })?;
            self.expand(pattern, depth + 1, out)?;
        }
        Ok(())
    }

    fn zone(&mut self, section: &Section) -> Result<(), ImportError> {
        let mut settings = Vec::new();
        self.expand(&section.settings, 0, &mut settings)?;
        let name = settings
            .iter()
            .rev()
            .find(|s| s.key == "name")
            .ok_or_else(|| ImportError::at(&section.loc, "zone: without a name"))?;
        let origin = first(name)?.unwrap_or_default();
        let mut zone = Zone {
            loc: Some(section.loc.clone()),
            origin: origin.trim_end_matches('.').to_string(),
            ..Zone::default()
        };
        if zone.origin.is_empty() {
            zone.origin = ".".into();
        }
        let mut file = None;
        let mut catalog_role = None;
        let mut member_pattern = None;
        for s in &settings {
            match s.key.as_str() {
                "name" => {}
                "zonefile" => file = first(s)?,
                "request-xfr" => self.request_xfr(s, &mut zone)?,
                "provide-xfr" => zone.allow_transfer.extend(self.acl(s)?),
                "allow-notify" => zone.allow_notify.extend(self.acl(s)?),
                // Listed at all, it allows only what it lists.
                "allow-query" => (zone.allow_query.get_or_insert_default()).extend(self.acl(s)?),
                "notify" => zone.notify.extend(self.notify(s)?),
                "catalog" => catalog_role = first(s)?,
                "catalog-member-pattern" => member_pattern = first(s)?,
                "catalog-producer-zone" => zone.catalog_member = first(s)?,
                _ => self.zone_setting(s),
            }
        }
        self.finish_blocked(&mut zone, &settings);
        if !zone.primaries.is_empty() && zone.allow_notify.is_empty() {
            self.out.untranslated(
                &section.loc,
                format!("zone: {origin}: no allow-notify"),
                "NSD refuses every NOTIFY for this zone (it refreshes on its timer); Heron takes \
                 NOTIFY from the zone's primaries, so a change reaches it at once",
            );
        }
        match catalog_role.as_deref() {
            Some("consumer") => return self.consumer(zone, member_pattern, &section.loc),
            Some("producer") => zone.catalog_generate = true,
            _ => {}
        }
        // A catalog Heron generates is written by Heron, so it gets a file
        // of its own (in the secondary folder), never the old server's.
        if !zone.catalog_generate && zone.primaries.is_empty() {
            let Some(file) = file else {
                self.out.untranslated(
                    &section.loc,
                    format!("zone: {origin}"),
                    "neither zonefile: nor request-xfr:; the zone was not imported",
                );
                return Ok(());
            };
            let file = self.zone_file(&file, &zone.origin);
            self.relative_includes(&section.loc, &origin, &file);
            zone.file = Some(file);
        } else if let Some(file) = file {
            // NSD writes what it transferred or made there.
            let file = self.zone_file(&file, &zone.origin);
            self.out.zone_data.push(file);
        }
        self.out.zones.push(zone);
        Ok(())
    }

    /// Keeps the files the zone file `file` includes among the old
    /// server's zone data, and says each relative `$INCLUDE` that Heron
    /// finds elsewhere than NSD: NSD looks from `zonesdir` (its working
    /// folder), Heron from the including file's folder.
    fn relative_includes(&mut self, loc: &Loc, origin: &str, file: &Path) {
        let folder = file.parent().unwrap_or(Path::new("."));
        for included in zone_file_includes(file) {
            let (nsd, heron) = (
                resolve(&self.zonesdir(), &included),
                resolve(folder, &included),
            );
            self.out.zone_data.extend([nsd.clone(), heron.clone()]);
            if nsd == heron {
                continue;
            }
            self.out.step_to_do(
                loc,
                format!("zone: {origin}: $INCLUDE {included}"),
                format!(
                    "NSD reads {} (from zonesdir), Heron {} (from the zone file's folder): make \
                     the path absolute in {}",
                    nsd.display(),
                    heron.display(),
                    file.display()
                ),
            );
        }
    }

    /// `zonesdir`, NSD's working folder (default /etc/nsd).
    fn zonesdir(&self) -> PathBuf {
        (self.zonesdir.clone()).unwrap_or_else(|| PathBuf::from("/etc/nsd"))
    }

    /// NSD's zone file name: `%s` and friends expanded, relative to
    /// `zonesdir` (default /etc/nsd).
    fn zone_file(&self, file: &str, origin: &str) -> PathBuf {
        let name = if origin == "." { "" } else { origin };
        let labels: Vec<&str> = name.split('.').filter(|l| !l.is_empty()).collect();
        let nth_char = |n: usize| name.chars().nth(n).map_or(".".into(), |c| c.to_string());
        let from_top = |n: usize| {
            labels
                .len()
                .checked_sub(n + 1)
                .map_or(".".to_string(), |i| labels[i].to_string())
        };
        let expanded = file
            .replace("%s", name)
            .replace("%1", &nth_char(0))
            .replace("%2", &nth_char(1))
            .replace("%3", &nth_char(2))
            .replace("%z", &from_top(0))
            .replace("%y", &from_top(1))
            .replace("%x", &from_top(2));
        resolve(&self.zonesdir(), &expanded)
    }

    fn request_xfr(&mut self, s: &Setting, zone: &mut Zone) -> Result<(), ImportError> {
        let mut values: &[String] = &s.values;
        if let Some((flag, rest)) = values.split_first()
            && (flag == "AXFR" || flag == "UDP")
        {
            self.out.untranslated(
                &s.loc,
                format!("request-xfr: {flag}"),
                "Heron asks for IXFR over TCP first and falls back to AXFR by itself",
            );
            values = rest;
        }
        let [addr, key, tls @ ..] = values else {
            return Err(ImportError::at(
                &s.loc,
                "request-xfr: expected ADDRESS KEY|NOKEY",
            ));
        };
        let addr = parse_at_port(addr, 53).ok_or_else(|| {
            ImportError::at(&s.loc, format!("request-xfr: '{addr}' is not an address"))
        })?;
        let mut peer = Peer::plain(addr, self.key_name(s, key)?);
        if let Some(auth) = tls.first() {
            peer.tls = Some(self.tls_auth.get(auth).cloned());
            if addr.port() == 53 {
                peer.addr.set_port(853);
            }
        }
        zone.primaries.push(peer.clone());
        // NSD takes NOTIFY from the primaries only if allow-notify says
        // so; Heron from the primaries by default (and from the list
        // when one is given): said with the zone.
        Ok(())
    }

    fn key_name(&self, s: &Setting, key: &str) -> Result<Option<String>, ImportError> {
        match key {
            "NOKEY" => Ok(None),
            k if self.keys.contains_key(k) => Ok(Some(k.to_string())),
            k => Err(ImportError::at(
                &s.loc,
                format!("{}: key {k} is not defined", s.key),
            )),
        }
    }

    /// `provide-xfr:` and `allow-notify:` entries as rules; BLOCKED
    /// entries are collected by [`Interpreter::finish_blocked`].
    fn acl(&mut self, s: &Setting) -> Result<Vec<Rule>, ImportError> {
        let [spec, key, ..] = s.values.as_slice() else {
            return Err(ImportError::at(
                &s.loc,
                format!("{}: expected ADDRESS KEY|NOKEY|BLOCKED", s.key),
            ));
        };
        if key == "BLOCKED" {
            return Ok(Vec::new());
        }
        let key = self.key_name(s, key)?;
        let prefixes = match ip_spec(spec) {
            Ok(p) => p,
            Err(why) => {
                self.out.untranslated(
                    &s.loc,
                    format!("{}: {spec}", s.key),
                    format!("{why}; the entry was left out (nobody gains access)"),
                );
                return Ok(Vec::new());
            }
        };
        Ok(prefixes
            .into_iter()
            .map(|prefix| Rule {
                prefix,
                key: key.clone(),
            })
            .collect())
    }

    /// Leaves out the allows a BLOCKED entry outranks.
    fn finish_blocked(&mut self, zone: &mut Zone, settings: &[Setting]) {
        let mut query = zone.allow_query.take();
        for (key, list) in [
            ("provide-xfr", &mut zone.allow_transfer),
            ("allow-notify", &mut zone.allow_notify),
            ("allow-query", query.get_or_insert_default()),
        ] {
            let blocked: Vec<(Prefix, &Setting)> = settings
                .iter()
                .filter(|s| s.key == key && s.values.get(1).is_some_and(|k| k == "BLOCKED"))
                .flat_map(|s| {
                    ip_spec(&s.values[0])
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |p| (p, s))
                })
                .collect();
            let Some((_, first_blocked)) = blocked.first() else {
                continue;
            };
            let prefixes: Vec<Prefix> = blocked.iter().map(|(p, _)| *p).collect();
            let (kept, dropped) = without_denied(std::mem::take(list), &prefixes);
            *list = kept;
            self.out.untranslated(
                &first_blocked.loc,
                format!("{key}: ... BLOCKED"),
                format!(
                    "heron.toml has no deny entries: {dropped} allow entries that overlap the blocked \
                     addresses were left out; list the allowed addresses without them"
                ),
            );
        }
        let listed = settings.iter().any(|s| s.key == "allow-query");
        zone.allow_query = query.filter(|_| listed);
    }

    fn notify(&mut self, s: &Setting) -> Result<Vec<Peer>, ImportError> {
        let [addr, key, ..] = s.values.as_slice() else {
            return Err(ImportError::at(
                &s.loc,
                "notify: expected ADDRESS KEY|NOKEY",
            ));
        };
        let addr = parse_at_port(addr, 53).ok_or_else(|| {
            ImportError::at(&s.loc, format!("notify: '{addr}' is not an address"))
        })?;
        Ok(vec![Peer::plain(addr, self.key_name(s, key)?)])
    }

    fn zone_setting(&mut self, s: &Setting) {
        let says_yes = |s: &Setting| s.values.first().is_some_and(|v| v == "yes");
        let (not_needed, advice) = match s.key.as_str() {
            "store-ixfr" | "create-ixfr" | "ixfr-size" | "ixfr-number" => (
                true,
                "Heron keeps IXFR history for every zone others may transfer (FILE.jnl)",
            ),
            "zonestats" => (true, "see [metrics] zone-metrics"),
            // Not needed only at NSD's default (black-box finding BT-11:
            // the other value was listed as not needed, the opposite).
            "multi-master-check" if !says_yes(s) => (true, "Heron asks its primaries in order"),
            "multi-master-check" => (
                false,
                "NSD asks every primary and takes the highest serial; Heron asks its primaries \
                 in order and takes the first that answers",
            ),
            "allow-axfr-fallback" if says_yes(s) => {
                (true, "Heron falls back to AXFR when IXFR fails")
            }
            "allow-axfr-fallback" => (
                false,
                "Heron falls back to AXFR when IXFR fails; NSD with no does not",
            ),
            "min-refresh-time" | "max-refresh-time" | "min-retry-time" | "max-retry-time"
            | "min-expire-time" | "max-expire-time" => (
                false,
                "Heron bounds the SOA timers for all zones in [secondary] (min-refresh, ...)",
            ),
            "size-limit-xfr" => (false, "set [secondary] max-transfer-bytes (for all zones)"),
            "outgoing-interface" => (false, "set [xfr] source, or `via ADDRESS` after a primary"),
            "notify-retry" => (false, "Heron sends a NOTIFY at most 5 times"),
            "rrl-whitelist" => (
                false,
                "Heron's [rrl] has no whitelist classes; see [rrl] exempt",
            ),
            _ => (
                false,
                "no Heron equivalent: check whether the behaviour matters",
            ),
        };
        let setting = format!("zone: {} {}", s.key, s.values.join(" "));
        if not_needed {
            self.out.not_needed(&s.loc, setting, advice);
        } else {
            self.out.untranslated(&s.loc, setting, advice);
        }
    }

    fn consumer(
        &mut self,
        zone: Zone,
        member_pattern: Option<String>,
        loc: &Loc,
    ) -> Result<(), ImportError> {
        let mut catalog = CatalogConsumer {
            zone: zone.origin,
            primaries: zone.primaries,
            allow_transfer: zone.allow_transfer,
            notify: zone.notify,
            member_primaries: Vec::new(),
            member_allow_transfer: Vec::new(),
            member_allow_notify: Vec::new(),
            member_notify: Vec::new(),
            groups: Vec::new(),
        };
        if let Some(name) = member_pattern {
            let pattern = self.patterns.get(&name).cloned().unwrap_or_default();
            let mut settings = Vec::new();
            self.expand(&pattern, 0, &mut settings)?;
            let mut member = Zone::default();
            for s in &settings {
                match s.key.as_str() {
                    "request-xfr" => self.request_xfr(s, &mut member)?,
                    "provide-xfr" => member.allow_transfer.extend(self.acl(s)?),
                    "notify" => member.notify.extend(self.notify(s)?),
                    _ => self.zone_setting(s),
                }
            }
            catalog.member_primaries = member.primaries;
            catalog.member_allow_transfer = member.allow_transfer;
            catalog.member_notify = member.notify;
        }
        if catalog.primaries.is_empty() {
            self.out.untranslated(
                loc,
                "catalog: consumer",
                "a consumer catalog zone needs request-xfr:; not imported",
            );
            return Ok(());
        }
        self.out.catalogs.push(catalog);
        Ok(())
    }
}

/// NSD's ip-spec: an address, `A/LEN`, `A&MASK` or `A-B`; a `@port`
/// (a source port) cannot be translated.
fn ip_spec(spec: &str) -> Result<Vec<Prefix>, String> {
    if spec.contains('@') {
        return Err("Heron's access lists do not match source ports".into());
    }
    if let Some((addr, mask)) = spec.split_once('&') {
        let mask: IpAddr = mask.parse().map_err(|_| format!("bad mask in {spec}"))?;
        let bits = match mask {
            IpAddr::V4(m) => (u32::from(m) as u128) << 96,
            IpAddr::V6(m) => u128::from(m),
        };
        let ones = bits.leading_ones();
        if bits != 0 && ones + bits.trailing_zeros() != 128 {
            return Err(format!("{spec}: the mask is not contiguous"));
        }
        return Ok(vec![format!("{addr}/{ones}").parse()?]);
    }
    if let Some((a, b)) = spec.split_once('-') {
        let (a, b): (IpAddr, IpAddr) = match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return Err(format!("{spec} is not an address range")),
        };
        return range_prefixes(a, b).ok_or_else(|| format!("{spec} is not an address range"));
    }
    Ok(vec![spec.parse()?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::model::{Note, NoteKind};
    use crate::import::testutil::{Rng, mutate, write_files};

    const SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0";

    /// DL-7: NSD's cookie settings point to `[cookies]`, not "no Heron
    /// equivalent" (the secret is left out when the notes are printed).
    #[test]
    fn cookie_settings_point_to_cookies() {
        let dir = tempfile::tempdir().unwrap();
        let text =
            "server:\n answer-cookie: yes\n cookie-secret: \"0123456789abcdef0123456789abcdef\"\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let said: Vec<&Note> = (got.notes.iter())
            .filter(|n| n.setting.contains("cookie"))
            .collect();
        assert_eq!(said.len(), 2, "{:?}", got.notes);
        for note in said {
            assert!(note.advice.contains("[cookies]"), "{note:?}");
        }
    }

    /// DL-6: a relative `$INCLUDE` NSD finds from zonesdir and Heron from
    /// the zone file's folder is a step to do, with both paths; one both
    /// find alike is not.
    #[test]
    fn a_relative_include_found_elsewhere_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            "server:\n zonesdir: {d}\n\
             zone:\n name: deep.test\n zonefile: sub/deep.test.zone\n\
             zone:\n name: top.test\n zonefile: top.test.zone\n"
        );
        let path = write_files(
            dir.path(),
            &[
                ("nsd.conf", &conf),
                ("sub/deep.test.zone", "$TTL 60\n$INCLUDE sub/hosts.inc\n"),
                (
                    "top.test.zone",
                    "$INCLUDE sub/hosts.inc\n$include /abs/y.inc\n",
                ),
            ],
        );
        let got = parse(&path).unwrap();
        let said: Vec<&Note> = (got.notes.iter())
            .filter(|n| n.setting.contains("$INCLUDE"))
            .collect();
        assert_eq!(said.len(), 1, "{:?}", got.notes);
        assert_eq!(said[0].setting, "zone: deep.test: $INCLUDE sub/hosts.inc");
        assert_eq!(said[0].kind, NoteKind::ToDo);
        let nsd = dir.path().join("sub/hosts.inc");
        assert!(
            said[0].advice.contains(&nsd.display().to_string()),
            "{}",
            said[0].advice
        );
        assert!(got.zone_data.contains(&nsd), "{:?}", got.zone_data);
    }

    fn conf() -> String {
        format!(
            "server:\n  ip-address: 127.0.0.1@5353\n  ip-address: ::1@5353\n  zonesdir: \"/srv/zones\"\n\
             \x20 identity: \"ns1\"  # a comment\n  rrl-ratelimit: 100\n  rrl-slip: 3\n\
             remote-control:\n  control-enable: no\n\
             key:\n  name: \"xfr.test\"\n  algorithm: hmac-sha512\n  secret: \"{SECRET}\"\n\
             pattern:\n  name: out\n  provide-xfr: 192.0.2.0/24 xfr.test\n  provide-xfr: 198.51.100.1-198.51.100.2 NOKEY\n\
             \x20 notify: 192.0.2.7@5300 xfr.test\n  store-ixfr: yes\n\
             zone:\n  name: \"example.com\"\n  zonefile: \"%s.zone\"\n  include-pattern: \"out\"\n\
             zone:\n  name: example.net.\n  request-xfr: 192.0.2.1 xfr.test\n  allow-notify: 192.0.2.1 xfr.test\n\
             include: \"more/*.conf\"\n"
        )
    }

    #[test]
    fn a_primary_a_secondary_keys_acls_and_includes_are_translated() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_files(
            dir.path(),
            &[
                ("nsd.conf", &conf()),
                (
                    "more/b.conf",
                    "zone:\n name: b.test\n zonefile: /abs/b.zone\n",
                ),
            ],
        );
        let got = parse(&path).unwrap();
        assert_eq!(
            got.listen,
            [
                "127.0.0.1:5353".parse().unwrap(),
                "[::1]:5353".parse().unwrap()
            ]
        );
        assert_eq!(got.identity.as_deref(), Some("ns1"));
        let rrl = got.rrl.as_ref().unwrap();
        assert_eq!((rrl.responses_per_second, rrl.slip), (Some(100), Some(3)));
        assert_eq!(got.keys.len(), 1);
        assert_eq!(got.keys[0].algorithm, "hmac-sha512");
        let com = &got.zones[0];
        assert_eq!(
            com.file.as_deref(),
            Some(Path::new("/srv/zones/example.com.zone"))
        );
        let acl: Vec<String> = com.allow_transfer.iter().map(Rule::heron).collect();
        assert_eq!(
            acl,
            ["192.0.2.0/24 key xfr.test", "198.51.100.1", "198.51.100.2"]
        );
        assert_eq!(com.notify[0].heron(), "192.0.2.7:5300 key xfr.test");
        let net = &got.zones[1];
        assert_eq!(net.origin, "example.net");
        assert!(net.file.is_none());
        assert_eq!(net.primaries[0].heron(), "192.0.2.1 key xfr.test");
        assert_eq!(got.zones[2].file.as_deref(), Some(Path::new("/abs/b.zone")));
        let not_needed: Vec<&str> = got
            .notes
            .iter()
            .filter(|n| n.kind == NoteKind::NotNeeded)
            .map(|n| n.setting.as_str())
            .collect();
        assert!(
            not_needed.contains(&"zone: store-ixfr yes"),
            "{not_needed:?}"
        );
        assert!(
            got.notes
                .iter()
                .all(|n| !n.setting.contains(SECRET) && !n.advice.contains(SECRET))
        );
    }

    #[test]
    fn the_debian_default_listens_everywhere_with_nsd_rate_limit() {
        let dir = tempfile::tempdir().unwrap();
        let debian = "# NSD configuration file for Debian.\n\nserver:\n        # log only to syslog.\n\
                      \x20       log-only-syslog: yes\n\n\ninclude: \"nsd.conf.d/*.conf\"\n";
        let path = write_files(dir.path(), &[("nsd.conf", debian)]);
        let got = parse(&path).unwrap();
        assert_eq!(
            got.listen,
            ["0.0.0.0:53".parse().unwrap(), "[::]:53".parse().unwrap()]
        );
        assert_eq!(got.rrl.unwrap().responses_per_second, Some(200));
        assert!(got.zones.is_empty());
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting == "server: log-only-syslog" && n.loc.line == 5)
        );
    }

    #[test]
    fn blocked_entries_leave_out_the_allows_they_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: a.test\n zonefile: a.zone\n provide-xfr: 192.0.2.0/24 NOKEY\n\
                    \x20provide-xfr: 198.51.100.0/24 NOKEY\n provide-xfr: 192.0.2.9 BLOCKED\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let acl: Vec<String> = got.zones[0]
            .allow_transfer
            .iter()
            .map(Rule::heron)
            .collect();
        assert_eq!(acl, ["198.51.100.0/24"]);
        assert!(
            got.notes
                .iter()
                .any(|n| n.loc.line == 6 && n.setting.contains("BLOCKED"))
        );
    }

    /// NSD's zone `allow-query` admits only what it lists (a key where
    /// it names one), BLOCKED entries cut out; a zone without it admits
    /// everyone.
    #[test]
    fn allow_query_becomes_the_zones_allow_query() {
        let dir = tempfile::tempdir().unwrap();
        let text = "key:\n name: q.key\n algorithm: hmac-sha256\n secret: \"c2VjcmV0\"\n\
                    zone:\n name: a.test\n zonefile: a.zone\n allow-query: 127.0.0.0/30 NOKEY\n\
                    \x20allow-query: 192.0.2.0/24 q.key\n allow-query: 198.51.100.0/24 NOKEY\n\
                    \x20allow-query: 198.51.100.7 BLOCKED\n\
                    zone:\n name: b.test\n zonefile: b.zone\n allow-query: 192.0.2.1 BLOCKED\n\
                    zone:\n name: c.test\n zonefile: c.zone\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let query = |origin: &str| -> Option<Vec<String>> {
            let zone = got.zones.iter().find(|z| z.origin == origin).unwrap();
            (zone.allow_query.as_ref()).map(|rules| rules.iter().map(Rule::heron).collect())
        };
        let a = query("a.test").unwrap();
        assert_eq!(a, ["127.0.0.0/30", "192.0.2.0/24 key q.key"]);
        assert_eq!(query("b.test"), Some(Vec::new()), "BLOCKED alone: nobody");
        assert_eq!(query("c.test"), None, "everyone");
        assert!(
            !got.notes
                .iter()
                .any(|n| n.setting.contains("allow-query: 127"))
        );
    }

    /// NSD starts a comment only where a word starts: `b#c.zone` is a
    /// file name (nsd-checkconf prints it whole).
    #[test]
    fn a_hash_inside_a_word_is_part_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: b.test\n zonefile: /z/b#c.zone # said\n #whole line\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        assert_eq!(got.zones[0].file.as_deref(), Some(Path::new("/z/b#c.zone")));
    }

    /// A backslash in a quoted word keeps the character after it, a quote
    /// too, as nsd-checkconf reads it (black-box finding DB-12).
    #[test]
    fn an_escaped_quote_stays_inside_its_word() {
        let file: Arc<Path> = Arc::from(Path::new("nsd.conf"));
        let mut got = Vec::new();
        let read = words("version: \"x\\\"y\" 'a\\b'", &file, |word, _, _| {
            got.push(word);
            Ok(())
        });
        assert!(read.is_ok(), "{read:?}");
        assert_eq!(got, ["version:", "x\\\"y", "a\\b"]);
    }

    /// Words without a keyword are refused as they are read: a file of
    /// them costs the words of one setting, not 55 octets per octet.
    #[test]
    fn a_setting_with_too_many_values_is_refused_as_it_is_read() {
        let file: Arc<Path> = Arc::from(Path::new("nsd.conf"));
        let text = format!("server:\n  {}\n", "a ".repeat(1_000_000));
        let mut read = 0;
        let counted = words(&text, &file, |_, _, _| {
            read += 1;
            Ok(())
        });
        assert!(counted.is_ok() && read == 1_000_001);
        let error = settings_of(&text, &file).unwrap_err();
        assert!(error.message.contains("more than 64 values"), "{error}");
    }

    #[test]
    fn malformed_configurations_are_errors_with_their_line() {
        let cases: &[(&str, u32, &str)] = &[
            ("server:\n  identity: \"open\n", 2, "not closed"),
            ("  identity: x\n", 1, "outside any section"),
            ("zone:\n name: a\n include-pattern: nope\n", 3, "no pattern"),
            (
                "pattern:\n name: p\n include-pattern: p\nzone:\n name: a\n include-pattern: p\n",
                3,
                "nested",
            ),
            (
                "zone:\n name: a\n provide-xfr: 192.0.2.1 nokey-defined\n",
                3,
                "not defined",
            ),
            ("include: \"missing.conf\"\n", 1, "cannot read"),
            ("include: \"nsd.conf\"\n", 1, "include loop"),
            ("server:\n port: fifty\n", 2, "number"),
            ("key:\n name: k\n secret: \"abc\" \"def\"\n", 3, "not shown"),
        ];
        for (text, line, needle) in cases {
            let dir = tempfile::tempdir().unwrap();
            let err = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap_err();
            assert_eq!(
                err.loc.as_ref().map(|l| l.line),
                Some(*line),
                "{text:?}: {err}"
            );
            assert!(err.message.contains(needle), "{text:?}: {err}");
            assert!(!err.to_string().contains("abc"), "a secret in {err}");
        }
    }

    #[test]
    fn a_tls_port_becomes_a_dot_listener_on_each_address() {
        let dir = tempfile::tempdir().unwrap();
        let text = "server:\n ip-address: 192.0.2.53\n ip-address: 192.0.2.53@853\n tls-port: 853\n\
                    \x20tls-service-key: /etc/nsd/key.pem\n tls-service-pem: /etc/nsd/chain.pem\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let tls = got.tls.unwrap();
        assert_eq!(
            tls.listen,
            ["192.0.2.53:853".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(tls.certificate, Path::new("/etc/nsd/chain.pem"));
        assert_eq!(got.listen, ["192.0.2.53:53".parse::<SocketAddr>().unwrap()]);
    }

    /// Without `tls-port`, NSD serves TLS on 853, where an ip-address
    /// carries it; with no ip-address on the TLS port it serves none, and
    /// no [tls] is written for it.
    #[test]
    fn tls_goes_only_where_nsd_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let keys = " tls-service-key: /etc/nsd/key.pem\n tls-service-pem: /etc/nsd/chain.pem\n";
        let default_port =
            format!("server:\n ip-address: 127.0.0.1@5300\n ip-address: 127.0.0.1@853\n{keys}");
        let got = parse(&write_files(dir.path(), &[("nsd.conf", &default_port)])).unwrap();
        let tls = got.tls.expect("[tls] on 853");
        assert_eq!(tls.listen, ["127.0.0.1:853".parse::<SocketAddr>().unwrap()]);
        assert_eq!(
            got.listen,
            ["127.0.0.1:5300".parse::<SocketAddr>().unwrap()]
        );
        let nowhere = format!("server:\n ip-address: 127.0.0.1@5300\n tls-port: 5301\n{keys}");
        let got = parse(&write_files(dir.path(), &[("nsd.conf", &nowhere)])).unwrap();
        assert!(got.tls.is_none());
        assert_eq!(
            got.listen,
            ["127.0.0.1:5300".parse::<SocketAddr>().unwrap()]
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.advice.contains("serves no DNS over TLS"))
        );
    }

    /// A secondary zone without allow-notify: NSD refuses its NOTIFYs,
    /// Heron takes them from the primaries; the import says so.
    /// NSD's defaults apply without a `server:` clause too, and are
    /// listed as when one is there.
    #[test]
    fn defaults_are_listed_without_a_server_clause() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: a.test\n zonefile: /z/a.zone\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let listed: Vec<&str> = (got.notes.iter())
            .filter(|n| n.loc.line == 1)
            .map(|n| n.setting.as_str())
            .collect();
        for default in [
            "minimal-responses",
            "hide-version",
            "hide-identity",
            "rrl-ratelimit",
        ] {
            assert!(
                listed.iter().any(|s| s.starts_with(default)),
                "{default}: {listed:?}"
            );
        }
        assert!(got.rrl.is_some());
    }

    #[test]
    fn a_secondary_without_allow_notify_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: a.test\n request-xfr: 192.0.2.1 NOKEY\n\
                    zone:\n name: b.test\n request-xfr: 192.0.2.1 NOKEY\n allow-notify: 192.0.2.1 NOKEY\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let said: Vec<&str> = (got.notes.iter())
            .filter(|n| n.setting.ends_with("no allow-notify"))
            .map(|n| n.setting.as_str())
            .collect();
        assert_eq!(said, ["zone: a.test: no allow-notify"]);
    }

    /// `allow-axfr-fallback` and `multi-master-check` are not needed at
    /// NSD's defaults only; the other values are behaviour Heron does not
    /// have, listed as not translated (black-box finding BT-11).
    #[test]
    fn transfer_settings_are_not_needed_only_at_their_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone:\n name: a.test\n request-xfr: 192.0.2.1 NOKEY\n\
                    \x20allow-notify: 192.0.2.1 NOKEY\n allow-axfr-fallback: yes\n\
                    \x20multi-master-check: no\n\
                    zone:\n name: b.test\n request-xfr: 192.0.2.1 NOKEY\n\
                    \x20allow-notify: 192.0.2.1 NOKEY\n allow-axfr-fallback: no\n\
                    \x20multi-master-check: yes\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        let kind = |setting: &str| {
            let note = got.notes.iter().find(|n| n.setting.ends_with(setting));
            note.map(|n| n.kind)
                .unwrap_or_else(|| panic!("{setting}: {:?}", got.notes))
        };
        assert_eq!(kind("allow-axfr-fallback yes"), NoteKind::NotNeeded);
        assert_eq!(kind("multi-master-check no"), NoteKind::NotNeeded);
        assert_eq!(kind("allow-axfr-fallback no"), NoteKind::Untranslated);
        assert_eq!(kind("multi-master-check yes"), NoteKind::Untranslated);
    }

    #[test]
    fn nsd_catalogs_become_producers_members_and_consumers() {
        let dir = tempfile::tempdir().unwrap();
        let text = "pattern:\n name: members\n request-xfr: 192.0.2.1 NOKEY\n\
                    zone:\n name: cat.test\n catalog: consumer\n catalog-member-pattern: members\n\
                    \x20request-xfr: 192.0.2.1 NOKEY\n\
                    zone:\n name: gen.test\n zonefile: gen.zone\n catalog: producer\n\
                    zone:\n name: m.test\n zonefile: m.zone\n catalog-producer-zone: gen.test\n";
        let got = parse(&write_files(dir.path(), &[("nsd.conf", text)])).unwrap();
        assert_eq!(got.catalogs.len(), 1);
        assert_eq!(got.catalogs[0].member_primaries[0].heron(), "192.0.2.1");
        assert!(got.zones[0].catalog_generate);
        assert!(
            got.zones[0].file.is_none(),
            "a generated catalog is Heron's own file"
        );
        assert_eq!(got.zones[1].catalog_member.as_deref(), Some("gen.test"));
    }

    #[test]
    fn mutated_configurations_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        write_files(
            dir.path(),
            &[("more/b.conf", "zone:\n name: b.test\n zonefile: b\n")],
        );
        let mut rng = Rng::new(41);
        let path = dir.path().join("nsd.conf");
        for _ in 0..2000 {
            std::fs::write(&path, mutate(&conf(), &mut rng)).unwrap();
            let _ = parse(&path);
        }
    }

    #[test]
    fn a_large_configuration_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("server:\n ip-address: 127.0.0.1\n");
        for i in 0..50_000 {
            text.push_str(&format!(
                "zone:\n name: z{i}.test\n zonefile: \"%s.zone\"\n"
            ));
        }
        let got = parse(&write_files(dir.path(), &[("nsd.conf", &text)])).unwrap();
        assert_eq!(got.zones.len(), 50_000);
        assert_eq!(
            got.zones[49_999].file.as_deref(),
            Some(Path::new("/etc/nsd/z49999.test.zone"))
        );
    }
}
