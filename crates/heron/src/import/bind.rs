//! named.conf (BIND 9): `options`, `zone`, `key`, `acl`,
//! `masters`/`primaries`, `server`, `tls` and `include`, with the
//! zone settings BIND inherits from `options`.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::bind_syntax::{Statement, parse_file};
use super::model::{
    CatalogConsumer, Imported, Peer, Prefix, Rrl, Rule, TlsListener, TsigKey, UPDATE_ADVICE, Zone,
    key_import_advice, signing_advice, without_all,
};
use super::signing::{BIND_DURATIONS, PolicyBuilder};
use super::source::{ImportError, Loc, resolve, zone_file_includes};

/// Lists named within lists (an `acl` naming another, a primaries list
/// naming another).
const MAX_LIST_DEPTH: usize = 16;

/// Reads `path` and everything it includes.
pub fn parse(path: &Path) -> Result<Imported, ImportError> {
    let (statements, files) = parse_file(path)?;
    let root = Loc {
        file: std::sync::Arc::from(path),
        line: 1,
    };
    let mut interpreter = Interpreter::new(&statements, root)?;
    interpreter.run(&statements)?;
    // The files zone files include, found as they were read, go after.
    let included = std::mem::replace(&mut interpreter.out.sources, files);
    interpreter.out.sources.files.extend(included.files);
    Ok(interpreter.out)
}

struct Interpreter<'a> {
    out: Imported,
    options: Option<&'a Statement>,
    /// The one view translated (matching every client), while its zones are.
    view: Option<&'a Statement>,
    acls: HashMap<String, &'a Statement>,
    primaries: HashMap<String, &'a Statement>,
    tls: HashMap<String, &'a Statement>,
    keys: HashSet<String>,
    /// `server ADDRESS { keys { NAME; }; }`: the key for that peer.
    /// `server PREFIX { keys { K; }; }`: the most specific prefix holding
    /// a peer's address gives its key, as in BIND.
    server_keys: Vec<(Prefix, Option<String>)>,
    directory: PathBuf,
    /// `catalog-zones` entries: catalog name and default primaries.
    catalogs: HashMap<String, Option<&'a Statement>>,
    /// A note said once, not once per zone.
    said: HashSet<&'static str>,
    /// The file's first line: where defaults written nowhere are reported.
    root: Loc,
}

/// Top-level statements Heron needs nothing for.
const TOP_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "controls",
        "heron ctl talks over [server] control, a Unix socket",
    ),
    (
        "logging",
        "Heron logs to stderr (the journal under systemd); see [log]",
    ),
    (
        "trust-anchors",
        "Heron is authoritative only: it validates nothing",
    ),
    (
        "managed-keys",
        "Heron is authoritative only: it validates nothing",
    ),
    (
        "trusted-keys",
        "Heron is authoritative only: it validates nothing",
    ),
];

impl<'a> Interpreter<'a> {
    fn new(statements: &'a [Statement], root: Loc) -> Result<Interpreter<'a>, ImportError> {
        let mut it = Interpreter {
            out: Imported::default(),
            options: None,
            view: None,
            acls: HashMap::new(),
            primaries: HashMap::new(),
            tls: HashMap::new(),
            keys: HashSet::new(),
            server_keys: Vec::new(),
            directory: PathBuf::from("."),
            catalogs: HashMap::new(),
            said: HashSet::new(),
            root,
        };
        for s in statements {
            let name = s.arg(1).unwrap_or("").to_string();
            match s.name() {
                "options" => it.options = Some(s),
                "acl" => drop(it.acls.insert(name, s)),
                "masters" | "primaries" => drop(it.primaries.insert(name, s)),
                "tls" => drop(it.tls.insert(name, s)),
                "key" => it.key(s)?,
                _ => {}
            }
        }
        for s in statements.iter().filter(|s| s.name() == "server") {
            it.server(s);
        }
        if let Some(options) = it.options
            && let Some(dir) = options.child("directory").and_then(|d| d.arg(1))
        {
            it.directory = PathBuf::from(dir);
        }
        Ok(it)
    }

    fn run(&mut self, statements: &'a [Statement]) -> Result<(), ImportError> {
        self.options_statement()?;
        for s in statements.iter().filter(|s| s.name() == "dnssec-policy") {
            self.dnssec_policy(s);
        }
        let views = statements.iter().filter(|s| s.name() == "view").count();
        for s in statements {
            match s.name() {
                "options" | "acl" | "masters" | "primaries" | "tls" | "key" | "server" => {}
                "zone" => self.zone(s)?,
                "view" => self.view(s, views == 1)?,
                "dnssec-policy" => {}
                "key-store" => self
                    .out
                    .untranslated(s.loc(), s.summary(), signing_advice("BIND")),
                "statistics-channels" => {
                    self.out
                        .untranslated(s.loc(), s.summary(), "see [metrics] listen (Prometheus)")
                }
                name => match TOP_NOT_NEEDED.iter().find(|(n, _)| *n == name) {
                    Some((_, advice)) => self.out.not_needed(s.loc(), s.summary(), *advice),
                    None => self
                        .out
                        .untranslated(s.loc(), s.summary(), "no Heron equivalent"),
                },
            }
        }
        Ok(())
    }

    fn key(&mut self, s: &Statement) -> Result<(), ImportError> {
        let name = s
            .arg(1)
            .ok_or_else(|| ImportError::at(s.loc(), "key without a name"))?;
        // named requires both, once each.
        let algorithm = s
            .child("algorithm")
            .and_then(|a| a.arg(1))
            .ok_or_else(|| ImportError::at(s.loc(), format!("key {name}: no algorithm")))?
            .to_ascii_lowercase();
        let secrets = s.children().iter().filter(|c| c.name() == "secret").count();
        if secrets > 1 {
            let said = format!("key {name}: secret given {secrets} times (not shown)");
            return Err(ImportError::at(s.loc(), said));
        }
        let secret = s.child("secret");
        if secret.is_some_and(|secret| secret.arg(2).is_some()) {
            // As named-checkconf; the value is never shown.
            let said = format!("key {name}: secret takes one value (not shown)");
            return Err(ImportError::at(s.loc(), said));
        }
        let secret = secret
            .and_then(|a| a.arg(1))
            .ok_or_else(|| ImportError::at(s.loc(), format!("key {name}: no secret")))?;
        for child in s.children() {
            if !matches!(child.name(), "algorithm" | "secret") {
                let setting = format!("key {name}: {}", child.summary());
                (self.out).untranslated(child.loc(), setting, "not a key setting Heron knows");
            }
        }
        self.keys.insert(name.to_string());
        self.out.keys.push(TsigKey {
            name: name.to_string(),
            algorithm,
            secret: secret.to_string(),
            loc: s.loc().clone(),
        });
        Ok(())
    }

    fn server(&mut self, s: &'a Statement) {
        let prefix = s.arg(1).and_then(|a| a.parse::<Prefix>().ok());
        if let Some(prefix) = prefix {
            // named uses the most specific block alone: one without keys
            // means no key for its addresses, whatever a wider one says.
            if !self.server_keys.iter().any(|(p, _)| *p == prefix) {
                self.server_keys.push((prefix, None));
            }
        }
        for child in s.children() {
            match (child.name(), prefix) {
                ("keys", Some(prefix)) => {
                    // `keys { NAME; };` or, as the ARM writes it, `keys NAME;`.
                    let key = (child.children().first().map(Statement::name)).or(child.arg(1));
                    if let Some(key) = key {
                        self.server_keys.retain(|(p, _)| *p != prefix);
                        self.server_keys.push((prefix, Some(key.to_string())));
                    }
                }
                _ => self.out.untranslated(
                    child.loc(),
                    format!("server {}: {}", s.arg(1).unwrap_or(""), child.summary()),
                    "Heron has no per-peer settings besides its TSIG key",
                ),
            }
        }
    }

    fn say_once(&mut self, what: &'static str, loc: &Loc, setting: &str, advice: &str) {
        if self.said.insert(what) {
            self.out.untranslated(loc, setting, advice);
        }
    }
}

/// `options` settings that zones inherit, handled with each zone.
const ZONE_DEFAULTS: &[&str] = &[
    "allow-transfer",
    "also-notify",
    "notify",
    "allow-notify",
    "allow-query",
    "directory",
    "catalog-zones",
    "dnssec-policy",
    "inline-signing",
    "masterfile-format",
];

/// `options` settings with no Heron equivalent needed.
const OPTIONS_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "pid-file",
        "Heron writes no pid file; systemd tracks the process",
    ),
    (
        "session-keyfile",
        "Heron makes no session key: updates are signed with the keys of [[key]]",
    ),
    (
        "managed-keys-directory",
        "Heron is authoritative only: it validates nothing",
    ),
    (
        "bindkeys-file",
        "Heron is authoritative only: it validates nothing",
    ),
    ("dump-file", "Heron has no cache to dump"),
    ("statistics-file", "see [metrics] and `heron ctl stats`"),
    ("memstatistics-file", "see [metrics]"),
    (
        "key-directory",
        "Heron keeps the keys it signs with in the zone's key-directory; BIND's are imported from here with `heron keymgr -d KEYDIR ZONE import --from bind DIR`",
    ),
    (
        "check-names",
        "Heron loads names as the zone file writes them",
    ),
    ("zone-statistics", "see [metrics] zone-metrics"),
    (
        "ixfr-from-differences",
        "Heron computes IXFR differences at every reload",
    ),
    (
        "max-journal-size",
        "Heron keeps up to 16 MB of IXFR history per zone",
    ),
    ("transfer-format", "Heron sends many records per message"),
    ("minimal-responses", "Heron answers minimally too"),
    ("auth-nxdomain", "Heron is authoritative only"),
    (
        "empty-zones-enable",
        "Heron serves only the zones configured",
    ),
    ("querylog", "see [dnstap]"),
    (
        "allow-new-zones",
        "zones are added to heron.toml and applied by a reload",
    ),
];

/// `options` settings only a resolver has.
const RESOLVER_ONLY: &[&str] = &[
    "recursion",
    "allow-recursion",
    "allow-query-cache",
    "forwarders",
    "forward",
    "dnssec-validation",
    "max-cache-size",
    "prefetch",
    "qname-minimization",
    "resolver-query-timeout",
    "allow-recursion-on",
    "allow-query-cache-on",
    "response-policy",
    "dns64",
    "validate-except",
];

impl Interpreter<'_> {
    fn options_statement(&mut self) -> Result<(), ImportError> {
        self.out.listen = self.listen()?;
        let Some(options) = self.options else {
            self.identity_defaults(None);
            return Ok(());
        };
        self.identity_defaults(Some(options));
        if let Some(list) = options.child("allow-query") {
            self.out.allow_query = Some(self.aml(list, "allow-query"));
        }
        if let Some(list) = options.child("blackhole") {
            let prefixes = self.deny_elements(list.children(), true, 0);
            self.out.blackhole = fewest(prefixes);
        }
        if let Some(rate) = options.child("rate-limit") {
            self.rate_limit(rate);
        }
        self.catalog_zones(options);
        if options.child("minimal-responses").is_none() {
            self.out.untranslated(options.loc(), "minimal-responses (not set: BIND's default is no-auth-recursive)", "BIND adds the zone's NS records to the authority section of answers to non-recursive queries; Heron answers minimally, as BIND does with minimal-responses no-auth");
        }
        if options.child("recursion").is_none() {
            self.out.untranslated(options.loc(), "recursion (not set: BIND's default is yes)", "Heron is authoritative only: it answers from its zones and never recurses; clients that used this server as a resolver need another");
        }
        for child in options.children() {
            self.option_note("options", child);
        }
        Ok(())
    }

    /// What becomes of `child`, a setting of `block` (`options`, or the
    /// view translated).
    fn option_note(&mut self, block: &str, child: &Statement) {
        let name = child.name();
        let handled = [
            "listen-on",
            "listen-on-v6",
            "port",
            "version",
            "hostname",
            "server-id",
            "blackhole",
            "rate-limit",
        ];
        if handled.contains(&name) || ZONE_DEFAULTS.contains(&name) {
            return;
        }
        let setting = format!("{block}: {}", child.summary());
        if RESOLVER_ONLY.contains(&name) {
            let off = matches!(child.arg(1), Some("no" | "none"));
            let advice =
                "Heron is authoritative only: it answers from its zones and never recurses";
            if off {
                self.out.not_needed(child.loc(), setting, advice);
            } else {
                self.out.untranslated(child.loc(), setting, advice);
            }
            return;
        }
        let full = matches!(child.arg(1), Some("no" | "no-auth-recursive"));
        if name == "minimal-responses" && full {
            self.out.untranslated(
                child.loc(),
                setting,
                "BIND adds the zone's NS records to answers; Heron answers minimally",
            );
            return;
        }
        if let Some((_, advice)) = OPTIONS_NOT_NEEDED.iter().find(|(n, _)| *n == name) {
            self.out.not_needed(child.loc(), setting, *advice);
            return;
        }
        let advice = match name {
            "transfer-source" | "transfer-source-v6" => "set [xfr] source",
            "notify-source" | "notify-source-v6" => "set [xfr] notify-source",
            "tcp-clients" => "set [tcp] max-connections",
            "tcp-idle-timeout" | "tcp-initial-timeout" => {
                "set [tcp] idle-timeout (seconds, not 100 ms units)"
            }
            "edns-udp-size" | "max-udp-size" => "set [server] max-udp-payload",
            "transfers-in" | "transfers-per-ns" => "set [secondary] concurrency",
            "max-transfer-time-in" => "set [secondary] transfer-timeout (seconds, not minutes)",
            "min-refresh-time" | "max-refresh-time" | "min-retry-time" | "max-retry-time" => {
                "set [secondary] min-refresh / max-refresh / min-retry / max-retry (seconds)"
            }
            "allow-update" | "update-policy" | "allow-update-forwarding" => UPDATE_ADVICE,
            "answer-cookie" | "cookie-secret" | "require-server-cookie" => "see [cookies]",
            "dnstap" | "dnstap-output" | "dnstap-identity" | "dnstap-version" => "see [dnstap]",
            _ => "no Heron equivalent: check whether the behaviour matters",
        };
        self.out.untranslated(child.loc(), setting, advice);
    }

    /// BIND answers version.bind and hostname.bind unless told not to;
    /// Heron answers them only when told what to say.
    fn identity_defaults(&mut self, options: Option<&Statement>) {
        let get = |name: &str| options.and_then(|o| o.child(name));
        let loc = Some(options.map_or_else(|| self.root.clone(), |o| o.loc().clone()));
        match get("version").and_then(|v| v.arg(1)) {
            Some("none") => {}
            Some(text) => self.out.version = Some(text.to_string()),
            None => {
                if let Some(loc) = &loc {
                    self.out.untranslated(
                        loc,
                        "version (BIND's default: its version)",
                        "Heron answers version.bind REFUSED unless [server] version is set",
                    );
                }
            }
        }
        let server_id = get("server-id").filter(|id| !matches!(id.arg(1), Some("none") | None));
        match get("hostname").and_then(|v| v.arg(1)) {
            Some("none") => {}
            Some(text) => self.out.identity = Some(text.to_string()),
            None if server_id.is_none() => {
                if let Some(loc) = &loc {
                    self.out.untranslated(loc, "hostname (BIND's default: the host name)", "Heron answers hostname.bind and id.server REFUSED unless [server] identity is set");
                }
            }
            None => {}
        }
        if let Some(id) = server_id {
            self.server_id(id, get("hostname"));
        }
    }

    /// `server-id`: what BIND answers id.server and NSID with. Heron
    /// answers id.server with [server] identity, which answers
    /// hostname.bind too: identity takes the server-id, and where BIND's
    /// hostname.bind said something else that is listed.
    fn server_id(&mut self, id: &Statement, hostname: Option<&Statement>) {
        let Some(text) = id.arg(1).filter(|t| *t != "hostname") else {
            let advice = "BIND answers id.server and NSID with the host name: write it as [server] identity and nsid";
            self.out.untranslated(id.loc(), id.summary(), advice);
            return;
        };
        self.out.nsid_hex = Some(text.bytes().map(|b| format!("{b:02x}")).collect());
        self.out.identity = Some(text.to_string());
        let hostname_said = match hostname.and_then(|h| h.arg(1)) {
            Some(h) if h == text => return,
            // named 9.18: NOERROR and no answer (black-box finding DB-10).
            Some("none") => "with no answer (hostname none)".to_string(),
            Some(h) => format!("\"{h}\""),
            None => "the host name (BIND's default)".to_string(),
        };
        let advice = format!(
            "written as [server] identity = \"{text}\", what Heron answers id.server with; \
             Heron answers hostname.bind with it too, where BIND answers {hostname_said}"
        );
        self.out.untranslated(id.loc(), id.summary(), advice);
    }
}

/// An address match list read so far: the rules, and whether a negated
/// element stopped it.
struct Matched {
    rules: Vec<Rule>,
    stopped: bool,
}

impl Interpreter<'_> {
    /// An address match list (`allow-transfer { ... }`) as allow rules.
    /// BIND takes the first element that matches, negated or not;
    /// heron.toml has no negation, so the list is read up to its first
    /// negated element and the rest is reported (narrower, never wider).
    fn aml(&mut self, list: &Statement, what: &str) -> Vec<Rule> {
        if list.words.len() > 1 {
            // `allow-transfer port 853 transport tls { ... }`: Heron cannot
            // tell transports apart, so the list would allow more.
            self.out.untranslated(
                list.loc(),
                list.summary(),
                "Heron cannot limit it to a port or transport: left out, so nobody is allowed; \
                 list the addresses to allow over every transport",
            );
            return Vec::new();
        }
        let matched = self.aml_elements(list.children(), what, 0);
        if matched.stopped && matched.rules.is_empty() {
            // `{ !192.0.2.66; any; }`: more than narrower, nothing is left.
            // An exempt list lets through; the others allow (DB-10).
            let advice = match what {
                "exempt-clients" => {
                    "nothing of this list is left, so no client is exempt \
                                     from rate limiting: list the exempt addresses"
                }
                _ => {
                    "nothing of this list is left, so Heron refuses every request it governs \
                      (an allow-query so cut answers no query at all): list the allowed addresses, \
                      or put the denied ones in [server] blackhole"
                }
            };
            let setting = format!("{what} (as translated: empty)");
            self.out.untranslated(list.loc(), setting, advice);
        }
        let mut rules = matched.rules;
        rules.dedup();
        rules
    }

    fn aml_elements(&mut self, elements: &[Statement], what: &str, depth: usize) -> Matched {
        let mut out = Matched {
            rules: Vec::new(),
            stopped: false,
        };
        for (i, e) in elements.iter().enumerate() {
            let negated = e.name().starts_with('!');
            if negated {
                let rest: Vec<String> = elements[i..].iter().map(Statement::summary).collect();
                self.out.untranslated(
                    e.loc(),
                    format!("{what} {{ {}; }}", rest.join("; ")),
                    "heron.toml has no negated entries: this element and those after it were \
                     left out (nobody gains access); list the allowed addresses without them",
                );
                out.stopped = true;
                return out;
            }
            let inner = self.aml_element(e, what, depth);
            out.rules.extend(inner.rules);
            if inner.stopped {
                out.stopped = true;
                return out;
            }
        }
        out
    }

    fn aml_element(&mut self, e: &Statement, what: &str, depth: usize) -> Matched {
        let plain = |rules| Matched {
            rules,
            stopped: false,
        };
        if e.block.is_some() && e.words.is_empty() {
            return self.aml_elements(e.children(), what, depth + 1);
        }
        let word = e.name();
        match (word, e.arg(1)) {
            ("any", None) => plain(anywhere(None)),
            ("none", None) => plain(Vec::new()),
            ("key", Some(key)) if super::defined_key(&self.keys, key).is_some() => plain(anywhere(
                super::defined_key(&self.keys, key).map(String::as_str),
            )),
            ("localhost", None) => {
                // Narrower, never wider: the host's loopback addresses,
                // not all of 127/8 (black-box finding DB-3).
                self.say_once("localhost", e.loc(), &format!("{what} {{ localhost; }}"), "BIND's localhost is every address of this host's interfaces; written as 127.0.0.1 and ::1: add the host's other addresses by hand where they are needed");
                plain(vec![rule("127.0.0.1", None), rule("::1", None)])
            }
            (name, None) if self.acls.contains_key(name) => {
                if depth >= MAX_LIST_DEPTH {
                    self.out.untranslated(
                        e.loc(),
                        format!("acl {name}"),
                        "acls nested too deep (a loop?); left out",
                    );
                    return plain(Vec::new());
                }
                let acl = self.acls[name];
                self.aml_elements(acl.children(), what, depth + 1)
            }
            (text, None) => match text.parse::<Prefix>() {
                Ok(prefix) => plain(vec![Rule { prefix, key: None }]),
                Err(_) => {
                    self.out.untranslated(e.loc(), format!("{what} {{ {text}; }}"), "not an address, prefix, key or acl Heron can translate (localnets, geoip, an unknown acl); left out");
                    plain(Vec::new())
                }
            },
            _ => {
                self.out.untranslated(
                    e.loc(),
                    format!("{what} {{ {}; }}", e.summary()),
                    "not an element Heron can translate (an undefined key?); left out",
                );
                plain(Vec::new())
            }
        }
    }

    /// `blackhole { ... }` (a deny list) read exactly: BIND takes the
    /// first element that matches, so a negated element excepts its
    /// addresses from the elements after it (`{ !127.0.0.5; 127.0.0.0/24; }`
    /// is 127.0.0.0/24 but 127.0.0.5, written as the prefixes around it).
    /// `deny`: whether the addresses listed are ignored (false inside a
    /// negation: they are excepted). A nested list's own negations only
    /// take addresses out of it, as in BIND. An element that cannot be
    /// read is listed: as a step to do where Heron would answer addresses
    /// BIND ignores, as not translated where it ignores more.
    fn deny_elements(&mut self, elements: &[Statement], deny: bool, depth: usize) -> Vec<Prefix> {
        let mut excepted: Vec<Prefix> = Vec::new();
        let mut denied = Vec::new();
        for e in elements {
            match negated(e) {
                Some(inner) => excepted.extend(self.deny_element(&inner, e, !deny, depth)),
                None => {
                    for prefix in self.deny_element(e, e, deny, depth) {
                        denied.extend(without_all(prefix, &excepted));
                    }
                }
            }
        }
        denied
    }

    /// The addresses `e` (`written` as the list has it) matches, for
    /// [`Self::deny_elements`].
    fn deny_element(
        &mut self,
        e: &Statement,
        written: &Statement,
        deny: bool,
        depth: usize,
    ) -> Vec<Prefix> {
        let p = |text: &str| text.parse::<Prefix>().expect("a prefix");
        if e.block.is_some() && e.words.is_empty() {
            return self.deny_elements(e.children(), deny, depth + 1);
        }
        match (e.name(), e.arg(1)) {
            ("any", None) => vec![p("0.0.0.0/0"), p("::/0")],
            // BIND matches blackhole by address alone: no key matches.
            ("none", None) | ("key", Some(_)) => Vec::new(),
            ("localhost", None) => {
                self.say_once("blackhole localhost", e.loc(), "blackhole { localhost; }", "BIND's localhost is every address of this host's interfaces; written as 127.0.0.0/8 and ::1 (the loopback addresses, the host's others left to add by hand)");
                vec![p("127.0.0.0/8"), p("::1")]
            }
            (name, None) if self.acls.contains_key(name) && depth < MAX_LIST_DEPTH => {
                let acl = self.acls[name];
                self.deny_elements(acl.children(), deny, depth + 1)
            }
            (text, None) if text.parse::<Prefix>().is_ok() => vec![p(text)],
            _ => {
                let setting = format!("blackhole {{ {}; }}", written.summary());
                if deny {
                    self.out.step_to_do(written.loc(), setting, "BIND ignores the addresses this element names, which Heron cannot name (localnets, geoip, an unknown acl, acls nested too deep): Heron would answer them; add their prefixes to [server] blackhole");
                } else {
                    self.out.untranslated(written.loc(), setting, "BIND answers the addresses this element names, which Heron cannot name (localnets, geoip, an unknown acl, acls nested too deep): Heron ignores those of them the elements after it name (nobody gains access); list the addresses to ignore without them");
                }
                Vec::new()
            }
        }
    }

    /// `primaries`, `also-notify`: addresses with port, key and tls, or
    /// names of primaries lists. `port` after the statement's name is
    /// the list's default (`outer`: that of the list naming this one),
    /// else `options { port }` (or `tls-port` for TLS), as BIND sends.
    fn peers(&mut self, list: &Statement, outer: Option<u16>, depth: usize) -> Vec<Peer> {
        let port = word_after(&list.words, "port")
            .and_then(|p| p.parse().ok())
            .or(outer);
        let mut out = Vec::new();
        for e in list.children() {
            let name = e.name();
            if let Ok(ip) = name.parse::<IpAddr>() {
                out.push(self.peer(e, ip, port));
            } else if let Some(named) = self.primaries.get(name).copied() {
                if depth >= MAX_LIST_DEPTH {
                    self.out.untranslated(
                        e.loc(),
                        format!("primaries {name}"),
                        "lists nested too deep (a loop?); left out",
                    );
                    continue;
                }
                out.extend(self.peers(named, port, depth + 1));
            } else {
                self.out.untranslated(
                    e.loc(),
                    e.summary(),
                    "not an address or a primaries list; left out",
                );
            }
        }
        out
    }

    /// The port BIND sends to when a peer names none: `options { port }`
    /// (black-box finding DL-3: NOTIFY and transfers went to 53), or
    /// over TLS `options { tls-port }`; 53 and 853 by default.
    fn default_port(&self, tls: bool) -> u16 {
        let (option, default) = match tls {
            true => ("tls-port", 853),
            false => ("port", 53),
        };
        let set = self
            .options
            .and_then(|o| o.child(option))
            .and_then(|p| p.arg(1));
        set.and_then(|p| p.parse().ok()).unwrap_or(default)
    }

    /// The key of the most specific `server` prefix holding `ip`, if
    /// that block has one.
    fn server_key(&self, ip: IpAddr) -> Option<String> {
        let holding = self.server_keys.iter().filter(|(p, _)| p.contains(ip));
        holding
            .max_by_key(|(p, _)| p.len)
            .and_then(|(_, k)| k.clone())
    }

    /// A primary reached over TLS by the `tls NAME` block: checked against
    /// its `ca-file` for its `remote-hostname`, or (as BIND checks it
    /// without one) for its address; unchecked (opportunistic) without a
    /// `ca-file`. What Heron cannot do alike is listed: client
    /// certificates, protocols and ciphers, a second CA file.
    fn client_tls(&mut self, e: &Statement, name: &str, ip: IpAddr) -> Option<String> {
        let block = self.tls.get(name).copied()?;
        for setting in [
            "cert-file",
            "key-file",
            "protocols",
            "ciphers",
            "cipher-suites",
        ] {
            if let Some(c) = block.child(setting) {
                let what = format!("tls {name}: {}", c.summary());
                let why = "Heron's XoT client has no client certificate and uses rustls's protocols \
                           and ciphers (TLS 1.2 and 1.3): check that the primary accepts it";
                self.out.untranslated(c.loc(), what, why);
            }
        }
        let ca = block.child("ca-file").and_then(|c| c.arg(1))?;
        let ca = resolve(&self.directory, ca);
        match &self.out.tls_ca {
            Some(first) if *first != ca => {
                let what = format!("tls {name}: ca-file {}", ca.display());
                let why = format!(
                    "Heron has one [secondary] tls-ca ({}): put both CAs in that file, or this \
                     primary's certificate is refused",
                    first.display()
                );
                self.out.untranslated(e.loc(), what, why);
            }
            _ => self.out.tls_ca = Some(ca),
        }
        let host = block.child("remote-hostname").and_then(|c| c.arg(1));
        Some(host.map_or_else(|| ip.to_string(), str::to_string))
    }

    fn peer(&mut self, e: &Statement, ip: IpAddr, list_port: Option<u16>) -> Peer {
        let tls = word_after(&e.words, "tls");
        let port = word_after(&e.words, "port")
            .and_then(|p| p.parse().ok())
            .or(list_port)
            .unwrap_or_else(|| self.default_port(tls.is_some()));
        let named = word_after(&e.words, "key")
            .map(str::to_string)
            .or_else(|| self.server_key(ip));
        let key = named.map(|k| match super::defined_key(&self.keys, &k) {
            Some(defined) => defined.clone(),
            None => {
                // Written as named: check-config then says the key is
                // missing, rather than the peer going unsigned.
                let why = "key not defined in this configuration: written as named, define it";
                self.out.untranslated(e.loc(), format!("{ip} key {k}"), why);
                k
            }
        });
        let mut peer = Peer::plain(SocketAddr::new(ip, port), key);
        if let Some(tls) = tls {
            peer.tls = Some(self.client_tls(e, tls, ip));
        }
        for extra in ["source", "source-v6", "dscp"] {
            if word_after(&e.words, extra).is_some() {
                self.out.untranslated(
                    e.loc(),
                    e.summary(),
                    "per-peer source addresses: write `via ADDRESS` after the peer by hand",
                );
            }
        }
        peer
    }
}

/// `prefixes` without those another holds, each once.
fn fewest(mut prefixes: Vec<Prefix>) -> Vec<Prefix> {
    let all = prefixes.clone();
    let mut seen = Vec::new();
    prefixes.retain(|p| {
        let inside = all.iter().any(|q| q.len < p.len && q.overlaps(p));
        let again = seen.contains(p);
        seen.push(*p);
        !inside && !again
    });
    prefixes
}

/// A negated element (`!ELEMENT`, `! ELEMENT`, `!{ ... }`) without its
/// `!`; None when it is not negated.
fn negated(e: &Statement) -> Option<Statement> {
    let rest = e.name().strip_prefix('!')?;
    let mut inner = e.clone();
    match rest {
        "" => {
            inner.words.remove(0);
        }
        rest => inner.words[0] = rest.to_string(),
    }
    Some(inner)
}

fn word_after<'w>(words: &'w [String], name: &str) -> Option<&'w str> {
    let at = words.iter().position(|w| w == name)?;
    words.get(at + 1).map(String::as_str)
}

fn rule(prefix: &str, key: Option<&str>) -> Rule {
    Rule {
        prefix: prefix.parse().expect("a valid prefix"),
        key: key.map(str::to_string),
    }
}

/// Every address of both families, with `key`.
fn anywhere(key: Option<&str>) -> Vec<Rule> {
    vec![rule("0.0.0.0/0", key), rule("::/0", key)]
}

impl<'a> Interpreter<'a> {
    /// `listen-on` and `listen-on-v6` (BIND's defaults: every IPv4 and
    /// every IPv6 address, port 53 or `options { port }`).
    fn listen(&mut self) -> Result<Vec<SocketAddr>, ImportError> {
        let options = self.options;
        let children = options.map_or(&[][..], Statement::children);
        let port = match options.and_then(|o| o.child("port")) {
            Some(p) => p
                .arg(1)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| ImportError::at(p.loc(), "port: expected a number"))?,
            None => 53,
        };
        let mut plain = Vec::new();
        for (name, wildcard) in [
            ("listen-on", IpAddr::from([0u8; 4])),
            ("listen-on-v6", IpAddr::from([0u16; 8])),
        ] {
            let statements: Vec<&'a Statement> =
                children.iter().filter(|c| c.name() == name).collect();
            if statements.is_empty() {
                plain.push(SocketAddr::new(wildcard, port));
            }
            for s in statements {
                let port = match word_after(&s.words, "port") {
                    Some(p) => p
                        .parse()
                        .map_err(|_| ImportError::at(s.loc(), "port: expected a number"))?,
                    None => port,
                };
                let addrs = self.listen_addresses(s, wildcard, port);
                match (word_after(&s.words, "tls"), word_after(&s.words, "http")) {
                    (_, Some(_)) => self.out.untranslated(
                        s.loc(),
                        s.summary(),
                        "Heron has no DNS over HTTPS listener",
                    ),
                    (Some("none") | None, None) => plain.extend(addrs),
                    (Some(tls), None) => self.tls_listener(s, tls, addrs),
                }
            }
        }
        plain.dedup();
        Ok(plain)
    }

    fn listen_addresses(&mut self, s: &Statement, wildcard: IpAddr, port: u16) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for e in s.children() {
            match e.name() {
                "any" => out.push(SocketAddr::new(wildcard, port)),
                "none" => {}
                text => match text.parse::<IpAddr>() {
                    Ok(ip) => out.push(SocketAddr::new(ip, port)),
                    Err(_) => self.out.untranslated(
                        e.loc(),
                        format!("{} {{ {text}; }}", s.name()),
                        "Heron listens on addresses, not prefixes or acls: list the addresses",
                    ),
                },
            }
        }
        out
    }

    fn tls_listener(&mut self, s: &Statement, name: &str, addrs: Vec<SocketAddr>) {
        let files = self.tls.get(name).and_then(|t| {
            let key = t.child("key-file")?.arg(1)?;
            let cert = t.child("cert-file")?.arg(1)?;
            Some((
                resolve(&self.directory, cert),
                resolve(&self.directory, key),
            ))
        });
        let Some((certificate, key)) = files else {
            self.out.untranslated(s.loc(), s.summary(), "Heron needs a certificate and key for DNS over TLS ([tls] certificate, key); `ephemeral` has none");
            return;
        };
        match &mut self.out.tls {
            Some(tls) if tls.certificate == certificate => tls.listen.extend(addrs),
            Some(_) => self.out.untranslated(
                s.loc(),
                s.summary(),
                "Heron serves one certificate on all its TLS listeners; this one was left out",
            ),
            None => {
                self.out.tls = Some(TlsListener {
                    listen: addrs,
                    certificate,
                    key,
                })
            }
        }
    }

    fn rate_limit(&mut self, s: &Statement) {
        let mut rrl = Rrl::default();
        for c in s.children() {
            let number = c.arg(1).and_then(|v| v.parse::<u32>().ok());
            match (c.name(), number) {
                ("responses-per-second", Some(n)) => rrl.responses_per_second = Some(n),
                ("nxdomains-per-second", Some(n)) => rrl.nxdomains_per_second = Some(n),
                ("errors-per-second", Some(n)) => rrl.errors_per_second = Some(n),
                // BIND's window is the span its rates are counted over;
                // Heron's `window` is how often a limited bucket is logged.
                ("window", _) => self.out.untranslated(c.loc(), format!("rate-limit: {}", c.summary()), "BIND counts its rates over this window; Heron's [rrl] counts per second with its own decay, and its `window` is the interval between log lines about one limited bucket, so it is not carried over"),
                ("slip", Some(n)) => rrl.slip = Some(n),
                ("ipv4-prefix-length", Some(n)) => rrl.ipv4_prefix_length = u8::try_from(n).ok(),
                ("ipv6-prefix-length", Some(n)) => rrl.ipv6_prefix_length = u8::try_from(n).ok(),
                ("log-only", _) => rrl.log_only = c.arg(1) == Some("yes"),
                ("exempt-clients", _) => {
                    rrl.exempt = self.aml(c, "exempt-clients").into_iter().filter(|r| r.key.is_none()).map(|r| r.prefix).collect();
                }
                _ => self.out.untranslated(c.loc(), format!("rate-limit: {}", c.summary()), "Heron's [rrl] has responses, nxdomains and errors per second; referrals and NODATA count as responses, and its table is sized per worker (table-size)"),
            }
        }
        if rrl.responses_per_second.is_none() {
            // BIND limits nothing it was not given a rate for; Heron's
            // default would limit responses at 20 a second.
            rrl.responses_per_second = Some(0);
        }
        self.out.rrl = Some(rrl);
    }

    /// `catalog-zones { zone "NAME" [default-primaries { ... }] ...; }`.
    fn catalog_zones(&mut self, options: &'a Statement) {
        let Some(list) = options.child("catalog-zones") else {
            return;
        };
        for entry in list.children() {
            let (Some("zone"), Some(name)) = (entry.arg(0), entry.arg(1)) else {
                self.out
                    .untranslated(entry.loc(), entry.summary(), "not a catalog zone entry");
                continue;
            };
            let primaries = entry.block.as_ref().map(|_| entry);
            let others: Vec<&str> = entry.words[2..]
                .iter()
                .chain(&entry.after)
                .map(String::as_str)
                .filter(|w| !matches!(*w, "default-primaries" | "default-masters" | "port"))
                .filter(|w| Some(*w) != word_after(&entry.words, "port"))
                .collect();
            if !others.is_empty() {
                self.out.untranslated(entry.loc(), format!("catalog-zones zone {name}: {}", others.join(" ")), "Heron keeps members in [[catalog]] members-dir; other catalog options have no equivalent");
            }
            self.catalogs
                .insert(name.trim_end_matches('.').to_ascii_lowercase(), primaries);
        }
    }
}

/// An address match list of `any` alone.
fn is_any(list: &Statement) -> bool {
    matches!(list.children(), [only] if only.name() == "any")
}

/// Zone settings with no Heron equivalent needed.
const ZONE_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "check-names",
        "Heron loads names as the zone file writes them",
    ),
    ("zone-statistics", "see [metrics] zone-metrics"),
    (
        "ixfr-from-differences",
        "Heron computes IXFR differences at every reload",
    ),
    (
        "max-journal-size",
        "Heron keeps up to 16 MB of IXFR history per zone",
    ),
    (
        "journal",
        "Heron keeps its own journal next to the zone file or kept copy (FILE.jnl)",
    ),
    (
        "key-directory",
        "Heron keeps the keys it signs with in the zone's key-directory; BIND's are imported from here with `heron keymgr -d KEYDIR ZONE import --from bind DIR`",
    ),
    ("notify", "handled with also-notify"),
    ("type", "translated"),
    ("file", "translated"),
];

impl<'a> Interpreter<'a> {
    /// The zone's own setting, else the one its view gives its zones,
    /// else the one `options` gives every zone.
    /// What a catalog's member zones take from the view and `options`,
    /// as BIND gives them: who may transfer them, whom they notify.
    fn member_access(&mut self) -> (Vec<Rule>, Vec<Peer>) {
        let above = |name: &str| {
            (self.view.and_then(|v| v.child(name)))
                .or_else(|| self.options.and_then(|o| o.child(name)))
        };
        let (transfer, notify, also) = (
            above("allow-transfer"),
            above("notify"),
            above("also-notify"),
        );
        let allow_transfer = transfer
            .map(|l| self.aml(l, "allow-transfer"))
            .unwrap_or_default();
        // Members are secondaries: `primary-only` sends them no NOTIFY.
        let notifies = !matches!(
            notify.and_then(|n| n.arg(1)),
            Some("no" | "primary-only" | "master-only")
        );
        let notify = match also.filter(|_| notifies) {
            Some(list) => self.peers(list, None, 0),
            None => Vec::new(),
        };
        (allow_transfer, notify)
    }

    fn inherited(&self, zone: &'a Statement, name: &str) -> Option<&'a Statement> {
        zone.child(name)
            .or_else(|| self.view.and_then(|v| v.child(name)))
            .or_else(|| self.options.and_then(|o| o.child(name)))
    }

    /// A view: translated when it is the only one and matches every
    /// client (its zones are then what every client gets), else listed
    /// with its zones left out, never flattened into the others'.
    fn view(&mut self, s: &'a Statement, alone: bool) -> Result<(), ImportError> {
        let name = s.arg(1).unwrap_or("").to_string();
        let class = s.arg(2).filter(|c| !c.eq_ignore_ascii_case("IN"));
        let matches_all = |list: &str| s.child(list).is_none_or(is_any);
        let recursive_only = s.child("match-recursive-only").and_then(|m| m.arg(1));
        if !alone
            || class.is_some()
            || !matches_all("match-clients")
            || !matches_all("match-destinations")
            || matches!(recursive_only, Some("yes" | "true" | "1"))
        {
            let advice = if alone {
                "Heron has no views: this one does not match every client (or is not class IN), \
                 so its zones were not imported; if every client may see them, set \
                 match-clients { any; } and import again, else serve them from a Heron of their own \
                 whose allow-query lets in the view's clients"
            } else {
                "Heron has no views: none of the views' zones were imported, as the answers \
                 depend on who asks; run one Heron per view, each with the view's zones and \
                 an allow-query of the view's match-clients (or import each view alone)"
            };
            self.out
                .untranslated(s.loc(), format!("view {name}"), advice);
            return Ok(());
        }
        for key in s.children().iter().filter(|c| c.name() == "key") {
            self.key(key)?;
        }
        self.catalog_zones(s);
        self.view = Some(s);
        // Before the zones, whose primaries take their keys.
        for server in s.children().iter().filter(|c| c.name() == "server") {
            self.server(server);
        }
        for child in s.children() {
            match child.name() {
                "zone" => self.zone(child)?,
                // As in `options` or at the top (black-box finding BT-9:
                // dropped, or called without equivalent, in the view).
                "rate-limit" => self.rate_limit(child),
                "key"
                | "server"
                | "match-clients"
                | "match-destinations"
                | "match-recursive-only" => {}
                n if ZONE_DEFAULTS.contains(&n) => {}
                _ => self.option_note(&format!("view {name}"), child),
            }
        }
        self.view = None;
        self.out.not_needed(
            s.loc(),
            format!("view {name} {{ match-clients {{ any; }}; }}"),
            "the only view, and every client's: its zones and settings were imported as Heron's own",
        );
        Ok(())
    }

    fn zone(&mut self, s: &'a Statement) -> Result<(), ImportError> {
        let origin = s
            .arg(1)
            .ok_or_else(|| ImportError::at(s.loc(), "zone without a name"))?;
        // `zone "X" in-view "V";` shares view V's zone, not a class
        // (black-box finding BT-3: "Heron serves class IN only").
        if s.arg(2) == Some("in-view") {
            let view = s.arg(3).unwrap_or("?");
            self.out.untranslated(
                s.loc(),
                format!("zone {origin} in-view {view}"),
                format!(
                    "view {view}'s zone shared into another view: Heron has no views and imports \
                     a zone once (from the only view that matches every client, if there is one); \
                     not imported again here"
                ),
            );
            return Ok(());
        }
        if let Some(class) = s.arg(2).filter(|c| !c.eq_ignore_ascii_case("IN")) {
            self.out.untranslated(
                s.loc(),
                format!("zone {origin} {class}"),
                "Heron serves class IN only; not imported",
            );
            return Ok(());
        }
        let kind = s.child("type").and_then(|t| t.arg(1)).unwrap_or("");
        let mut zone = Zone {
            loc: Some(s.loc().clone()),
            origin: match origin.trim_end_matches('.') {
                "" => ".".to_string(),
                o => o.to_string(),
            },
            ..Zone::default()
        };
        if !self.zone_kind(s, origin, kind, &mut zone) {
            return Ok(());
        }
        self.zone_access(s, &mut zone);
        self.signing(s, origin, &mut zone);
        for c in s.children() {
            self.zone_note(c, origin);
        }
        let catalog = self
            .catalogs
            .get(&zone.origin.to_ascii_lowercase())
            .copied();
        match catalog {
            Some(defaults) if !zone.primaries.is_empty() => {
                let member_primaries = defaults.map(|d| self.peers(d, None, 0)).unwrap_or_default();
                let (member_allow_transfer, member_notify) = self.member_access();
                self.out.catalogs.push(CatalogConsumer {
                    zone: zone.origin,
                    primaries: zone.primaries,
                    allow_transfer: zone.allow_transfer,
                    notify: zone.notify,
                    member_primaries,
                    member_allow_transfer,
                    member_allow_notify: Vec::new(),
                    member_notify,
                    groups: Vec::new(),
                });
            }
            _ => self.out.zones.push(zone),
        }
        Ok(())
    }

    /// Keeps the files the zone file `file` includes among the old
    /// server's, and says each relative `$INCLUDE` that Heron
    /// finds elsewhere than BIND: BIND looks from its `directory`, Heron
    /// (as Knot) from the including file's folder (black-box finding
    /// BT-2: another file was served, and nothing said so). Only the
    /// file's own lines are read, a bounded number of octets.
    fn relative_includes(&mut self, s: &'a Statement, origin: &str, file: &Path) {
        let folder = file.parent().unwrap_or(Path::new("."));
        for included in zone_file_includes(file) {
            let included = Path::new(&included);
            let (bind, heron) = (self.directory.join(included), folder.join(included));
            // The old server's zone data: never written over by the
            // import's output (black-box finding BT-10).
            self.out.zone_data.extend([bind.clone(), heron.clone()]);
            if included.is_absolute() || bind == heron {
                continue;
            }
            self.out.step_to_do(
                s.loc(),
                format!("zone {origin}: $INCLUDE {}", included.display()),
                format!(
                    "BIND reads {} (from its directory), Heron {} (from the zone file's folder, as Knot): make the path absolute in {}",
                    bind.display(),
                    heron.display(),
                    file.display()
                ),
            );
        }
    }

    /// Reads the zone's type into `zone`; false when it is not imported
    /// (a type Heron does not serve, or missing what it needs).
    fn zone_kind(&mut self, s: &'a Statement, origin: &str, kind: &str, zone: &mut Zone) -> bool {
        match kind {
            "master" | "primary" => {
                let Some(file) = s.child("file").and_then(|f| f.arg(1)) else {
                    self.out.untranslated(
                        s.loc(),
                        format!("zone {origin}"),
                        "a primary zone without a file; not imported",
                    );
                    return false;
                };
                zone.file = Some(resolve(&self.directory, file));
                if zone.file.as_ref().is_some_and(|f| f.is_relative()) {
                    self.relative_directory();
                }
                if let Some(file) = zone.file.clone() {
                    self.relative_includes(s, origin, &file);
                }
                self.journal_beside_bind(s, zone);
                self.primary_format(s, origin);
            }
            "slave" | "secondary" => {
                // BIND writes what it transfers there; Heron keeps its own.
                if let Some(file) = s.child("file").and_then(|f| f.arg(1)) {
                    self.out.zone_data.push(resolve(&self.directory, file));
                }
                let list = s.child("primaries").or_else(|| s.child("masters"));
                zone.primaries = list.map(|l| self.peers(l, None, 0)).unwrap_or_default();
                if zone.primaries.is_empty() {
                    self.out.untranslated(
                        s.loc(),
                        format!("zone {origin}"),
                        "a secondary zone without primaries Heron can use; not imported",
                    );
                    return false;
                }
            }
            "hint" => {
                self.out.not_needed(
                    s.loc(),
                    format!("zone {origin} {{ type hint; }}"),
                    "Heron is authoritative only: it needs no root hints",
                );
                return false;
            }
            other => {
                self.out.untranslated(
                    s.loc(),
                    format!("zone {origin} {{ type {other}; }}"),
                    "Heron serves primary and secondary zones only; not imported",
                );
                return false;
            }
        }
        true
    }

    fn zone_access(&mut self, s: &'a Statement, zone: &mut Zone) {
        match self.inherited(s, "allow-transfer") {
            Some(list) => zone.allow_transfer = self.aml(list, "allow-transfer"),
            None => self.say_once("allow-transfer", &self.root.clone(), "allow-transfer (not set: BIND's default)", "BIND 9.18 lets anyone transfer a zone without allow-transfer; Heron lets nobody. Add allow-transfer to the zones secondaries pull"),
        }
        // The zone's, else its view's (which BIND puts over `options`',
        // the server-wide list: black-box finding BT-7, a view's was
        // dropped and everyone answered).
        let view = || self.view.and_then(|v| v.child("allow-query"));
        if let Some(list) = s.child("allow-query").or_else(view) {
            zone.allow_query = Some(self.aml(list, "allow-query"));
        }
        // BIND takes NOTIFY from the primaries' addresses, signed or not,
        // besides its allow-notify list; Heron's list replaces its default
        // (the primaries with their keys), so both go in, the primaries
        // without their keys (a BIND primary's also-notify often has none).
        let explicit = self.inherited(s, "allow-notify");
        let keyed_primary = zone.primaries.iter().any(|p| p.key.is_some());
        if explicit.is_some() || keyed_primary {
            zone.allow_notify = explicit.map_or(Vec::new(), |l| self.aml(l, "allow-notify"));
            zone.allow_notify
                .extend(zone.primaries.iter().map(primary_address));
        }
        self.zone_notify(s, zone);
    }

    /// The zone's NOTIFY targets: `also-notify` unless `notify no`, or
    /// `notify primary-only` (`master-only`) on a secondary, which BIND
    /// sends none from. `yes` (on a secondary too: black-box finding
    /// BT-11) and `primary-only` also notify the NS records' servers,
    /// which Heron does not: listed once.
    fn zone_notify(&mut self, s: &'a Statement, zone: &mut Zone) {
        let setting = self.inherited(s, "notify");
        let notify = setting.and_then(|n| n.arg(1)).unwrap_or("yes");
        let primary = zone.file.is_some();
        let primaries_only = matches!(notify, "primary-only" | "master-only");
        if notify == "no" || (primaries_only && !primary) {
            return;
        }
        if let Some(list) = self.inherited(s, "also-notify") {
            zone.notify = self.peers(list, None, 0);
        }
        if notify == "yes" || primaries_only {
            let loc = setting.map_or_else(|| self.root.clone(), |n| n.loc().clone());
            let said = setting.map_or("notify yes (BIND's default)".into(), |n| n.summary());
            self.say_once("notify", &loc, &said, "BIND also notifies the name servers in each zone's NS records; Heron notifies only the also-notify addresses. Add them to notify if they are secondaries");
        }
    }

    /// A primary zone's journal stays in memory: BIND journals the zone
    /// in FILE.jnl (updates, `ixfr-from-differences`) at any time, and
    /// Heron's journal file would be that very path, which BIND, run
    /// beside Heron or restarted for a rollback, cannot read (it then
    /// refuses updates and does not load the zone). Said once.
    fn journal_beside_bind(&mut self, s: &Statement, zone: &mut Zone) {
        zone.journal_off = true;
        if self.said.insert("journal") {
            self.out.step_to_do(
                s.loc(),
                "journal = false (every primary zone)",
                "BIND keeps a primary zone's journal in FILE.jnl, beside its file, which is \
                 where Heron keeps its own: so that Heron, run beside BIND, never writes a file \
                 BIND reads (BIND would refuse updates and, restarted, not load the zone), these \
                 zones keep their IXFR history in memory (a restart of Heron sends secondaries \
                 one AXFR). Once BIND will not be started again (no rollback), have it write its \
                 journals into the zone files (rndc sync -clean), move BIND's FILE.jnl files \
                 away and take out the `journal = false` lines (allow-update needs them out)",
            );
        }
    }

    /// Zone files named from named's working directory (no `directory`,
    /// or a relative one): heron.toml reads a relative path from its own
    /// folder, so the zones' files are listed once to be written in full.
    fn relative_directory(&mut self) {
        let set = self.options.and_then(|o| o.child("directory"));
        let (loc, setting) = match set {
            Some(d) => (d.loc().clone(), d.summary()),
            None => (self.root.clone(), "directory (not set)".to_string()),
        };
        let advice = "named reads relative zone file names from its working directory (where \
             it was started, then `directory`); heron.toml reads them from its own folder: the \
             zones' `file` paths were written relative, make them full paths";
        self.say_once("directory", &loc, &setting, advice);
    }

    fn primary_format(&mut self, s: &Statement, origin: &str) {
        if let Some(format) = self
            .inherited(s, "masterfile-format")
            .filter(|f| f.arg(1) != Some("text"))
        {
            self.out.untranslated(format.loc(), format!("zone {origin}: {}", format.summary()), "Heron reads zone files in text only: `named-compilezone -f raw -F text` converts one");
        }
    }

    /// A zone BIND signs: its dnssec-policy translated (BIND's `default`
    /// and `insecure` are Heron's: ECDSA P-256, one CSK, NSEC; going
    /// insecure), with the command that imports its keys in the listing;
    /// older signing set-ups listed.
    fn signing(&mut self, s: &Statement, origin: &str, zone: &mut Zone) {
        let policy = self
            .inherited(s, "dnssec-policy")
            .filter(|p| p.arg(1) != Some("none"));
        if let Some(p) = policy {
            let name = p.arg(1).unwrap_or("default");
            let built_in = name == "default" || name == heron_dnssec::policy::INSECURE;
            if built_in || self.out.policies.iter().any(|x| x.name == name) {
                zone.dnssec_policy = Some(name.to_string());
                let dir = self
                    .inherited(s, "key-directory")
                    .and_then(|k| k.arg(1))
                    .map_or(self.directory.clone(), |d| resolve(&self.directory, d));
                let advice = key_import_advice(origin, name, "bind", &dir.to_string_lossy());
                let setting = format!("zone {origin}: {}", p.summary());
                self.out.step_to_do(p.loc(), setting.clone(), advice);
                // BIND serves its signed version at a serial of its own.
                let serial = format!(
                    "raise the serial in the zone file above the one BIND serves (dig @BIND {origin} SOA) before Heron takes over: Heron signs at the file's serial, and secondaries holding BIND's higher one would not transfer from Heron"
                );
                self.out
                    .step_to_do(p.loc(), format!("{setting} (serial)"), serial);
                return;
            }
        }
        let inline = s
            .child("inline-signing")
            .filter(|p| p.arg(1) == Some("yes"));
        let auto = s.child("auto-dnssec").filter(|p| p.arg(1) != Some("off"));
        if let Some(setting) = policy.or(inline).or(auto) {
            self.out.untranslated(
                setting.loc(),
                format!("zone {origin}: {}", setting.summary()),
                signing_advice("BIND"),
            );
        }
    }

    /// A `dnssec-policy NAME { ... }` as a `[[dnssec-policy]]`.
    fn dnssec_policy(&mut self, s: &Statement) {
        let Some(name) = s.arg(1).filter(|_| s.block.is_some()) else {
            return;
        };
        let mut p = PolicyBuilder::new(name);
        let keys = s.child("keys").map_or(&[][..], |k| k.children());
        let algorithm = keys.iter().find_map(|k| word_after(&k.words, "algorithm"));
        p.algorithm(algorithm.unwrap_or("ecdsap256sha256"));
        p.csk(keys.is_empty() || keys.iter().any(|k| k.name() == "csk"));
        for key in keys {
            let lifetime = match key.name() {
                "zsk" => "zsk-lifetime",
                _ => "ksk-lifetime",
            };
            if let Some(l) = word_after(&key.words, "lifetime") {
                p.duration(lifetime, &format!("{} lifetime", key.name()), l);
            }
        }
        for c in s.children() {
            let heron_key = BIND_DURATIONS.iter().find(|(bind, _)| *bind == c.name());
            match (c.name(), heron_key) {
                ("keys", _) => {}
                ("nsec3param", _) => p.nsec3(
                    word_after(&c.words, "iterations"),
                    word_after(&c.words, "optout") == Some("yes"),
                    word_after(&c.words, "salt-length"),
                ),
                (bind, Some((_, heron))) => p.duration(heron, bind, c.arg(1).unwrap_or("")),
                _ => p.untranslated_setting(c.summary()),
            }
        }
        let (policy, notes) = p.finish();
        for (setting, advice) in notes {
            let setting = format!("dnssec-policy {name}: {setting}");
            self.out.untranslated(s.loc(), setting, advice);
        }
        self.out.policies.push(policy);
    }

    fn zone_note(&mut self, c: &Statement, origin: &str) {
        let name = c.name();
        let handled = [
            "primaries",
            "masters",
            "allow-transfer",
            "allow-query",
            "allow-notify",
            "also-notify",
            "dnssec-policy",
            "inline-signing",
            "auto-dnssec",
            "masterfile-format",
        ];
        if handled.contains(&name) {
            return;
        }
        let setting = format!("zone {origin}: {}", c.summary());
        if let Some((_, advice)) = ZONE_NOT_NEEDED.iter().find(|(n, _)| *n == name) {
            if !matches!(name, "type" | "file" | "notify") {
                self.out.not_needed(c.loc(), setting, *advice);
            }
            return;
        }
        if matches!(name, "allow-update" | "update-policy") {
            self.out.untranslated(c.loc(), setting, update_advice(c));
            return;
        }
        let advice = match name {
            "allow-update-forwarding" => UPDATE_ADVICE,
            "notify-source" | "notify-source-v6" => {
                "set [xfr] notify-source, or `via ADDRESS` after a notify target"
            }
            "transfer-source" | "transfer-source-v6" => {
                "set [xfr] source, or `via ADDRESS` after a primary"
            }
            "max-transfer-time-in" => "set [secondary] transfer-timeout (for all zones, seconds)",
            "min-refresh-time" | "max-refresh-time" | "min-retry-time" | "max-retry-time" => {
                "Heron bounds SOA timers for all zones in [secondary]"
            }
            _ => "no Heron equivalent: check whether the behaviour matters",
        };
        self.out.untranslated(c.loc(), setting, advice);
    }
}

/// What to say of a zone's `allow-update` or `update-policy`: the advice,
/// and the Heron rules that say the same where there are some (black-box
/// finding BT-4: the operator wrote them from nothing). Not written: the
/// zone keeps `journal = false` while BIND's journal is beside its file,
/// and allow-update needs it out.
fn update_advice(c: &Statement) -> String {
    let (rules, left) = match c.name() {
        "update-policy" => update_policy_rules(c),
        _ => allow_update_rules(c),
    };
    let mut advice = UPDATE_ADVICE.to_string();
    if !rules.is_empty() {
        let quoted: Vec<String> = rules.iter().map(|r| super::writer::quote(r)).collect();
        advice.push_str(&format!(
            ". Heron's rules for it: allow-update = [{}]",
            quoted.join(", ")
        ));
    }
    if !left.is_empty() {
        advice.push_str(&format!("; no Heron rule says: {}", left.join("; ")));
    }
    advice
}

/// The Heron rules of an `update-policy`'s grants, and what they cannot
/// say (`local`, a deny, an identity with a wildcard, another rule type).
fn update_policy_rules(c: &Statement) -> (Vec<String>, Vec<String>) {
    let Some(block) = &c.block else {
        return (Vec::new(), vec![c.words[1..].join(" ")]);
    };
    let mut rules = Vec::new();
    let mut left = Vec::new();
    for grant in block {
        match grant_rule(&grant.words) {
            Some(rule) => rules.push(rule),
            None => left.push(grant.words.join(" ")),
        }
    }
    (rules, left)
}

/// `grant IDENTITY RULETYPE [NAME] TYPES` as a Heron rule: the rule types
/// Heron has, a key as the identity, and a list of types (BIND's empty
/// list leaves out NS, SOA, RRSIG, NSEC and NSEC3, which no Heron list
/// says).
fn grant_rule(words: &[String]) -> Option<String> {
    let [grant, identity, kind, rest @ ..] = words else {
        return None;
    };
    if grant != "grant" || identity.contains('*') {
        return None;
    }
    let (what, types) = match kind.as_str() {
        "zonesub" => (kind.clone(), rest),
        "self" | "selfsub" => (kind.clone(), rest.get(1..)?),
        "name" | "subdomain" | "wildcard" => {
            let target = rest.first()?.trim_end_matches('.');
            (format!("{kind} {target}"), &rest[1..])
        }
        _ => return None,
    };
    if types.is_empty() || types.iter().any(|t| t.contains('(')) {
        return None;
    }
    let identity = identity.trim_end_matches('.');
    Some(format!("key {identity} {what} {}", types.join(" ")))
}

/// The Heron rules of an `allow-update` list (every type of every name for
/// each key and address it names), and what they cannot say (a negation,
/// a named ACL).
fn allow_update_rules(c: &Statement) -> (Vec<String>, Vec<String>) {
    let mut rules = Vec::new();
    let mut left = Vec::new();
    for element in c.block.iter().flatten() {
        let words = &element.words;
        match words.as_slice() {
            [key, name] if key == "key" => {
                rules.push(format!("key {} zonesub ANY", name.trim_end_matches('.')));
            }
            [any] if any == "any" => {
                rules.extend(["0.0.0.0/0 zonesub ANY".into(), "::/0 zonesub ANY".into()]);
            }
            [none] if none == "none" => {}
            [address] if address.parse::<Prefix>().is_ok() => {
                rules.push(format!("{address} zonesub ANY"));
            }
            _ => left.push(words.join(" ")),
        }
    }
    (rules, left)
}

/// A primary's address as an ACL entry, with no key.
fn primary_address(primary: &Peer) -> Rule {
    let addr = primary.addr.ip();
    let len = if addr.is_ipv4() { 32 } else { 128 };
    Rule {
        prefix: Prefix { addr, len },
        key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::model::NoteKind;
    use crate::import::testutil::{Rng, mutate, write_files};

    const SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0";

    fn conf() -> String {
        format!(
            "// a comment\n# another\n/* and a\n   third */\n\
             options {{\n  directory \"/srv/bind\";\n  listen-on port 5353 {{ 127.0.0.1; }};\n\
             \x20 listen-on-v6 {{ none; }};\n  recursion no;\n  version \"v\";\n  pid-file \"x.pid\";\n\
             \x20 allow-transfer {{ none; }};\n  notify explicit;\n\
             \x20 rate-limit {{ responses-per-second 10; slip 3; window 5; exempt-clients {{ 192.0.2.0/24; }}; }};\n}};\n\
             key \"xfr.test\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             acl secondaries {{ 192.0.2.0/24; key xfr.test; }};\n\
             primaries upstream port 5300 {{ 198.51.100.1 key xfr.test; 198.51.100.2; }};\n\
             server 198.51.100.2 {{ keys {{ xfr.test; }}; }};\n\
             include \"zones.conf\";\n"
        )
    }

    const ZONES: &str = "zone \"example.com\" {\n  type master;\n  file \"db.example.com\";\n\
         \x20 allow-transfer { secondaries; !192.0.2.9; 203.0.113.1; };\n\
         \x20 also-notify port 5300 { 192.0.2.7 key xfr.test; };\n  update-policy local;\n};\n\
         zone \"example.net\" IN { type slave; masters { upstream; }; file \"sec/net\"; };\n\
         zone \".\" { type hint; file \"root.hints\"; };\n";

    /// Key names are domain names to BIND: `K` and `k.` are the key `k`,
    /// in primaries, also-notify, server blocks and acls alike. A key that
    /// is not defined is written as named with a line (check-config then
    /// fails), never dropped to leave the peer unsigned.
    #[test]
    fn key_names_match_without_case_or_final_dot_and_none_is_dropped() {
        let text = format!(
            "key \"k\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             server 127.0.0.7 {{ keys {{ k.; }}; }};\n\
             zone \"a.test\" {{ type secondary; file \"a\";\n\
             \x20 primaries {{ 127.0.0.1 key K; 127.0.0.7; 127.0.0.9 key nokey; }}; }};\n\
             zone \"b.test\" {{ type primary; file \"b\"; allow-transfer {{ key K.; }};\n\
             \x20 also-notify {{ 127.0.0.8 key K; }}; }};\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = write_files(dir.path(), &[("named.conf", &text)]);
        let got = parse(&path).unwrap();
        let a = &got.zones[0];
        let primaries: Vec<String> = a.primaries.iter().map(Peer::heron).collect();
        assert_eq!(
            primaries,
            ["127.0.0.1 key k", "127.0.0.7 key k", "127.0.0.9 key nokey"]
        );
        let b = &got.zones[1];
        assert_eq!(b.notify[0].heron(), "127.0.0.8 key k");
        let acl: Vec<String> = b.allow_transfer.iter().map(Rule::heron).collect();
        assert_eq!(acl, ["0.0.0.0/0 key k", "::/0 key k"]);
        let said: Vec<&str> = got.notes.iter().map(|n| n.setting.as_str()).collect();
        assert!(said.contains(&"127.0.0.9 key nokey"), "{said:?}");
    }

    /// `conf` imported, and each of its notes as "SETTING: ADVICE".
    fn imported_with_notes(conf: &str) -> (Imported, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("named.conf", conf)])).unwrap();
        let said = (got.notes.iter())
            .map(|n| format!("{}: {}", n.setting, n.advice))
            .collect();
        (got, said)
    }

    /// `zone "X" in-view "V";` is said as a view's zone, not as a class
    /// Heron does not serve (black-box finding BT-3).
    #[test]
    fn an_in_view_zone_is_said_as_a_view_s_zone() {
        let conf = "zone \"p1.test\" { type primary; file \"p\"; };\n\
            zone \"p3.test\" in-view \"x\";\n";
        let (_, said) = imported_with_notes(conf);
        assert!(
            said.iter()
                .any(|n| n.starts_with("zone p3.test in-view x: view x's zone")),
            "{said:?}"
        );
        assert!(
            !said.iter().any(|n| n.contains("class IN only")),
            "{said:?}"
        );
    }

    /// `notify yes` on a secondary zone (under `notify no` in options)
    /// also notifies the NS records' servers in BIND: said, as for a
    /// primary (black-box finding BT-11).
    #[test]
    fn notify_yes_on_a_secondary_is_said() {
        let conf = "options { notify no; also-notify { 127.0.0.7; }; };\n\
            zone \"q.test\" { type secondary; file \"q\"; primaries { 192.0.2.1; }; notify yes; };\n";
        let (got, said) = imported_with_notes(conf);
        assert!(
            said.iter()
                .any(|n| n.starts_with("notify yes") && n.contains("BIND also notifies")),
            "{said:?}"
        );
        assert_eq!(got.zones[0].notify.len(), 1);
    }

    /// A zone's `update-policy` and `allow-update` are listed with the
    /// Heron rules that say the same, and what none says (black-box
    /// finding BT-4); nothing is written (BIND's journal keeps
    /// `journal = false`, which allow-update does not go with).
    #[test]
    fn update_rules_are_listed_with_herons_words() {
        let dir = tempfile::tempdir().unwrap();
        let conf = "key \"tkey\" { algorithm hmac-sha256; secret \"c2VjcmV0c2VjcmV0\"; };\n\
            zone \"u.test\" { type primary; file \"u.zone\"; update-policy {\n\
            grant tkey zonesub ANY; grant tkey name host.u.test. A AAAA;\n\
            grant tkey wildcard *.dyn.u.test. TXT; grant tkey. selfsub tkey. A;\n\
            grant * self * A; grant tkey krb5-self . A; grant tkey subdomain s.u.test.; }; };\n\
            zone \"v.test\" { type primary; file \"v.zone\";\n\
            allow-update { key tkey; 192.0.2.1; !192.0.2.2; none; }; };\n";
        let path = write_files(dir.path(), &[("named.conf", conf)]);
        let got = parse(&path).unwrap();
        let advice = |zone: &str| {
            let note = got
                .notes
                .iter()
                .find(|n| n.setting.starts_with(&format!("zone {zone}: ")));
            note.map(|n| n.advice.clone())
                .unwrap_or_else(|| panic!("{:?}", got.notes))
        };
        let u = advice("u.test");
        assert!(
            u.contains(
                "allow-update = [\"key tkey zonesub ANY\", \"key tkey name host.u.test A AAAA\", \
                 \"key tkey wildcard *.dyn.u.test TXT\", \"key tkey selfsub A\"]"
            ),
            "{u}"
        );
        assert!(
            u.contains("no Heron rule says: grant * self * A; grant tkey krb5-self . A; grant tkey subdomain s.u.test."),
            "{u}"
        );
        let v = advice("v.test");
        assert!(
            v.contains("allow-update = [\"key tkey zonesub ANY\", \"192.0.2.1 zonesub ANY\"]"),
            "{v}"
        );
        assert!(v.contains("no Heron rule says: !192.0.2.2"), "{v}");
        assert!(got.zones.iter().all(|z| z.allow_update.is_empty()));
        // Mutated, the same text never panics the importer.
        let mut rng = Rng::new(12);
        for _ in 0..1000 {
            std::fs::write(&path, mutate(conf, &mut rng)).unwrap();
            let _ = parse(&path);
        }
    }

    /// BT-2: a relative `$INCLUDE` that BIND finds from its `directory`
    /// and Heron from the zone file's folder is said, with both paths; an
    /// absolute one, or one both find alike, is not.
    #[test]
    fn a_relative_include_found_elsewhere_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().display().to_string();
        let conf = format!(
            "options {{ directory \"{base}\"; }};\n\
             zone \"i.test\" {{ type primary; file \"zones/i.test.zone\"; }};\n\
             zone \"j.test\" {{ type primary; file \"j.test.zone\"; }};\n"
        );
        std::fs::create_dir(dir.path().join("zones")).unwrap();
        let path = write_files(
            dir.path(),
            &[
                ("named.conf", &conf),
                (
                    "zones/i.test.zone",
                    "$TTL 60\n$INCLUDE inc/x.inc\n$include /abs/y.inc\n",
                ),
                ("j.test.zone", "$INCLUDE inc/x.inc\n"),
            ],
        );
        let got = parse(&path).unwrap();
        let said: Vec<&str> = (got.notes.iter())
            .map(|n| n.setting.as_str())
            .filter(|s| s.contains("$INCLUDE"))
            .collect();
        assert_eq!(said, ["zone i.test: $INCLUDE inc/x.inc"], "{:?}", got.notes);
        // BT-10: what the zone files include is the old server's, never
        // the import's output.
        let included = dir.path().join("inc/x.inc");
        assert!(got.zone_data.contains(&included), "{:?}", got.zone_data);
    }

    #[test]
    fn options_zones_keys_acls_and_primaries_lists_are_translated() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_files(
            dir.path(),
            &[("named.conf", &conf()), ("zones.conf", ZONES)],
        );
        let got = parse(&path).unwrap();
        assert_eq!(
            got.listen,
            ["127.0.0.1:5353".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(got.version.as_deref(), Some("v"));
        let rrl = got.rrl.as_ref().unwrap();
        assert_eq!((rrl.responses_per_second, rrl.slip), (Some(10), Some(3)));
        assert_eq!(rrl.exempt, ["192.0.2.0/24".parse().unwrap()]);
        // BIND's window is not Heron's (how often a bucket is logged).
        assert_eq!(rrl.window, None);
        assert!(got.notes.iter().any(|n| n.setting.contains("window 5")));
        let com = &got.zones[0];
        assert_eq!(
            com.file.as_deref(),
            Some(Path::new("/srv/bind/db.example.com"))
        );
        let acl: Vec<String> = com.allow_transfer.iter().map(Rule::heron).collect();
        assert_eq!(
            acl,
            [
                "192.0.2.0/24",
                "0.0.0.0/0 key xfr.test",
                "::/0 key xfr.test"
            ]
        );
        assert_eq!(com.notify[0].heron(), "192.0.2.7:5300 key xfr.test");
        let net = &got.zones[1];
        let primaries: Vec<String> = net.primaries.iter().map(Peer::heron).collect();
        assert_eq!(
            primaries,
            [
                "198.51.100.1:5300 key xfr.test",
                "198.51.100.2:5300 key xfr.test"
            ]
        );
        assert_eq!(got.zones.len(), 2);
        let lines: Vec<(u32, &str)> = got
            .notes
            .iter()
            .map(|n| (n.loc.line, n.setting.as_str()))
            .collect();
        assert!(
            got.notes.iter().any(|n| n.loc.line == 4
                && n.setting.contains("!192.0.2.9")
                && n.kind == NoteKind::Untranslated),
            "{lines:?}"
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.loc.line == 6 && n.setting.contains("update-policy")),
            "{lines:?}"
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("pid-file") && n.kind == NoteKind::NotNeeded)
        );
        assert!(got.notes.iter().all(|n| !n.setting.contains(SECRET)));
    }

    #[test]
    fn the_debian_default_is_four_zones_and_a_resolver_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (
                "named.conf",
                "// This is the primary configuration file\ninclude \"named.conf.options\";\ninclude \"named.conf.local\";\ninclude \"named.conf.default-zones\";\n",
            ),
            (
                "named.conf.options",
                "options {\n\tdirectory \"/var/cache/bind\";\n\t// forwarders {\n\t// \t0.0.0.0;\n\t// };\n\tdnssec-validation auto;\n\n\tlisten-on-v6 { any; };\n};\n",
            ),
            (
                "named.conf.local",
                "//\n// Do any local configuration here\n//\n",
            ),
            (
                "named.conf.default-zones",
                "zone \".\" {\n\ttype hint;\n\tfile \"/usr/share/dns/root.hints\";\n};\nzone \"localhost\" {\n\ttype master;\n\tfile \"/etc/bind/db.local\";\n};\n",
            ),
        ];
        let got = parse(&write_files(dir.path(), &files)).unwrap();
        assert_eq!(
            got.listen,
            [
                "0.0.0.0:53".parse::<SocketAddr>().unwrap(),
                "[::]:53".parse().unwrap()
            ]
        );
        assert_eq!(got.zones.len(), 1);
        assert!(got.notes.iter().any(|n| n.setting.starts_with("recursion")));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("dnssec-validation") && n.loc.line == 6)
        );
    }

    #[test]
    fn one_view_for_every_client_is_translated_with_its_settings() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { directory \"/z\"; allow-transfer { none; }; };\n\
                    view \"all\" {\n  match-clients { any; };\n  recursion no;\n\
                    \x20 key \"vk\" { algorithm hmac-sha256; secret \"c2VjcmV0c2VjcmV0\"; };\n\
                    \x20 allow-transfer { key \"vk\"; };\n  tcp-clients 5;\n\
                    \x20 zone \"a.test\" { type primary; file \"a.zone\"; };\n\
                    \x20 zone \"b.test\" { type primary; file \"b.zone\"; allow-transfer { 192.0.2.1; }; };\n};\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let origins: Vec<&str> = got.zones.iter().map(|z| z.origin.as_str()).collect();
        assert_eq!(origins, ["a.test", "b.test"]);
        assert_eq!(got.zones[0].file.as_deref(), Some(Path::new("/z/a.zone")));
        // The view's allow-transfer is its zones' default, over options'.
        assert_eq!(got.zones[0].allow_transfer[0].key.as_deref(), Some("vk"));
        assert_eq!(got.zones[1].allow_transfer[0].key, None);
        assert_eq!(got.keys.len(), 1);
        let note = |line: u32, words: &str| {
            got.notes
                .iter()
                .any(|n| n.loc.line == line && n.setting.contains(words))
        };
        assert!(note(2, "view all { match-clients { any; }; }"));
        assert!(note(4, "view all: recursion no"));
        assert!(note(7, "view all: tcp-clients 5"));
    }

    /// BT-7: the only view's allow-query is its zones' (over `options`',
    /// which stays the server's), never dropped.
    #[test]
    fn the_only_views_allow_query_is_its_zones() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { allow-query { any; }; };\n\
                    view \"main\" { allow-query { 127.0.0.2; };\n\
                    zone \"v1.test\" { type primary; file \"v1\"; };\n\
                    zone \"v2.test\" { type primary; file \"v2\"; allow-query { 127.0.0.3; }; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let acl = |i: usize| -> Vec<String> {
            let rules = got.zones[i].allow_query.as_ref().expect("an allow-query");
            rules.iter().map(Rule::heron).collect()
        };
        assert_eq!(acl(0), ["127.0.0.2"]);
        assert_eq!(acl(1), ["127.0.0.3"]);
    }

    /// BT-9: the only view's rate-limit and server keys are taken as
    /// `options`' and the top level's are.
    #[test]
    fn the_only_views_rate_limit_and_server_keys_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "view \"main\" {{ key \"vk\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             rate-limit {{ responses-per-second 7; }};\n\
             zone \"s.test\" {{ type secondary; file \"s\"; primaries {{ 192.0.2.1; }}; }};\n\
             server 192.0.2.1 {{ keys {{ vk; }}; }}; }};\n"
        );
        let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
        assert!(got.rrl.is_some(), "{:?}", got.notes);
        let primaries: Vec<String> = got.zones[0].primaries.iter().map(Peer::heron).collect();
        assert_eq!(primaries, ["192.0.2.1 key vk"]);
    }

    #[test]
    fn views_that_depend_on_the_client_are_listed_not_flattened() {
        let dir = tempfile::tempdir().unwrap();
        let two = "view \"in\" { match-clients { 10.0.0.0/8; }; zone \"a.test\" { type primary; file \"a\"; }; };\n\
                   view \"out\" { match-clients { any; }; zone \"a.test\" { type primary; file \"b\"; }; };\n";
        let one_inside = "view \"in\" { match-clients { 10.0.0.0/8; }; zone \"a.test\" { type primary; file \"a\"; }; };\n";
        let recursive_only = "view \"r\" { match-recursive-only yes; zone \"a.test\" { type primary; file \"a\"; }; };\n";
        for (text, views) in [(two, 2), (one_inside, 1), (recursive_only, 1)] {
            let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
            assert!(got.zones.is_empty(), "{text}");
            let listed = got
                .notes
                .iter()
                .filter(|n| n.kind == NoteKind::Untranslated && n.setting.starts_with("view "))
                .count();
            assert_eq!(listed, views, "{text}");
        }
    }

    #[test]
    fn catalog_zones_become_catalogs_and_signing_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { catalog-zones { zone \"cat.test\" default-primaries { 192.0.2.1; } in-memory yes; }; };\n\
                    zone \"cat.test\" { type secondary; primaries { 192.0.2.1; }; also-notify { 192.0.2.7; }; };\n\
                    zone \"signed.test\" { type primary; file \"s\"; dnssec-policy default; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        assert_eq!(got.catalogs.len(), 1);
        assert_eq!(got.catalogs[0].member_primaries[0].heron(), "192.0.2.1");
        // The catalog's own NOTIFY targets (black-box finding BF-4).
        assert_eq!(got.catalogs[0].notify[0].heron(), "192.0.2.7");
        assert_eq!(got.zones.len(), 1);
        assert!(got.notes.iter().any(|n| n.setting.contains("in-memory")));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("dnssec-policy default") && n.loc.line == 3)
        );
    }

    /// What a migration from a real BIND server meets: `controls` with
    /// two blocks in one statement (the rndc form) reads; a `server`
    /// prefix gives its key (`keys { K; }` or the ARM's `keys K;`) to
    /// every peer inside it, the most specific one winning; catalog members get the transfer and notify settings
    /// of `options`, as BIND gives them.
    #[test]
    fn controls_server_prefixes_and_catalog_members_translate() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "key \"rndc-key\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             controls {{ inet 127.0.0.1 port 953 allow {{ 127.0.0.1; }} keys {{ \"rndc-key\"; }}; }};\n\
             key \"wide\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             key \"narrow\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             server 10.0.0.0/8 {{ keys {{ wide; }}; }};\n\
             server 10.2.0.0/16 {{ keys narrow; }};\n\
             server 10.9.9.9 {{ edns yes; }};\n\
             options {{ allow-transfer {{ 192.0.2.2; }}; also-notify {{ 192.0.2.3; }};\n\
             \x20 catalog-zones {{ zone \"cat.test\" default-primaries {{ 192.0.2.1; }}; }}; }};\n\
             zone \"cat.test\" {{ type secondary; primaries {{ 192.0.2.1; }}; }};\n\
             zone \"s.test\" {{ type secondary; file \"s\"; primaries {{ 10.2.3.4; 10.9.9.9; }};\n\
             \x20 also-notify {{ 10.1.1.1; }}; }};\n"
        );
        let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
        let zone = &got.zones[0];
        let primaries: Vec<String> = zone.primaries.iter().map(Peer::heron).collect();
        // named uses the most specific block alone: 10.9.9.9's has no key.
        assert_eq!(primaries, ["10.2.3.4 key narrow", "10.9.9.9"]);
        assert_eq!(zone.notify[0].heron(), "10.1.1.1 key wide");
        let catalog = &got.catalogs[0];
        let acl: Vec<String> = catalog
            .member_allow_transfer
            .iter()
            .map(Rule::heron)
            .collect();
        assert_eq!(acl, ["192.0.2.2"]);
        assert_eq!(catalog.member_notify[0].heron(), "192.0.2.3");
    }

    /// `allow-transfer port 853 transport tls { any; }`: BIND refuses
    /// a plain TCP transfer, and Heron cannot tell transports apart, so
    /// the list allows nobody and is listed (never wider).
    #[test]
    fn a_list_limited_to_a_transport_allows_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone \"t.test\" { type primary; file \"t\";\n\
                    \x20 allow-transfer port 853 transport tls { any; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        assert!(got.zones[0].allow_transfer.is_empty());
        let said = got
            .notes
            .iter()
            .find(|n| n.setting.contains("transport tls"));
        assert_eq!(said.map(|n| n.loc.line), Some(2));
    }

    /// BIND's `localhost` in an allow list is written as the loopback
    /// addresses alone, narrower than BIND (which also matches the host's
    /// other addresses), never wider: all of 127/8 let 127.0.0.5 transfer
    /// a zone BIND refused it (black-box finding DB-3). In a blackhole,
    /// where wider is the safe side, all of 127/8 stays.
    #[test]
    fn localhost_is_the_loopback_addresses_in_an_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { blackhole { localhost; }; };
                    zone \"t.test\" { type primary; file \"t\"; allow-transfer { localhost; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let acl: Vec<String> = got.zones[0]
            .allow_transfer
            .iter()
            .map(Rule::heron)
            .collect();
        assert_eq!(acl, ["127.0.0.1", "::1"]);
        let said = (got.notes.iter()).find(|n| n.setting.contains("allow-transfer"));
        assert!(
            said.is_some_and(|n| n.advice.contains("by hand")),
            "{:?}",
            got.notes
        );
        let blackhole: Vec<String> = got.blackhole.iter().map(|p| p.to_string()).collect();
        assert_eq!(blackhole, ["127.0.0.0/8", "::1"]);
    }

    /// An exempt list cut to nothing exempts nobody: said so, not that
    /// every request is refused (black-box finding DB-10).
    #[test]
    fn an_exempt_list_cut_to_nothing_is_said_to_exempt_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { rate-limit { responses-per-second 5;\n\
                    \x20 exempt-clients { !127.0.0.1; any; }; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let said = (got.notes.iter()).find(|n| n.setting.contains("exempt-clients (as"));
        let advice = said.map(|n| n.advice.as_str()).unwrap_or_default();
        assert!(advice.contains("no client is exempt"), "{:?}", got.notes);
    }

    /// `server-id` is what BIND answers id.server with: Heron answers it
    /// with identity, so identity takes it (and NSID), and the
    /// hostname.bind answer that then differs is listed.
    #[test]
    fn server_id_becomes_the_identity_id_server_answers_with() {
        let cases = [
            (
                "hostname \"ns3.example\"; server-id \"ns3-id\";",
                "\"ns3.example\"",
            ),
            ("server-id \"ns3-id\";", "the host name"),
            ("hostname none; server-id \"ns3-id\";", "with no answer"),
        ];
        for (options, hostname_said) in cases {
            let dir = tempfile::tempdir().unwrap();
            let text = format!("options {{ {options} }};\n");
            let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
            assert_eq!(got.identity.as_deref(), Some("ns3-id"), "{options}");
            assert_eq!(got.nsid_hex.as_deref(), Some("6e73332d6964"), "{options}");
            let listed = (got.notes.iter())
                .find(|n| n.setting.starts_with("server-id"))
                .unwrap_or_else(|| panic!("{options}: {:?}", got.notes));
            assert!(listed.advice.contains(hostname_said), "{}", listed.advice);
        }
        let dir = tempfile::tempdir().unwrap();
        let same = "options { hostname \"a\"; server-id \"a\"; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", same)])).unwrap();
        assert_eq!(got.identity.as_deref(), Some("a"));
        assert!(!got.notes.iter().any(|n| n.setting.starts_with("server-id")));
    }

    /// Without `directory`, or with a relative one, named reads zone
    /// files from its working directory, unknown here: listed once.
    #[test]
    fn relative_zone_files_are_listed() {
        let cases = [
            ("", "directory (not set)"),
            ("options { directory \"rel/dir\"; };\n", "directory rel/dir"),
        ];
        for (options, setting) in cases {
            let dir = tempfile::tempdir().unwrap();
            let text = format!(
                "{options}zone \"a.test\" {{ type primary; file \"a\"; }};\n\
                 zone \"b.test\" {{ type primary; file \"b\"; }};\n"
            );
            let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
            let listed = (got.notes.iter()).filter(|n| n.setting == setting).count();
            assert_eq!(listed, 1, "{setting}: {:?}", got.notes);
        }
        let dir = tempfile::tempdir().unwrap();
        let text =
            "options { directory \"/srv\"; };\nzone \"a.test\" { type primary; file \"a\"; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        assert!(!got.notes.iter().any(|n| n.setting.starts_with("directory")));
    }

    /// `notify primary-only` (`master-only`): BIND notifies from primary
    /// zones only, the NS records' servers too (listed, as for `yes`);
    /// secondaries and catalog members get no notify targets.
    #[test]
    fn notify_primary_only_gives_secondaries_no_targets() {
        for word in ["primary-only", "master-only"] {
            let dir = tempfile::tempdir().unwrap();
            let text = format!(
                "options {{ notify {word}; also-notify {{ 192.0.2.30 port 5300; }};\n\
                 \x20 catalog-zones {{ zone \"cat.test\" default-primaries {{ 192.0.2.1; }}; }}; }};\n\
                 zone \"p.test\" {{ type primary; file \"p\"; }};\n\
                 zone \"s.test\" {{ type secondary; primaries {{ 192.0.2.1; }}; }};\n\
                 zone \"cat.test\" {{ type secondary; primaries {{ 192.0.2.1; }}; }};\n"
            );
            let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
            let targets = |o: &str| {
                let zone = got.zones.iter().find(|z| z.origin == o).unwrap();
                zone.notify.iter().map(Peer::heron).collect::<Vec<_>>()
            };
            assert_eq!(targets("p.test"), ["192.0.2.30:5300"], "{word}");
            assert!(targets("s.test").is_empty(), "{word}");
            assert!(got.catalogs[0].member_notify.is_empty(), "{word}");
            let listed = (got.notes.iter())
                .find(|n| n.setting == format!("notify {word}"))
                .unwrap_or_else(|| panic!("{word}: {:?}", got.notes));
            assert!(listed.advice.contains("NS records"), "{word}");
        }
    }

    /// Every primary zone keeps its journal in memory, whether others
    /// may transfer it or not (allow-transfer may be added by hand):
    /// its FILE.jnl is BIND's. Said once, as a step; secondaries keep
    /// their journal beside their own copy.
    #[test]
    fn primary_zones_leave_bind_journal_path_alone() {
        let dir = tempfile::tempdir().unwrap();
        let text = "zone \"a.test\" { type primary; file \"/z/a\"; allow-transfer { 192.0.2.1; }; };\n\
                    zone \"b.test\" { type primary; file \"/z/b\"; };\n\
                    zone \"s.test\" { type secondary; primaries { 192.0.2.1; }; allow-transfer { 192.0.2.1; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let off: Vec<bool> = got.zones.iter().map(|z| z.journal_off).collect();
        assert_eq!(off, [true, true, false]);
        let steps = (got.notes.iter())
            .filter(|n| n.kind == NoteKind::ToDo && n.setting.starts_with("journal = false"))
            .count();
        assert_eq!(steps, 1, "{:?}", got.notes);
        let toml = crate::import::writer::write_toml(&got, "");
        assert_eq!(toml.matches("journal = false").count(), 2, "{toml}");
    }

    /// `blackhole` is a deny list: a negated element excepts its
    /// addresses from the elements after it, exactly, and is never a cut
    /// that lets in what BIND ignored (black-box finding AQ-7: 127.0.0.9
    /// was answered). Negations in a nested acl only take addresses out
    /// of it; keys match nothing; what cannot be named is a step to do.
    #[test]
    fn a_blackhole_with_negations_ignores_what_bind_ignores() {
        let blackhole = |list: &str| {
            let dir = tempfile::tempdir().unwrap();
            let text = format!(
                "acl x {{ !10.9.0.0/16; 10.8.0.0/15; }};
options {{ blackhole {{ {list} }}; }};
"
            );
            let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
            let kept: Vec<String> = got.blackhole.iter().map(Prefix::to_string).collect();
            let steps: Vec<String> = (got.notes.iter())
                .filter(|n| n.kind == NoteKind::ToDo)
                .map(|n| n.setting.clone())
                .collect();
            (kept, steps)
        };
        let (kept, steps) = blackhole("10.0.0.0/8; !127.0.0.5; 127.0.0.0/24;");
        assert_eq!(
            kept,
            [
                "10.0.0.0/8",
                "127.0.0.128/25",
                "127.0.0.64/26",
                "127.0.0.32/27",
                "127.0.0.16/28",
                "127.0.0.8/29",
                "127.0.0.0/30",
                "127.0.0.6/31",
                "127.0.0.4"
            ]
        );
        assert!(steps.is_empty(), "{steps:?}");
        let (kept, _) = blackhole("x; !{ 10.10.0.0/16; key k; }; !::1; 10.8.0.0/14; ::/127;");
        assert_eq!(kept, ["10.8.0.0/15", "10.11.0.0/16", "::"]);
        let (kept, steps) = blackhole("!192.0.2.1; localnets; 192.0.2.0/31;");
        assert_eq!(kept, ["192.0.2.0"]);
        assert_eq!(steps, ["blackhole { localnets; }"]);
    }

    /// A list cut at its first negated element to nothing says that it
    /// now refuses everything, not only that nobody gains access.
    #[test]
    fn a_list_cut_to_nothing_says_everything_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { allow-query { !192.0.2.66; any; }; };\n\
                    zone \"a.test\" { type primary; file \"a\"; allow-transfer { 192.0.2.1; !192.0.2.2; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let empty: Vec<&str> = (got.notes.iter())
            .filter(|n| n.setting.ends_with("(as translated: empty)"))
            .map(|n| n.setting.as_str())
            .collect();
        assert_eq!(
            empty,
            ["allow-query (as translated: empty)"],
            "{:?}",
            got.notes
        );
    }

    #[test]
    fn malformed_configurations_are_errors_with_their_line() {
        let cases: &[(&str, u32, &str)] = &[
            ("options {\n directory \"x\";\n", 2, "'}' is missing"),
            ("zone \"a\" {\n type master;\n", 2, "'}' is missing"),
            ("options { directory \"x }; };\n", 1, "not closed"),
            ("/* open\n comment\n", 1, "not closed"),
            ("};\n", 1, "without a matching"),
            ("options { a b }\n", 1, "not ended by ';'"),
            ("include \"missing.conf\";\n", 1, "cannot read"),
            ("\n\ninclude \"named.conf\";\n", 3, "include loop"),
            ("key \"k\" { algorithm hmac-sha256; };\n", 1, "no secret"),
            (
                "key \"k\" { algorithm hmac-sha256; secret \"c2VjcmV0\" extra; };\n",
                1,
                "secret takes one value (not shown)",
            ),
            ("key \"k\" { secret \"c2VjcmV0\"; };\n", 1, "no algorithm"),
            (
                "key \"k\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; secret \"c2VjcmV1\"; };\n",
                1,
                "secret given 2 times (not shown)",
            ),
            (&"a { ".repeat(40), 1, "nested more than"),
        ];
        for (text, line, needle) in cases {
            let dir = tempfile::tempdir().unwrap();
            let err = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap_err();
            assert_eq!(
                err.loc.as_ref().map(|l| l.line),
                Some(*line),
                "{text:?}: {err}"
            );
            assert!(err.message.contains(needle), "{text:?}: {err}");
        }
    }

    /// DL-3: `options { port }` is where BIND sends NOTIFY and asks
    /// primaries that name no port (and `tls-port` over TLS); a port of
    /// the entry or of its list still wins.
    #[test]
    fn the_options_port_is_the_peers_port_where_they_name_none() {
        let dir = tempfile::tempdir().unwrap();
        let text = "options { port 47289; tls-port 8853; listen-on { 127.0.0.1; };\n\
                    \x20 notify explicit; also-notify { 127.0.0.9; 127.0.0.10 port 5300; }; };\n\
                    zone \"s.test\" { type secondary; primaries { 127.0.0.8; 127.0.0.7 tls ephemeral; }; };\n\
                    zone \"t.test\" { type secondary; primaries port 5301 { 127.0.0.6; }; };\n\
                    zone \"p.test\" { type primary; file \"p.zone\"; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        assert_eq!(
            got.listen[0],
            "127.0.0.1:47289".parse::<SocketAddr>().unwrap()
        );
        let peers = |origin: &str, notify: bool| -> Vec<String> {
            let zone = got.zones.iter().find(|z| z.origin == origin).unwrap();
            let list = if notify {
                &zone.notify
            } else {
                &zone.primaries
            };
            list.iter().map(Peer::heron).collect()
        };
        assert_eq!(
            peers("s.test", false),
            ["127.0.0.8:47289", "127.0.0.7:8853 tls"]
        );
        assert_eq!(peers("t.test", false), ["127.0.0.6:5301"]);
        assert_eq!(
            peers("p.test", true),
            ["127.0.0.9:47289", "127.0.0.10:5300"]
        );
    }

    #[test]
    fn listen_on_tls_becomes_a_dot_listener_and_primaries_over_tls_keep_their_check() {
        let dir = tempfile::tempdir().unwrap();
        let text = "tls local { key-file \"k.pem\"; cert-file \"c.pem\"; };\n\
                    tls up { ca-file \"ca.pem\"; remote-hostname \"ns1.example\"; };\n\
                    options { directory \"/etc/bind\"; listen-on { 192.0.2.53; };\n\
                    \x20 listen-on port 853 tls local { 192.0.2.53; }; listen-on-v6 port 443 tls local http default { any; }; };\n\
                    zone \"s.test\" { type secondary; primaries { 192.0.2.1 tls up; 192.0.2.2 tls ephemeral; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let tls = got.tls.as_ref().unwrap();
        assert_eq!(
            tls.listen,
            ["192.0.2.53:853".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(tls.certificate, Path::new("/etc/bind/c.pem"));
        assert_eq!(got.listen, ["192.0.2.53:53".parse::<SocketAddr>().unwrap()]);
        let primaries: Vec<String> = got.zones[0].primaries.iter().map(Peer::heron).collect();
        assert_eq!(
            primaries,
            ["192.0.2.1:853 tls ns1.example", "192.0.2.2:853 tls"]
        );
        assert_eq!(got.tls_ca.as_deref(), Some(Path::new("/etc/bind/ca.pem")));
        assert!(
            got.notes
                .iter()
                .any(|n| n.loc.line == 4 && n.advice.contains("HTTPS"))
        );
    }

    /// A primary's `tls` block with a `ca-file` and no `remote-hostname`
    /// is checked by BIND against the primary's address: so by Heron too,
    /// not left unchecked. Client certificates, protocols and a second CA
    /// file are listed.
    #[test]
    fn a_tls_block_without_a_remote_hostname_is_checked_for_the_address() {
        let dir = tempfile::tempdir().unwrap();
        let text = "tls byip { ca-file \"/ca/one.pem\"; };\n\
                    tls mutual { ca-file \"/ca/two.pem\"; remote-hostname \"ns2.example\";\n\
                    \x20 cert-file \"me.pem\"; key-file \"me.key\"; protocols { TLSv1.3; }; };\n\
                    zone \"s.test\" { type secondary; primaries { 192.0.2.1 tls byip; 192.0.2.2 tls mutual; }; };\n";
        let got = parse(&write_files(dir.path(), &[("named.conf", text)])).unwrap();
        let primaries: Vec<String> = got.zones[0].primaries.iter().map(Peer::heron).collect();
        assert_eq!(
            primaries,
            [
                "192.0.2.1:853 tls 192.0.2.1",
                "192.0.2.2:853 tls ns2.example"
            ]
        );
        assert_eq!(got.tls_ca.as_deref(), Some(Path::new("/ca/one.pem")));
        let listed = |needle: &str| got.notes.iter().any(|n| n.setting.contains(needle));
        assert!(listed("cert-file") && listed("key-file") && listed("protocols"));
        assert!(listed("ca-file /ca/two.pem"), "{:?}", got.notes);
    }

    /// A malformed key never prints its secret; a statement Heron does
    /// not know in a key is listed, not dropped (black-box findings).
    #[test]
    fn key_blocks_are_read_strictly_and_never_show_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";
        for text in [
            format!("key \"k\" {{\n algorithm hmac-sha256;\n secret \"{secret}\"\n}};\n"),
            format!("key \"k\" {{ algorithm hmac-sha256; secret \"{secret}\" extra; }};\n"),
        ] {
            let err = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap_err();
            assert!(!err.to_string().contains(&secret[..8]), "{err}");
        }
        // The secret written as the algorithm, and the other way round.
        let swapped = format!("key \"k\" {{ algorithm \"{secret}\"; secret \"hmac-sha256\"; }};\n");
        let path = write_files(dir.path(), &[("named.conf", &swapped)]);
        let err = crate::import::import(crate::import::From::Bind, &path).unwrap_err();
        let lower = secret.to_ascii_lowercase();
        assert!(
            !err.to_string().to_ascii_lowercase().contains(&lower[..8]),
            "{err}"
        );
        let text =
            format!("key \"k\" {{ algorithm hmac-sha256; secret \"{secret}\"; foo bar; }};\n");
        let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
        assert!(
            got.notes.iter().any(|n| n.setting == "key k: foo bar"),
            "{:?}",
            got.notes
        );
    }

    /// BIND takes NOTIFY from a primary's address whether or not it is
    /// signed, though transfers use the primary's key (black-box finding:
    /// Heron's default refused such NOTIFYs after an import).
    #[test]
    fn notifies_from_keyed_primaries_are_allowed_unsigned_as_bind_allows_them() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "key \"k\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             zone \"a.test\" {{ type secondary; primaries {{ 192.0.2.1 key k; }}; file \"a\"; }};\n\
             zone \"b.test\" {{ type secondary; primaries {{ 192.0.2.1 key k; }}; file \"b\";\n\
             \x20 allow-notify {{ 198.51.100.9; }}; }};\n\
             zone \"c.test\" {{ type secondary; primaries {{ 192.0.2.1; }}; file \"c\"; }};\n"
        );
        let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
        let notify = |i: usize| -> Vec<String> {
            got.zones[i].allow_notify.iter().map(Rule::heron).collect()
        };
        assert_eq!(notify(0), ["192.0.2.1"]);
        assert_eq!(notify(1), ["198.51.100.9", "192.0.2.1"]);
        assert!(notify(2).is_empty(), "Heron's default: the primaries");
    }

    #[test]
    fn key_algorithms_are_spelt_as_heron_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let text = "key \"old\" { algorithm HMAC-MD5.SIG-ALG.REG.INT; secret \"c2VjcmV0\"; };\n";
        let got = crate::import::import(
            crate::import::From::Bind,
            &write_files(dir.path(), &[("named.conf", text)]),
        )
        .unwrap();
        assert_eq!(got.keys[0].algorithm, "hmac-md5");
        let text = "\nkey \"gss\" { algorithm gss-tsig; secret \"c2VjcmV0\"; };\n";
        let err = crate::import::import(
            crate::import::From::Bind,
            &write_files(dir.path(), &[("named.conf", text)]),
        )
        .unwrap_err();
        assert_eq!(err.loc.map(|l| l.line), Some(2));
        assert!(err.message.contains("gss-tsig"), "{}", err.message);
    }

    #[test]
    fn mutated_configurations_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path(), &[("zones.conf", ZONES)]);
        let mut rng = Rng::new(9);
        let path = dir.path().join("named.conf");
        let text = conf() + ZONES;
        for _ in 0..2000 {
            std::fs::write(&path, mutate(&text, &mut rng)).unwrap();
            let _ = parse(&path);
        }
    }

    #[test]
    fn a_large_configuration_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("options { directory \"/z\"; };\n");
        for i in 0..50_000 {
            text.push_str(&format!(
                "zone \"z{i}.test\" {{ type primary; file \"z{i}\"; }};\n"
            ));
        }
        let got = parse(&write_files(dir.path(), &[("named.conf", &text)])).unwrap();
        assert_eq!(got.zones.len(), 50_000);
    }
}
