//! knot.conf (Knot DNS 3): `server`, `key`, `remote` (and `remotes`
//! groups), `acl`, `template` (the `default` one for zones naming
//! none), `zone`, `mod-rrl`, catalog roles, and `include`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::knot_syntax::{Field, Item, Section, parse_file};
use super::model::{
    CatalogConsumer, Imported, MemberGroup, Peer, Prefix, Rrl, Rule, TlsListener, TsigKey,
    UPDATE_ADVICE, Zone, key_import_advice, parse_at_port, range_prefixes, signing_advice,
    without_denied,
};
use super::signing;
use super::source::{ImportError, Loc, resolve, zone_file_includes};

/// `mod-rrl`'s `slip` when not set: every limited answer goes out
/// truncated.
const KNOT_DEFAULT_SLIP: u32 = 1;

/// Reads `path` and everything it includes.
pub fn parse(path: &Path) -> Result<Imported, ImportError> {
    let (sections, files) = parse_file(path)?;
    let root = Loc {
        file: std::sync::Arc::from(path),
        line: 1,
    };
    let mut it = Interpreter::new(&sections, root)?;
    it.run(&sections)?;
    it.out.sources = files;
    Ok(it.out)
}

struct Interpreter {
    out: Imported,
    remotes: HashMap<String, Vec<Peer>>,
    acls: HashMap<String, Item>,
    templates: HashMap<String, Item>,
    rrl_modules: HashMap<String, Item>,
    /// `mod-queryacl` configurations by id: a zone using one gets its
    /// addresses as `allow-query`.
    queryacl_modules: HashMap<String, Item>,
    keys: Vec<String>,
    automatic_acl: bool,
    root: Loc,
    /// Zones using each `mod-rrl` configuration, and zones using none.
    rrl_users: HashMap<String, usize>,
    zones_without_rrl: usize,
    /// Template settings already reported.
    template_notes: std::collections::HashSet<(PathBuf, u32)>,
    /// Knot's KASP database (`database: kasp-db`, default `storage/keys`).
    kasp_dir: PathBuf,
    /// `keystore:` items by id, and the keystore each policy names.
    keystores: HashMap<String, Item>,
    policy_keystores: HashMap<String, String>,
    /// A relative `storage` said (once).
    relative_storage_said: bool,
}

/// Sections Heron needs nothing for.
const SECTION_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "log",
        "Heron logs to stderr (the journal under systemd); see [log]",
    ),
    (
        "database",
        "Heron keeps no database: zones load from their files, journals in FILE.jnl",
    ),
    (
        "control",
        "heron ctl talks over [server] control, a Unix socket",
    ),
    ("statistics", "see [metrics] and `heron ctl stats`"),
    ("module", "Heron loads no modules"),
];

impl Interpreter {
    fn new(sections: &[Section], root: Loc) -> Result<Interpreter, ImportError> {
        let mut it = Interpreter {
            out: Imported::default(),
            remotes: HashMap::new(),
            acls: HashMap::new(),
            templates: HashMap::new(),
            rrl_modules: HashMap::new(),
            queryacl_modules: HashMap::new(),
            keys: Vec::new(),
            automatic_acl: false,
            root,
            rrl_users: HashMap::new(),
            zones_without_rrl: 0,
            template_notes: std::collections::HashSet::new(),
            relative_storage_said: false,
            kasp_dir: PathBuf::new(),
            keystores: HashMap::new(),
            policy_keystores: HashMap::new(),
        };
        for section in sections.iter().filter(|s| s.name == "key") {
            for item in &section.items {
                it.key(item)?;
            }
        }
        for section in sections {
            for item in &section.items {
                let id = item.value("id").unwrap_or("").to_string();
                match section.name.as_str() {
                    "remote" => {
                        let peers = it.remote(item)?;
                        it.remotes.insert(id, peers);
                    }
                    "acl" => drop(it.acls.insert(id, item.clone())),
                    "template" => drop(it.templates.insert(id, item.clone())),
                    "mod-rrl" => drop(it.rrl_modules.insert(id, item.clone())),
                    "mod-queryacl" => drop(it.queryacl_modules.insert(id, item.clone())),
                    "keystore" => drop(it.keystores.insert(id, item.clone())),
                    _ => {}
                }
            }
        }
        // Groups of remotes name remotes defined anywhere in the file.
        for section in sections.iter().filter(|s| s.name == "remotes") {
            for item in &section.items {
                let members = item
                    .get("remote")
                    .map(|f| f.values.clone())
                    .unwrap_or_default();
                let peers = members
                    .iter()
                    .flat_map(|m| it.remotes.get(m).cloned().unwrap_or_default())
                    .collect();
                it.remotes
                    .insert(item.value("id").unwrap_or("").to_string(), peers);
            }
        }
        Ok(it)
    }

    fn key(&mut self, item: &Item) -> Result<(), ImportError> {
        let id = item
            .value("id")
            .ok_or_else(|| ImportError::at(&item.loc, "key without an id"))?;
        let secret = item
            .value("secret")
            .ok_or_else(|| ImportError::at(&item.loc, format!("key {id}: no secret")))?;
        self.keys.push(id.to_string());
        self.out.keys.push(TsigKey {
            name: id.to_string(),
            algorithm: item
                .value("algorithm")
                .unwrap_or("hmac-sha256")
                .to_ascii_lowercase(),
            secret: secret.to_string(),
            loc: item.loc.clone(),
        });
        for f in &item.fields {
            if !matches!(f.key.as_str(), "id" | "algorithm" | "secret") {
                self.out.untranslated(
                    &f.loc,
                    format!("key {id}: {}", f.key),
                    "not a key setting Heron knows",
                );
            }
        }
        Ok(())
    }

    fn key_of(&self, field: Option<&Field>) -> Result<Option<String>, ImportError> {
        let Some(field) = field else { return Ok(None) };
        match field.values.as_slice() {
            [] => Ok(None),
            [key] if super::defined_key(&self.keys, key).is_some() => {
                Ok(super::defined_key(&self.keys, key).cloned())
            }
            [key] => Err(ImportError::at(
                &field.loc,
                format!("key {key} is not defined"),
            )),
            _ => Err(ImportError::at(&field.loc, "Heron takes one key per peer")),
        }
    }

    fn remote(&mut self, item: &Item) -> Result<Vec<Peer>, ImportError> {
        let key = self.key_of(item.get("key"))?;
        let tls = item.value("tls").is_some_and(on);
        let default_port = if tls { 853 } else { 53 };
        let mut peers = Vec::new();
        for addr in item
            .get("address")
            .map(|f| f.values.as_slice())
            .unwrap_or(&[])
        {
            let addr = parse_at_port(addr, default_port).ok_or_else(|| {
                ImportError::at(&item.loc, format!("remote: '{addr}' is not an address"))
            })?;
            let mut peer = Peer::plain(addr, key.clone());
            if tls {
                peer.tls = Some(None);
            }
            peers.push(peer);
        }
        for f in &item.fields {
            let advice = match f.key.as_str() {
                "id" | "address" | "key" | "tls" => continue,
                "via" => {
                    "write `via ADDRESS` after the primary or notify target by hand, or set [xfr] source"
                }
                "cert-key" => {
                    "Heron checks a primary's certificate against [secondary] tls-ca and a name, not a key pin"
                }
                "block-notify-after-transfer" | "no-edns" | "automatic-acl" => {
                    "no Heron equivalent"
                }
                _ => "no Heron equivalent: check whether the behaviour matters",
            };
            self.out.untranslated(
                &f.loc,
                format!(
                    "remote {}: {} {}",
                    item.value("id").unwrap_or(""),
                    f.key,
                    f.values.join(" ")
                ),
                advice,
            );
        }
        Ok(peers)
    }
}

/// Knot's zone file for the zone `item` configures: `file` (default
/// `%s.zone`) in `storage`, its placeholders filled in as Knot fills
/// them; false when one is unknown to Heron (left as written).
fn knot_zone_path(item: &Item, origin: &str) -> (PathBuf, bool) {
    let name = if origin == "." {
        "root".to_string()
    } else {
        origin.to_ascii_lowercase()
    };
    let template = item.value("file").unwrap_or("%s.zone");
    let (file, known) = match knot_file_name(template, &name) {
        Some(file) => (file, true),
        None => (template.replace("%s", &name), false),
    };
    let storage = item.value("storage").unwrap_or("/var/lib/knot");
    (resolve(Path::new(storage), &file), known)
}

/// A Knot zone `file` template filled in for the zone `name` (lower
/// case, no final dot): `%s` the name, `%c[N]` and `%c[N-M]` its
/// characters from the left, `%l[N]` its labels from the right, `%%` a
/// percent sign. None for anything else.
fn knot_file_name(template: &str, name: &str) -> Option<String> {
    let (mut out, mut rest) = (String::new(), template);
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        let (kind, after) = (rest.chars().next()?, rest.get(1..)?);
        rest = after;
        match kind {
            's' => out.push_str(name),
            '%' => out.push('%'),
            'c' | 'l' => {
                let (range, after) = after.strip_prefix('[')?.split_once(']')?;
                rest = after;
                out.push_str(&knot_part(kind, range, name)?);
            }
            _ => return None,
        }
    }
    out.push_str(rest);
    Some(out)
}

/// `%c[range]` or `%l[N]` of `name`.
fn knot_part(kind: char, range: &str, name: &str) -> Option<String> {
    let (first, last) = match range.split_once('-') {
        Some((a, b)) if kind == 'c' => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
        _ => {
            let n = range.parse::<usize>().ok()?;
            (n, n)
        }
    };
    match kind {
        'c' => name
            .get(first..=last.min(name.len().checked_sub(1)?))
            .map(str::to_string),
        _ => name.rsplit('.').nth(first).map(str::to_string),
    }
}

fn on(value: &str) -> bool {
    matches!(value, "on" | "true" | "yes")
}

/// What a zone's ACLs allow, by action.
#[derive(Default)]
struct Access {
    transfer: Vec<Rule>,
    notify: Vec<Rule>,
    /// `allow-update` rules.
    update: Vec<String>,
    /// Addresses a `deny` rule names, for the actions it names only: a
    /// rule denying NOTIFY says nothing of transfers (black-box finding
    /// DB-8: it took away the allow rules of every action).
    denied: Denied,
}

#[derive(Default)]
struct Denied {
    transfer: Vec<Prefix>,
    notify: Vec<Prefix>,
    update: Vec<Prefix>,
}

impl Interpreter {
    fn run(&mut self, sections: &[Section]) -> Result<(), ImportError> {
        let server: Vec<&Item> = sections
            .iter()
            .filter(|s| s.name == "server")
            .flat_map(|s| &s.items)
            .collect();
        self.server(&server)?;
        self.signing_policies(sections);
        for section in sections {
            match section.name.as_str() {
                "zone" => {
                    for item in &section.items {
                        self.zone(item)?;
                    }
                }
                "server" | "key" | "remote" | "remotes" | "acl" | "template" | "mod-rrl"
                | "mod-queryacl" => {}
                "policy" => {}
                "xdp" => self.xdp(section),
                "keystore" => self.out.not_needed(
                    &section.loc,
                    "keystore:",
                    "Heron keeps its keys in the zone's key-directory; keys in PEM files are \
                     imported with the keymgr command listed for each signed zone (with \
                     --keystore naming the folder), those in PKCS #11 tokens are listed",
                ),
                "submission" | "dnskey-sync" => self.out.untranslated(
                    &section.loc,
                    format!("{}:", section.name),
                    signing_advice("Knot"),
                ),
                name if name.starts_with("mod-") => {
                    self.out
                        .untranslated(&section.loc, format!("{name}:"), module_advice(name))
                }
                name => match SECTION_NOT_NEEDED.iter().find(|(n, _)| *n == name) {
                    Some((_, advice)) => {
                        self.out
                            .not_needed(&section.loc, format!("{name}:"), *advice)
                    }
                    None => self.out.untranslated(
                        &section.loc,
                        format!("{name}:"),
                        "no Heron equivalent",
                    ),
                },
            }
        }
        self.rrl_result();
        Ok(())
    }

    /// Knot's `xdp:` section: its `INTERFACE@PORT` listen entries are
    /// Heron's `[xdp] listen` (black-box finding BJ-11: the section was
    /// said to have no Heron equivalent).
    fn xdp(&mut self, section: &Section) {
        // Knot's `udp: off` answers no UDP over XDP: nothing to take
        // (black-box finding BK-5).
        let fields = || section.items.iter().flat_map(|i| &i.fields);
        let no_udp = fields().any(|f| f.key == "udp" && !f.values.iter().all(|v| on(v)));
        for field in fields() {
            let advice = match field.key.as_str() {
                "listen" if no_udp => "Knot answered no UDP over XDP here (udp: off): not taken",
                "listen" => {
                    for entry in &field.values {
                        self.xdp_listen(field, entry);
                    }
                    continue;
                }
                "udp" => continue,
                "tcp" => "Heron's XDP path is UDP only: TCP is served on [server] listen",
                _ => "no Heron equivalent: check whether the behaviour matters",
            };
            let setting = format!("xdp: {} {}", field.key, field.values.join(" "));
            self.out.untranslated(&field.loc, setting, advice);
        }
    }

    /// One `xdp: listen` entry: `INTERFACE[@PORT]` (port 53 if none) is
    /// taken as it is; an address Knot resolves to its interface is not.
    fn xdp_listen(&mut self, field: &Field, entry: &str) {
        let (name, port) = match entry.split_once('@') {
            Some((name, port)) => (name, port.parse::<u16>().ok()),
            None => (entry, Some(53)),
        };
        let is_address = name.parse::<std::net::IpAddr>().is_ok() || name.contains(':');
        match port {
            Some(port) if !is_address && !name.is_empty() => {
                self.out.xdp_listen.push(format!("{name}@{port}"));
            }
            _ => self.out.untranslated(
                &field.loc,
                format!("xdp: listen {entry}"),
                "Heron's [xdp] listen names an interface (INTERFACE@PORT): write the one holding that address",
            ),
        }
    }

    fn server(&mut self, items: &[&Item]) -> Result<(), ImportError> {
        let get = |key: &str| items.iter().rev().find_map(|i| i.get(key));
        for field in items.iter().flat_map(|i| &i.fields) {
            let addrs = || -> Result<Vec<SocketAddr>, ImportError> {
                field
                    .values
                    .iter()
                    .map(|a| {
                        parse_at_port(a, if field.key == "listen-tls" { 853 } else { 53 })
                            .ok_or_else(|| {
                                ImportError::at(
                                    &field.loc,
                                    format!("{}: '{a}' is not an address", field.key),
                                )
                            })
                    })
                    .collect()
            };
            match field.key.as_str() {
                "listen" => self.out.listen.extend(addrs()?),
                "listen-tls" => {
                    let (Some(cert), Some(key)) = (get("cert-file"), get("key-file")) else {
                        self.out.untranslated(&field.loc, "server: listen-tls", "Heron needs a certificate and key for DNS over TLS: set cert-file and key-file, or write [tls] by hand");
                        continue;
                    };
                    let tls = self.out.tls.get_or_insert_with(|| TlsListener {
                        listen: Vec::new(),
                        certificate: PathBuf::from(&cert.values[0]),
                        key: PathBuf::from(&key.values[0]),
                    });
                    tls.listen.extend(addrs()?);
                }
                // An empty value turns the answer off, as Heron's unset.
                "identity" => {
                    self.out.identity = field.values.first().cloned().filter(|v| !v.is_empty())
                }
                "version" => {
                    self.out.version = field.values.first().cloned().filter(|v| !v.is_empty())
                }
                // Empty (`""`, or `0x` with no digits): no NSID, as
                // Heron's unset; Knot sends none for either.
                "nsid" => {
                    self.out.nsid_hex = (field.values.first())
                        .map(|v| nsid_hex(v))
                        .filter(|hex| !hex.is_empty())
                }
                "automatic-acl" => self.automatic_acl = field.values.first().is_some_and(|v| on(v)),
                "cert-file" | "key-file" => {}
                key => self.server_note(field, key),
            }
        }
        self.identity_defaults(items);
        if self.out.listen.is_empty() {
            let loc = items.first().map_or(self.root.clone(), |i| i.loc.clone());
            self.out.untranslated(&loc, "server: listen (not set)", "Knot answers on no address without listen; written as 127.0.0.1:53: set [server] listen");
        }
        Ok(())
    }

    /// Knot answers version.bind with its version and id.server with the
    /// host name unless told otherwise; Heron answers them only when told
    /// what to say.
    fn identity_defaults(&mut self, items: &[&Item]) {
        let set = |key: &str| items.iter().any(|i| i.get(key).is_some());
        let loc = items.first().map_or(self.root.clone(), |i| i.loc.clone());
        if !set("version") {
            self.out.untranslated(
                &loc,
                "server: version (Knot's default: its version)",
                "Heron answers version.bind REFUSED unless [server] version is set",
            );
        }
        if !set("nsid") {
            self.out.untranslated(
                &loc,
                "server: nsid (Knot's default: the host name)",
                "Heron sends no NSID unless [server] nsid (or nsid-hex) is set",
            );
        }
        if !set("identity") {
            self.out.untranslated(
                &loc,
                "server: identity (Knot's default: the host name)",
                "Heron answers id.server and hostname.bind REFUSED unless [server] identity is set",
            );
        }
    }

    fn server_note(&mut self, field: &Field, key: &str) {
        let setting = format!("server: {key} {}", field.values.join(" "));
        let not_needed = match key {
            "rundir" | "pidfile" => Some("Heron needs no run folder or pid file"),
            "background-workers" | "udp-workers" | "tcp-workers" => {
                Some("Heron runs one worker per core; see [server] workers")
            }
            "socket-affinity" => {
                Some("each Heron worker has its own SO_REUSEPORT socket; see [server] workers")
            }
            _ => None,
        };
        if let Some(advice) = not_needed {
            self.out.not_needed(&field.loc, setting, advice);
            return;
        }
        let advice = match key {
            "udp-max-payload" => "set [server] max-udp-payload",
            "tcp-max-clients" => "set [tcp] max-connections",
            "tcp-idle-timeout" => "set [tcp] idle-timeout",
            "tcp-io-timeout" | "tcp-remote-io-timeout" => {
                "set [tcp] message-timeout or [secondary] timeout"
            }
            "answer-rotation" => "Heron orders records its own way; compare the answers",
            "listen-quic" => "Heron has no DNS over QUIC listener",
            "edns-client-subnet" => "Heron ignores ECS",
            "user" => "set [server] user (the Debian package's unit starts Heron as `heron`)",
            "udp-max-payload-ipv4" | "udp-max-payload-ipv6" => {
                "set [server] max-udp-payload (one size for both families)"
            }
            "async-start" => "Heron answers once the zones are loaded",
            _ => "no Heron equivalent: check whether the behaviour matters",
        };
        self.out.untranslated(&field.loc, setting, advice);
    }

    /// The peers a list of remote (or remotes group) ids names.
    fn peers(&mut self, field: Option<&Field>) -> Vec<Peer> {
        let Some(field) = field else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for id in &field.values {
            match self.remotes.get(id) {
                Some(peers) => out.extend(peers.iter().cloned()),
                None => self.out.untranslated(
                    &field.loc,
                    format!("{} {id}", field.key),
                    "no remote with this id; left out",
                ),
            }
        }
        out
    }

    fn access(&mut self, field: Option<&Field>) -> Result<Access, ImportError> {
        let mut access = Access::default();
        let Some(field) = field else {
            return Ok(access);
        };
        for id in &field.values {
            let Some(acl) = self.acls.get(id).cloned() else {
                self.out.untranslated(
                    &field.loc,
                    format!("acl {id}"),
                    "no acl with this id; left out",
                );
                continue;
            };
            self.acl(&acl, &mut access)?;
        }
        Ok(access)
    }

    /// What an ACL matches: each address (or prefix, or range) with each
    /// key it names, and its remotes with theirs; everyone when it names
    /// neither addresses nor remotes.
    fn acl_matches(
        &mut self,
        acl: &Item,
        id: &str,
    ) -> Result<Vec<(Prefix, Option<String>)>, ImportError> {
        let mut prefixes = Vec::new();
        for text in acl
            .get("address")
            .map(|f| f.values.as_slice())
            .unwrap_or(&[])
        {
            match address_prefixes(text) {
                Some(p) => prefixes.extend(p),
                None => {
                    return Err(ImportError::at(
                        &acl.loc,
                        format!("acl {id}: '{text}' is not an address, prefix or range"),
                    ));
                }
            }
        }
        let mut keyed: Vec<(Prefix, Option<String>)> = Vec::new();
        let keys: Vec<Option<String>> = match acl.get("key") {
            Some(f) if !f.values.is_empty() => f
                .values
                .iter()
                .map(|k| {
                    self.key_of(Some(&Field {
                        key: "key".into(),
                        values: vec![k.clone()],
                        loc: f.loc.clone(),
                    }))
                })
                .collect::<Result<_, _>>()?,
            _ => vec![None],
        };
        if prefixes.is_empty() && acl.get("remote").is_none() {
            prefixes = ["0.0.0.0/0", "::/0"]
                .iter()
                .map(|p| p.parse().expect("a prefix"))
                .collect();
        }
        for prefix in &prefixes {
            keyed.extend(keys.iter().map(|k| (*prefix, k.clone())));
        }
        let remote_peers = self.peers(acl.get("remote"));
        keyed.extend(
            remote_peers
                .iter()
                .map(|p| (host_prefix(p.addr.ip()), p.key.clone())),
        );
        Ok(keyed)
    }

    fn acl(&mut self, acl: &Item, access: &mut Access) -> Result<(), ImportError> {
        let id = acl.value("id").unwrap_or("");
        let keyed = self.acl_matches(acl, id)?;
        let actions = acl
            .get("action")
            .map(|f| f.values.clone())
            .unwrap_or_else(|| vec!["query".into()]);
        if acl.value("deny").is_some_and(on) {
            let prefixes = keyed.iter().map(|(p, _)| *p);
            for action in &actions {
                let denied = match action.as_str() {
                    "transfer" => &mut access.denied.transfer,
                    "notify" => &mut access.denied.notify,
                    "update" => &mut access.denied.update,
                    _ => continue,
                };
                denied.extend(prefixes.clone());
            }
            return Ok(());
        }
        let rules = keyed.into_iter().map(|(prefix, key)| Rule { prefix, key });
        let rules: Vec<Rule> = rules.collect();
        for action in actions {
            match action.as_str() {
                "transfer" => access.transfer.extend(rules.iter().cloned()),
                "notify" => access.notify.extend(rules.iter().cloned()),
                "update" => match update_rules(acl, &rules) {
                    Ok(update) => access.update.extend(update),
                    Err(why) => self.out.untranslated(
                        &acl.loc,
                        format!("acl {id}: action update"),
                        format!("{why}; {UPDATE_ADVICE}"),
                    ),
                },
                other => self.out.untranslated(
                    &acl.loc,
                    format!("acl {id}: action {other}"),
                    "no Heron equivalent for this action",
                ),
            }
        }
        for f in &acl.fields {
            if !matches!(
                f.key.as_str(),
                "id" | "address"
                    | "key"
                    | "action"
                    | "deny"
                    | "remote"
                    | "update-type"
                    | "update-owner"
                    | "update-owner-match"
                    | "update-owner-name"
            ) {
                self.out.untranslated(
                    &f.loc,
                    format!("acl {id}: {}", f.key),
                    "no Heron equivalent: the acl was read without it",
                );
            }
        }
        Ok(())
    }
}

/// Heron's `allow-update` rules for a Knot ACL with `action: update`,
/// matching `who`: which names (`update-owner`, `update-owner-match`,
/// `update-owner-name`; every name of the zone without them) and which
/// types (`update-type`; every type without it), as Heron's rules say
/// them (black-box finding BT-4: they were written by hand). Err(why)
/// for what Heron's rules cannot say.
fn update_rules(acl: &Item, who: &[Rule]) -> Result<Vec<String>, String> {
    let types = match acl.get("update-type").map(|f| f.values.join(" ")) {
        Some(types) if !types.is_empty() => types,
        _ => "ANY".into(),
    };
    let matching = acl.value("update-owner-match").unwrap_or("sub-or-equal");
    let owned = |name: &str| match name.strip_suffix('.') {
        Some(absolute) => absolute.to_string(),
        None if name == "@" => "{zone}".into(),
        None => format!("{name}.{{zone}}"),
    };
    let kinds: Vec<String> = match (acl.value("update-owner"), matching) {
        (None, _) | (Some("zone"), "sub-or-equal") => vec!["zonesub".into()],
        (Some("zone"), "equal") => vec!["name {zone}".into()],
        (Some("zone"), "sub") => vec!["wildcard *.{zone}".into()],
        (Some("name"), _) => {
            let names = acl
                .get("update-owner-name")
                .map_or(&[][..], |f| &f.values[..]);
            if names.is_empty() {
                return Err("update-owner name without update-owner-name".into());
            }
            let kind = match matching {
                "equal" => "name ",
                "sub-or-equal" => "subdomain ",
                "sub" => "wildcard *.",
                other => return Err(format!("update-owner-match {other}")),
            };
            names
                .iter()
                .map(|n| format!("{kind}{}", owned(n)))
                .collect()
        }
        (Some("key"), "equal") => vec!["self".into()],
        (Some("key"), "sub-or-equal") => vec!["selfsub".into()],
        (owner, matching) => {
            let owner = owner.unwrap_or("zone");
            return Err(format!(
                "update-owner {owner} with update-owner-match {matching}"
            ));
        }
    };
    let needs_key = kinds.iter().any(|k| k.starts_with("self"));
    let mut rules = Vec::new();
    for rule in who {
        let whom = match (&rule.key, rule.prefix.len) {
            (Some(key), 0) => format!("key {key}"),
            (None, _) if needs_key => {
                return Err("update-owner key with an address and no key".into());
            }
            _ => rule.heron(),
        };
        for kind in &kinds {
            let text = format!("{whom} {kind} {types}");
            if !rules.contains(&text) {
                rules.push(text);
            }
        }
    }
    Ok(rules)
}

fn host_prefix(ip: IpAddr) -> Prefix {
    Prefix {
        addr: ip,
        len: if ip.is_ipv4() { 32 } else { 128 },
    }
}

/// Knot's ACL address: an address, `A/LEN` or `A-B`.
fn address_prefixes(text: &str) -> Option<Vec<Prefix>> {
    if let Some((a, b)) = text.split_once('-') {
        return range_prefixes(a.trim().parse().ok()?, b.trim().parse().ok()?);
    }
    text.parse().ok().map(|p| vec![p])
}

/// Who a step for a template's setting is about.
const THE_TEMPLATES: &str = "the primary zones of this template";

/// A setting of a primary zone that makes Knot serve what its file
/// lacks, listed as a step by [`Interpreter::served_version_steps`].
fn served_version_step(f: &Field) -> bool {
    let value = f.values.first().map(String::as_str);
    match f.key.as_str() {
        "zonefile-sync" => value == Some("-1"),
        "zonefile-load" => value == Some("difference-no-serial"),
        _ => false,
    }
}

/// Zone settings Heron needs nothing for.
const ZONE_NOT_NEEDED: &[(&str, &str)] = &[
    (
        "semantic-checks",
        "heron check-zone and check-config check every zone",
    ),
    (
        "zonefile-sync",
        "Heron writes secondary copies after each transfer",
    ),
    (
        "zonefile-load",
        "Heron reads the zone file at start and at each reload",
    ),
    (
        "journal-max-usage",
        "Heron keeps up to 16 MB of IXFR history per zone",
    ),
    (
        "journal-max-depth",
        "Heron keeps up to 16 MB of IXFR history per zone",
    ),
    (
        "ixfr-from-axfr",
        "Heron computes IXFR differences at every reload",
    ),
    (
        "ixfr-by-one",
        "Heron sends an IXFR as the versions it holds",
    ),
    ("zonefile-skip", "Heron loads every record of the file"),
    ("adjust-threads", "Heron sizes its own threads"),
];

/// What to do instead of a Knot module (`mod-NAME` or `mod-NAME/ID`).
fn module_advice(module: &str) -> &'static str {
    let name = module.split('/').next().unwrap_or(module);
    match name {
        "mod-dnstap" => "Heron has no modules: set [dnstap] (socket and message types)",
        "mod-cookies" => "Heron has no modules: set [cookies] (server cookies, RFC 7873)",
        "mod-rrl" => "Heron has no modules: set [rrl] for the whole server",
        "mod-stats" => "Heron has no modules: see [metrics] (Prometheus) and `heron ctl stats`",
        "mod-queryacl" => {
            "Heron has no modules: a configuration with `address` alone is written as the zone's \
             allow-query; one that limits by `interface` (the address a query came to) is not: \
             set allow-query, and serve the zone only on those addresses"
        }
        "mod-synthrecord" => {
            "Heron synthesizes no records: write the forward and reverse records into the \
             zone file (generate them with a script) before Heron loads it"
        }
        "mod-onlinesign" => {
            "Heron signs whole zones ([[dnssec-policy]]), not answers as they go, and with keys \
             of its own (Knot's are not imported): sign the zone file before Heron loads it, or \
             keep Knot as a hidden signer and make Heron its secondary"
        }
        "mod-geoip" => {
            "Heron gives every client the same answers: serve each region's answers from a \
             Heron of its own, with allow-query naming its clients"
        }
        "mod-dnsproxy" => {
            "Heron is authoritative only and forwards nothing: zones it lacks get REFUSED"
        }
        "mod-noudp" => "Heron answers over UDP always; clients are sent to TCP only by TC",
        "mod-whoami" | "mod-probe" | "mod-authsignal" => {
            "Heron has no modules and no equivalent: check whether anyone relies on it"
        }
        _ => "Heron has no modules: check whether the behaviour matters",
    }
}

/// Zone settings read by [`Interpreter::zone`] itself.
const ZONE_READ: &[&str] = &[
    "domain",
    "storage",
    "template",
    "file",
    "master",
    "primary",
    "notify",
    "acl",
    "module",
    "catalog-role",
    "catalog-template",
    "catalog-zone",
    "catalog-group",
    "dnssec-signing",
    "dnssec-policy",
    "id",
];

impl Interpreter {
    /// The zone's settings after its template's (the `default` one when
    /// it names none).
    fn effective(&mut self, item: &Item) -> Item {
        let template = item.value("template").unwrap_or("default").to_string();
        let mut fields: Vec<Field> = match self.templates.get(&template) {
            Some(t) => t.fields.iter().filter(|f| f.key != "id").cloned().collect(),
            None if template != "default" => {
                self.out.untranslated(
                    &item.loc,
                    format!("template {template}"),
                    "no template with this id; the zone was read without it",
                );
                Vec::new()
            }
            None => Vec::new(),
        };
        fields.extend(item.fields.iter().cloned());
        Item {
            loc: item.loc.clone(),
            fields,
        }
    }

    fn zone(&mut self, raw: &Item) -> Result<(), ImportError> {
        let domain = raw
            .value("domain")
            .ok_or_else(|| ImportError::at(&raw.loc, "zone without a domain"))?;
        let item = self.effective(raw);
        let mut zone = Zone {
            loc: Some(raw.loc.clone()),
            origin: match domain.trim_end_matches('.') {
                "" => ".".into(),
                d => d.into(),
            },
            ..Zone::default()
        };
        zone.primaries = self.peers(item.get("primary").or(item.get("master")));
        zone.notify = self.peers(item.get("notify"));
        let access = self.access(item.get("acl"))?;
        self.apply_access(&mut zone, access, &raw.loc);
        if self.automatic_acl {
            // Knot lets its notify targets transfer the zone.
            zone.allow_transfer.extend(zone.notify.iter().map(|p| Rule {
                prefix: host_prefix(p.addr.ip()),
                key: p.key.clone(),
            }));
            zone.allow_transfer.dedup();
        }
        self.modules(&item, &mut zone);
        self.signing(&item, &mut zone);
        let role = item.value("catalog-role");
        let primary = zone.primaries.is_empty() && !matches!(role, Some("interpret" | "generate"));
        if primary {
            self.served_version_steps(&item, raw, &zone.origin);
        }
        for f in &item.fields {
            if primary && served_version_step(f) {
                continue;
            }
            let from_template = !raw.fields.iter().any(|r| r.loc == f.loc);
            if from_template {
                // Said once for the template, not once per zone.
                if self
                    .template_notes
                    .insert((f.loc.file.to_path_buf(), f.loc.line))
                {
                    self.zone_note(f, "(template)");
                }
            } else {
                self.zone_note(f, &zone.origin);
            }
        }
        match item.value("catalog-role") {
            Some("interpret") => return self.consumer(zone, &item),
            Some("generate") => zone.catalog_generate = true,
            Some("member") => {
                zone.catalog_member = item
                    .value("catalog-zone")
                    .map(|c| c.trim_end_matches('.').to_string());
                zone.catalog_group = item.value("catalog-group").map(str::to_string);
            }
            _ => {}
        }
        // A catalog Heron generates is written by Heron, so it gets a file
        // of its own (in the secondary folder), never the old server's.
        if zone.catalog_generate {
            zone.primaries.clear();
        } else if zone.primaries.is_empty() {
            let file = self.zone_file(&item, &zone.origin);
            // Knot, as Heron, finds a relative `$INCLUDE` from the
            // including file's folder.
            let folder = file.parent().unwrap_or(Path::new(".")).to_path_buf();
            let included = zone_file_includes(&file).into_iter();
            (self.out.zone_data).extend(included.map(|path| resolve(&folder, &path)));
            zone.file = Some(file);
        } else {
            // Knot writes what it transferred there (zonefile-sync).
            let (file, _) = knot_zone_path(&item, &zone.origin);
            self.out.zone_data.push(file);
        }
        self.out.zones.push(zone);
        Ok(())
    }

    /// Steps before Heron serves a primary zone's file where Knot serves
    /// what the file lacks: changes held in its journal only
    /// (`zonefile-sync: -1`), and serials it makes itself
    /// (`zonefile-load: difference-no-serial`, a `serial-policy` other
    /// than `increment`; a zone Knot signs has its serial step already).
    fn served_version_steps(&mut self, item: &Item, raw: &Item, origin: &str) {
        let of_template = |f: &Field| !raw.fields.iter().any(|r| r.loc == f.loc);
        let value = |f: &Field| f.values.join(" ");
        if let Some(f) = item.get("zonefile-sync").filter(|f| served_version_step(f)) {
            let (setting, zone, what) = match of_template(f) {
                true => ("zone (template)".to_string(), None, THE_TEMPLATES),
                false => (format!("zone {origin}"), Some(origin), "this zone"),
            };
            let flush = zone.map_or("knotc zone-flush".into(), |z| {
                format!("knotc zone-flush {z}")
            });
            let advice = format!(
                "Knot keeps the changes to {what} (dynamic updates, knotc zone-set) only in \
                 its journal and memory, never in the zone file, which Heron loads. Run `{flush}` \
                 before Heron takes over (Knot writes the zone as it serves it into the file), \
                 then check that the file's serial is the one Knot serves (dig @KNOT ZONE SOA)"
            );
            self.out.step_to_do(
                &f.loc,
                format!("{setting}: zonefile-sync {}", value(f)),
                advice,
            );
        }
        if item
            .get("dnssec-signing")
            .is_some_and(|f| f.values.first().is_some_and(|v| on(v)))
        {
            return;
        }
        let no_serial = item.get("zonefile-load").filter(|f| served_version_step(f));
        let policy = item
            .get("serial-policy")
            .filter(|f| f.values.first().is_some_and(|v| v != "increment"));
        let Some(f) = no_serial.or(policy) else {
            return;
        };
        let (setting, zone, what) = match of_template(f) {
            true => ("zone (template)".to_string(), "ZONE", THE_TEMPLATES),
            false => (format!("zone {origin}"), origin, "this zone"),
        };
        let mut advice = format!(
            "Knot makes the serial it serves for {what} ({} {}), Heron serves the zone \
             file's: raise the serial in the file above the one Knot serves (dig @KNOT {zone} \
             SOA) before Heron takes over, or secondaries holding Knot's higher serial would \
             not transfer from Heron",
            f.key,
            value(f)
        );
        if f.key == "zonefile-load" {
            advice.push_str(
                "; and from then on raise it at each edit of the file: Heron serves an edit \
                 that kept the serial (with a warning), but secondaries do not see it",
            );
        }
        let setting = format!("{setting}: {} {} (serial)", f.key, value(f));
        self.out.step_to_do(&f.loc, setting, advice);
    }

    fn apply_access(&mut self, zone: &mut Zone, access: Access, loc: &Loc) {
        let (transfer, dropped_t) = without_denied(access.transfer, &access.denied.transfer);
        let (notify, dropped_n) = without_denied(access.notify, &access.denied.notify);
        if dropped_t + dropped_n > 0 {
            self.out.untranslated(loc, format!("zone {}: acl with deny", zone.origin), format!("heron.toml has no deny entries: {} allow entries that overlap denied addresses were left out; list the allowed addresses without them", dropped_t + dropped_n));
        }
        zone.allow_transfer = transfer;
        self.apply_update(zone, access.update, !access.denied.update.is_empty(), loc);
        if !notify.is_empty() {
            // Knot takes NOTIFY only from what its ACLs allow; Heron's
            // list replaces its default (the primaries).
            zone.allow_notify = notify;
        } else if !zone.primaries.is_empty() && !self.automatic_acl {
            self.out.untranslated(
                loc,
                format!("zone {}: no acl allows notify", zone.origin),
                "Knot ignores NOTIFY here; Heron takes NOTIFY from the zone's primaries",
            );
        }
    }

    /// The zone's `allow-update` rules: a primary's; a secondary forwards
    /// updates in Knot, which Heron's rules do not say, and an ACL list
    /// with a deny entry is not written (Heron has no deny).
    fn apply_update(&mut self, zone: &mut Zone, update: Vec<String>, denies: bool, loc: &Loc) {
        if update.is_empty() {
            return;
        }
        let why = match (zone.primaries.is_empty(), denies) {
            (true, false) => {
                zone.allow_update = update;
                return;
            }
            (false, _) => {
                "a secondary zone: Knot forwards its updates to the primary; Heron does so for \
                 the senders allow-update-forwarding lists"
            }
            (true, true) => "heron.toml has no deny entries: write the allow-update rules by hand",
        };
        let setting = format!("zone {}: acl action update", zone.origin);
        self.out.untranslated(loc, setting, why);
    }

    /// Knot's zone file: `file` (default `%s.zone`) in `storage`, its
    /// placeholders filled in as Knot fills them; one Heron does not know
    /// is left as written, with a line.
    fn zone_file(&mut self, item: &Item, origin: &str) -> PathBuf {
        let (path, known) = knot_zone_path(item, origin);
        if !known {
            let template = item.value("file").unwrap_or_default();
            let loc = item.get("file").map_or(&item.loc, |f| &f.loc);
            let setting = format!("zone {origin}: file: {template}");
            let advice = "a placeholder Heron does not fill in: write the zone's file by hand";
            self.out.untranslated(loc, setting, advice);
        }
        if path.is_relative() {
            self.relative_storage(item);
        }
        path
    }

    /// A relative `storage` (black-box finding BT-5): knotd reads it from
    /// its working folder, heron.toml from its own; said once.
    fn relative_storage(&mut self, item: &Item) {
        let Some(field) = item.get("storage") else {
            return;
        };
        if std::mem::replace(&mut self.relative_storage_said, true) {
            return;
        }
        let setting = format!("storage: {}", field.values.join(" "));
        let advice = "knotd reads a relative storage from its working folder (where it was \
            started); heron.toml reads relative paths from its own folder: the zones' `file` \
            paths were written relative, make them full paths";
        self.out.untranslated(&field.loc, setting, advice);
    }

    fn modules(&mut self, item: &Item, zone: &mut Zone) {
        // `global-module` (in a template, Knot's documented rate limit
        // setup) applies to every query, as Heron's [rrl] does.
        let fields = ["module", "global-module"].map(|key| item.get(key));
        let modules: Vec<String> = (fields.iter().flatten())
            .flat_map(|f| f.values.iter().cloned())
            .collect();
        let rrl = modules
            .iter()
            .find_map(|m| m.strip_prefix("mod-rrl"))
            .map(|id| id.trim_start_matches('/').to_string());
        match rrl {
            Some(id) => {
                *self
                    .rrl_users
                    .entry(if id.is_empty() { "default".into() } else { id })
                    .or_default() += 1
            }
            None => self.zones_without_rrl += 1,
        }
        // A template's `global-module` too: it holds for every query of the
        // zones that use it (black-box finding DG-2: a global query ACL was
        // dropped, and the zones answered everyone).
        for key in ["module", "global-module"] {
            let Some(field) = item.get(key) else { continue };
            for m in field.values.iter().filter(|m| !m.starts_with("mod-rrl")) {
                if m.split('/').next() == Some("mod-queryacl") && self.query_acl(m, zone) {
                    continue;
                }
                (self.out).untranslated(&field.loc, format!("{key} {m}"), module_advice(m));
            }
        }
    }

    /// `module: mod-queryacl/ID` as the zone's `allow-query`: the
    /// configuration's `address` list (black-box finding DB-4: the zone
    /// answered everyone). False, for the module to be listed, when it
    /// also limits by `interface` (the address a query came to, which
    /// Heron cannot), names no addresses, or one it cannot read.
    fn query_acl(&mut self, module: &str, zone: &mut Zone) -> bool {
        let id = module.split_once('/').map_or("default", |(_, id)| id);
        let Some(config) = self.queryacl_modules.get(id) else {
            return false;
        };
        if config.get("interface").is_some() {
            return false;
        }
        let Some(addresses) = config.get("address") else {
            return false;
        };
        let prefixes: Option<Vec<Vec<Prefix>>> = addresses
            .values
            .iter()
            .map(|a| address_prefixes(a))
            .collect();
        let Some(prefixes) = prefixes.filter(|p| !p.is_empty()) else {
            return false;
        };
        let rules = prefixes
            .into_iter()
            .flatten()
            .map(|prefix| Rule { prefix, key: None });
        zone.allow_query.get_or_insert_default().extend(rules);
        true
    }

    /// One `[rrl]` for the server, from the `mod-rrl` the zones use (the
    /// prefix lengths Knot groups by, /24 and /56, are Heron's defaults).
    fn rrl_result(&mut self) {
        let mut users: Vec<(String, usize)> = self
            .rrl_users
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        users.sort();
        let Some((id, _)) = users.first().cloned() else {
            return;
        };
        let Some(module) = self.rrl_modules.get(&id).cloned() else {
            return;
        };
        let number = |key: &str| module.value(key).and_then(|v| v.parse::<u32>().ok());
        let mut rrl = Rrl {
            responses_per_second: number("rate-limit"),
            // Knot's default slip is 1 (every limited answer truncated),
            // Heron's 2 (black-box finding DL-2).
            slip: number("slip").or(Some(KNOT_DEFAULT_SLIP)),
            ..Rrl::default()
        };
        if let Some(f) = module.get("whitelist") {
            rrl.exempt = f
                .values
                .iter()
                .filter_map(|v| address_prefixes(v))
                .flatten()
                .collect();
        }
        for f in &module.fields {
            if !matches!(f.key.as_str(), "id" | "rate-limit" | "slip" | "whitelist") {
                self.out.untranslated(
                    &f.loc,
                    format!("mod-rrl {id}: {}", f.key),
                    "Heron sizes its table per worker ([rrl] table-size) and has no instant limit",
                );
            }
        }
        if users.len() > 1 || self.zones_without_rrl > 0 {
            self.out.untranslated(&module.loc, format!("mod-rrl {id}"), "Heron limits rates for the whole server, not per zone: this module's settings were taken for every zone");
        }
        self.out.rrl = Some(rrl);
    }

    /// A zone Knot signs: its policy (Knot's default as `knot-default`)
    /// named, and the command that imports its keys in the listing.
    fn signing(&mut self, item: &Item, zone: &mut Zone) {
        let Some(f) = item
            .get("dnssec-signing")
            .filter(|f| f.values.first().is_some_and(|v| on(v)))
        else {
            return;
        };
        let origin = zone.origin.clone();
        let setting = format!("zone {origin}: dnssec-signing on");
        let policy = item.value("dnssec-policy").filter(|p| *p != "default");
        let Some(folder) = self.key_folder(policy, &f.loc, &origin) else {
            return;
        };
        let name = match policy {
            None => {
                let (default, notes) = signing::knot_default(&f.loc);
                if !self.out.policies.iter().any(|p| p.name == default.name) {
                    self.out.policies.push(default);
                    for (setting, advice) in notes {
                        let setting = format!("knot-default: {setting}");
                        self.out.untranslated(&f.loc, setting, advice);
                    }
                }
                "knot-default".to_string()
            }
            Some(id) if self.out.policies.iter().any(|p| p.name == id) => id.to_string(),
            Some(_) => {
                self.out
                    .untranslated(&f.loc, setting, signing_advice("Knot"));
                return;
            }
        };
        let advice = key_import_advice(&origin, &name, "knot", &folder);
        zone.dnssec_policy = Some(name);
        self.out.step_to_do(&f.loc, setting.clone(), advice);
        let policy = item.value("serial-policy").unwrap_or("increment");
        let serial = format!(
            "raise the serial in the zone file above the one Knot serves (dig @KNOT {origin} SOA) \
             before Heron takes over: Knot's serial-policy ({policy}) raises the serial it serves \
             at each signing, Heron signs at the file's serial, and secondaries holding Knot's \
             higher one would not transfer from Heron"
        );
        self.out
            .step_to_do(&f.loc, format!("{setting} (serial)"), serial);
    }

    /// The folder arguments of the keymgr command that imports the keys
    /// of the keystore `policy` names (`default` for Knot's own policy or
    /// one naming none): the KASP database, and `--keystore DIR` when its
    /// PEM files are not in the database's `keys`. None, listed, for keys
    /// in a PKCS #11 token, which cannot be imported.
    fn key_folder(&mut self, policy: Option<&str>, loc: &Loc, origin: &str) -> Option<String> {
        let id = policy.and_then(|p| self.policy_keystores.get(p).cloned());
        let keystore = self.keystores.get(id.as_deref().unwrap_or("default"));
        let backend = keystore.and_then(|k| k.value("backend")).unwrap_or("pem");
        let config = keystore.and_then(|k| k.value("config")).unwrap_or("keys");
        if backend != "pem" {
            let setting = format!("zone {origin}: keystore backend {backend}");
            let advice = "Heron signs with key files and cannot take keys out of a PKCS #11 token: \
                 roll to keys Heron makes (a KSK rollover, with the DS at the parent), or keep \
                 Knot as a hidden signer and make Heron its secondary";
            self.out.untranslated(loc, setting, advice);
            return None;
        }
        let pem = resolve(&self.kasp_dir, config);
        let mut folder = self.kasp_dir.display().to_string();
        if pem != self.kasp_dir.join("keys") {
            folder.push_str(&format!(" --keystore {}", pem.display()));
        }
        Some(folder)
    }

    /// Every `policy:` item as a `[[dnssec-policy]]`, and where the KASP
    /// database is.
    fn signing_policies(&mut self, sections: &[Section]) {
        let database = sections.iter().filter(|s| s.name == "database");
        let database = database.flat_map(|s| &s.items).last();
        let storage = database.and_then(|d| d.value("storage"));
        let storage = PathBuf::from(storage.unwrap_or("/var/lib/knot"));
        let kasp = database.and_then(|d| d.value("kasp-db")).unwrap_or("keys");
        self.kasp_dir = resolve(&storage, kasp);
        let items = sections.iter().filter(|s| s.name == "policy");
        for item in items.flat_map(|s| &s.items) {
            let Some(id) = item.value("id") else {
                continue;
            };
            if let Some(keystore) = item.value("keystore") {
                (self.policy_keystores).insert(id.to_string(), keystore.to_string());
            }
            let (policy, notes) = signing::knot_policy(id, item);
            for (setting, advice) in notes {
                let setting = format!("policy {id}: {setting}");
                self.out.untranslated(&item.loc, setting, advice);
            }
            self.out.policies.push(policy);
        }
    }

    fn zone_note(&mut self, f: &Field, origin: &str) {
        if ZONE_READ.contains(&f.key.as_str()) {
            return;
        }
        // Read by `modules`: mod-rrl becomes [rrl], mod-queryacl the zone's
        // allow-query, the others are listed there.
        if f.key == "global-module" {
            return;
        }
        let setting = format!("zone {origin}: {} {}", f.key, f.values.join(" "));
        if let Some((_, advice)) = ZONE_NOT_NEEDED.iter().find(|(k, _)| *k == f.key) {
            self.out.not_needed(&f.loc, setting, *advice);
            return;
        }
        let advice = match f.key.as_str() {
            "journal-content" if f.values.first().is_some_and(|v| v == "all") => {
                "Knot may hold changes in its journal only: flush them to the file (knotc zone-flush) before Heron loads it"
            }
            "journal-content" => {
                self.out
                    .not_needed(&f.loc, setting, "Heron keeps IXFR history in FILE.jnl");
                return;
            }
            "serial-policy" => {
                "Heron serves the serial the file or the primary gives; a zone that takes \
                 dynamic updates moves it on by its `serial` setting (increment, unixtime, \
                 dateserial), written with its allow-update rules"
            }
            "refresh-min-interval"
            | "refresh-max-interval"
            | "retry-min-interval"
            | "retry-max-interval"
            | "expire-min-interval"
            | "expire-max-interval" => "Heron bounds SOA timers for all zones in [secondary]",
            "notify-delay" => "Heron sends NOTIFY at once",
            "zonemd-verify" => "Heron always checks a ZONEMD a zone carries",
            "zonemd-generate" => "set zonemd in the zone's [[dnssec-policy]] (signed zones only)",
            _ => "no Heron equivalent: check whether the behaviour matters",
        };
        self.out.untranslated(&f.loc, setting, advice);
    }

    /// A catalog Knot interprets: its first `catalog-template` becomes
    /// `[catalog.default]`, each further one `[catalog.group.ID]`, as
    /// Knot gives a member the template its `group` property names and
    /// the first one otherwise.
    fn consumer(&mut self, zone: Zone, item: &Item) -> Result<(), ImportError> {
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
        let templates = item
            .get("catalog-template")
            .map(|f| f.values.clone())
            .unwrap_or_default();
        let loc = item.get("catalog-template").map_or(&item.loc, |f| &f.loc);
        let mut seen = std::collections::HashSet::new();
        let unique = templates.iter().filter(|id| seen.insert(id.as_str()));
        for (i, id) in unique.enumerate() {
            let group = self.member_template(id, loc, &catalog.zone)?;
            if i == 0 {
                catalog.member_primaries = group.primaries;
                catalog.member_allow_transfer = group.allow_transfer;
                catalog.member_allow_notify = group.allow_notify;
                catalog.member_notify = group.notify;
            } else {
                catalog.groups.push(group);
            }
        }
        if catalog.primaries.is_empty() {
            self.out.untranslated(&item.loc, format!("zone {}: catalog-role interpret", catalog.zone), "Heron consumes catalogs it transfers from primaries; a catalog from a local file was not imported");
            return Ok(());
        }
        self.out.catalogs.push(catalog);
        Ok(())
    }

    /// A `catalog-template` as a consumed catalog's member template: its
    /// primaries, notify targets and transfer and notify ACLs (Knot takes
    /// NOTIFY only from what they allow); its other settings are
    /// listed, signing first (Heron does not sign a catalog's members).
    fn member_template(
        &mut self,
        id: &str,
        loc: &Loc,
        catalog: &str,
    ) -> Result<MemberGroup, ImportError> {
        let Some(template) = self.templates.get(id).cloned() else {
            let setting = format!("zone {catalog}: catalog-template {id}");
            let advice = "no template with this id: its members get no transfer ACL or notify \
                          targets, and the catalog's primaries";
            self.out.untranslated(loc, setting, advice);
            return Ok(MemberGroup {
                name: id.to_string(),
                ..MemberGroup::default()
            });
        };
        let primaries = self.peers(template.get("primary").or(template.get("master")));
        let notify = self.peers(template.get("notify"));
        let access = self.access(template.get("acl"))?;
        let (mut allow_transfer, dropped) =
            without_denied(access.transfer, &access.denied.transfer);
        let (allow_notify, dropped_notify) = without_denied(access.notify, &access.denied.notify);
        let dropped = dropped + dropped_notify;
        if dropped > 0 {
            let setting = format!("catalog-template {id}: acl with deny");
            self.out.untranslated(&template.loc, setting, format!("heron.toml has no deny entries: {dropped} allow entries that overlap denied addresses were left out; list the allowed addresses without them"));
        }
        if self.automatic_acl {
            allow_transfer.extend(notify.iter().map(|p| Rule {
                prefix: host_prefix(p.addr.ip()),
                key: p.key.clone(),
            }));
            allow_transfer.dedup();
        }
        self.member_template_notes(&template, id, catalog);
        Ok(MemberGroup {
            name: id.to_string(),
            primaries,
            allow_transfer,
            allow_notify,
            notify,
        })
    }

    /// The settings of a catalog's member template Heron's `[catalog]`
    /// templates do not have, each listed once.
    fn member_template_notes(&mut self, template: &Item, id: &str, catalog: &str) {
        let signing = template.get("dnssec-signing");
        if let Some(f) = signing.filter(|f| f.values.first().is_some_and(|v| on(v))) {
            let setting = format!("catalog-template {id}: dnssec-signing on");
            let advice = format!(
                "Knot signs the members of catalog {catalog} that this template applies to; \
                 Heron does not sign a consumed catalog's members (its [catalog] templates take \
                 no dnssec-policy), so as written it would serve them unsigned, and with a DS \
                 at the parent every answer from them would fail validation. Before Heron \
                 takes over, either keep Knot as their signer and give the template Knot as \
                 its primaries (Heron then serves Knot's signed copies), or take each zone out \
                 of the catalog and configure it as a [[zone]] with primaries and a \
                 dnssec-policy, importing its keys (`heron keymgr -d keys ZONE import --from \
                 knot {}`)",
                self.kasp_dir.display()
            );
            self.out.step_to_do(&f.loc, setting, advice);
        }
        let read = ["id", "master", "primary", "notify", "acl", "dnssec-signing"];
        for f in template
            .fields
            .iter()
            .filter(|f| !read.contains(&f.key.as_str()))
        {
            if !(self.template_notes).insert((f.loc.file.to_path_buf(), f.loc.line)) {
                continue;
            }
            match f.key.as_str() {
                "module" | "global-module" => {
                    for m in &f.values {
                        let setting = format!("catalog-template {id}: {} {m}", f.key);
                        self.out.untranslated(&f.loc, setting, module_advice(m));
                    }
                }
                _ => self.zone_note(f, &format!("(catalog-template {id})")),
            }
        }
    }
}

/// Knot's `nsid`: a hex string after `0x`, else text; as hex digits
/// (none for `0x` alone, which Knot takes as no NSID).
fn nsid_hex(value: &str) -> String {
    let hex = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"));
    match hex {
        Some(digits) if digits.len() % 2 == 0 && digits.bytes().all(|b| b.is_ascii_hexdigit()) => {
            digits.to_ascii_lowercase()
        }
        _ => value.bytes().map(|b| format!("{b:02x}")).collect(),
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
            "# Knot\nserver:\n    rundir: \"/run/knot\"\n    listen: [ 127.0.0.1@5353, ::1@5353 ]\n    identity: ns1\n\
             key:\n  - id: xfr.test\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
             remote:\n  - id: primary\n    address: 192.0.2.1@5300\n    key: xfr.test\n\
             \x20 - id: secondary\n    address:\n      - 192.0.2.7@5300\n      - 192.0.2.8\n\
             acl:\n  - id: transfer\n    address: [192.0.2.0/24, \"198.51.100.1-198.51.100.2\"]\n    key: xfr.test\n    action: transfer\n\
             \x20 - id: deny-one\n    address: 192.0.2.9\n    deny: on\n    action: transfer\n\
             \x20 - id: notify\n    address: 192.0.2.1\n    action: notify\n\
             mod-rrl:\n  - id: default\n    rate-limit: 50\n    slip: 2\n\
             template:\n  - id: default\n    storage: /var/lib/knot\n    file: \"%s.zone\"\n    module: mod-rrl/default\n\
             \x20   semantic-checks: on\n\
             include: zones.conf\n"
        )
    }

    const ZONES: &str = "zone:\n  - domain: example.com.\n    notify: secondary\n    acl: [transfer, deny-one]\n\
                         \x20 - domain: example.net\n    master: primary\n    acl: notify\n\
                         \x20 - domain: signed.test\n    dnssec-signing: on\n";

    /// Knot's file placeholders, as Knot 3.2 fills them in (checked with
    /// knotd: `%c[0-1]/%s` is `ab/abc.test`, `%l[1]-%l[0].zone` is
    /// `xyz-test.zone`); one Heron does not know is None.
    #[test]
    fn zone_file_placeholders_are_filled_in_as_knot_does() {
        assert_eq!(
            knot_file_name("%c[0-1]/%s", "abc.test").as_deref(),
            Some("ab/abc.test")
        );
        assert_eq!(
            knot_file_name("%l[1]-%l[0].zone", "xyz.test").as_deref(),
            Some("xyz-test.zone")
        );
        assert_eq!(knot_file_name("%c[2]%%", "abc.test").as_deref(), Some("c%"));
        for unknown in ["%x.zone", "%c[9]", "%l[5]", "%c[1", "%", "%c[a]"] {
            assert_eq!(knot_file_name(unknown, "abc.test"), None, "{unknown}");
        }
    }

    /// Key names are domain names to Knot: a remote's `key: K.` is the
    /// key `k` (Knot 3.2 transfers with it); an unknown key is an error.
    #[test]
    fn key_names_match_without_case_or_final_dot() {
        let text = "key:\n  - id: k\n    algorithm: hmac-sha256\n    secret: c2VjcmV0c2VjcmV0\n\
                    remote:\n  - id: p\n    address: 127.0.0.1@5300\n    key: K.\n\
                    zone:\n  - domain: a.test\n    master: p\n";
        let dir = tempfile::tempdir().unwrap();
        let path = write_files(dir.path(), &[("knot.conf", text)]);
        let got = parse(&path).unwrap();
        let primaries: Vec<String> = got.zones[0].primaries.iter().map(Peer::heron).collect();
        assert_eq!(primaries, ["127.0.0.1:5300 key k"]);
        let unknown = text.replace("key: K.", "key: other");
        std::fs::write(&path, unknown).unwrap();
        let err = parse(&path).unwrap_err().to_string();
        assert!(err.contains("key other is not defined"), "{err}");
    }

    /// A template's `global-module: mod-queryacl/ID` limits the queries of
    /// its zones as a zone's `module` does (black-box finding DG-2).
    #[test]
    fn a_global_query_acl_module_becomes_the_zones_allow_query() {
        let text = "mod-queryacl:\n  - id: qa\n    address: [127.0.0.1, 192.0.2.0/24]\n\
                    template:\n  - id: default\n    global-module: mod-queryacl/qa\n\
                    zone:\n  - domain: a.test\n";
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let query =
            (got.zones[0].allow_query.as_ref()).map(|r| r.iter().map(Rule::heron).collect());
        assert_eq!(
            query,
            Some(vec!["127.0.0.1".to_string(), "192.0.2.0/24".into()])
        );
        let listed = got.notes.iter().any(|n| n.setting.contains("mod-queryacl"));
        assert!(!listed, "{:?}", got.notes);
    }

    /// A deny rule holds for its own actions: denying NOTIFY from every
    /// address leaves the transfers another rule allows (black-box finding
    /// DB-8: they were dropped, "overlapping denied addresses").
    #[test]
    fn a_deny_rule_takes_away_only_its_own_actions() {
        let text = "acl:\n  - id: no-notify\n    address: 0.0.0.0/0\n    deny: on\n    action: notify\n\
                    \x20 - id: xfr\n    address: 127.0.0.1\n    action: transfer\n\
                    \x20 - id: no-xfr\n    address: 127.0.0.0/8\n    deny: on\n    action: transfer\n\
                    zone:\n  - domain: a.test\n    acl: [no-notify, xfr]\n\
                    \x20 - domain: b.test\n    acl: [no-xfr, xfr]\n";
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let transfer = |z: &Zone| z.allow_transfer.iter().map(Rule::heron).collect::<Vec<_>>();
        assert_eq!(transfer(&got.zones[0]), ["127.0.0.1"]);
        assert!(transfer(&got.zones[1]).is_empty(), "denied for transfers");
        let said = (got.notes.iter()).filter(|n| n.setting.contains("acl with deny"));
        let said: Vec<&str> = said.map(|n| n.setting.as_str()).collect();
        assert_eq!(said, ["zone b.test: acl with deny"]);
    }

    /// A zone using `mod-queryacl` with an `address` list answers only
    /// those addresses: written as its allow-query (black-box finding
    /// DB-4: the zone answered everyone). One that also limits by
    /// `interface` is listed instead.
    #[test]
    fn a_query_acl_module_becomes_the_zones_allow_query() {
        let text = "mod-queryacl:\n  - id: qa\n    address: [127.0.0.0/8, 192.0.2.1-192.0.2.2]\n\
                    \x20 - id: iface\n    address: 10.0.0.0/8\n    interface: 192.0.2.53\n\
                    zone:\n  - domain: a.test\n    module: mod-queryacl/qa\n\
                    \x20 - domain: b.test\n    module: mod-queryacl/iface\n\
                    \x20 - domain: c.test\n";
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let query = |z: &Zone| {
            z.allow_query
                .as_ref()
                .map(|r| r.iter().map(Rule::heron).collect())
        };
        let acls: Vec<Option<Vec<String>>> = got.zones.iter().map(query).collect();
        let a = ["127.0.0.0/8", "192.0.2.1", "192.0.2.2"]
            .map(String::from)
            .to_vec();
        assert_eq!(acls, [Some(a), None, None]);
        let listed = (got.notes.iter()).filter(|n| n.setting.contains("mod-queryacl"));
        let listed: Vec<&str> = listed.map(|n| n.setting.as_str()).collect();
        assert_eq!(listed, ["module mod-queryacl/iface"]);
    }

    /// A relative `storage` is said once (knotd reads it from its working
    /// folder, heron.toml from its own), with the zones written relative;
    /// an absolute one is not said (black-box finding BT-5).
    #[test]
    fn a_relative_storage_is_said_once() {
        let text = "template:\n  - id: default\n    storage: zones\n    file: \"%s.zone\"\n\
                    \x20 - id: abs\n    storage: /srv/zones\n\
                    zone:\n  - domain: a.test\n  - domain: b.test\n  - domain: c.test\n    template: abs\n";
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let files: Vec<String> = got
            .zones
            .iter()
            .map(|z| z.file.as_ref().unwrap().display().to_string())
            .collect();
        assert_eq!(
            files,
            [
                "zones/a.test.zone",
                "zones/b.test.zone",
                "/srv/zones/c.test.zone"
            ]
        );
        let said: Vec<&str> = (got.notes.iter())
            .filter(|n| n.setting.starts_with("storage"))
            .map(|n| n.setting.as_str())
            .collect();
        assert_eq!(said, ["storage: zones"]);
    }

    /// Knot's update ACLs become `allow-update` rules: who (key, address),
    /// which names (`update-owner`, its match and names) and which types
    /// (black-box finding BT-4: they were listed, to write by hand, and
    /// `update-type` called "no Heron equivalent"). What Heron's rules
    /// cannot say, and a secondary's, are listed.
    #[test]
    fn update_acls_become_allow_update_rules() {
        let text = format!(
            "key:\n  - id: tkey\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
             remote:\n  - id: prim\n    address: 192.0.2.1@53\n\
             acl:\n  - id: upd\n    key: tkey\n    action: update\n    update-type: [A, TXT]\n\
             \x20 - id: hosts\n    address: 192.0.2.0/24\n    action: update\n\
             \x20   update-owner: name\n    update-owner-name: [hosts, www.example.]\n\
             \x20 - id: own\n    key: tkey\n    action: update\n    update-owner: key\n\
             \x20 - id: odd\n    key: tkey\n    action: update\n    update-owner: zone\n\
             \x20   update-owner-match: pattern\n\
             zone:\n  - domain: a.test\n    acl: [upd, hosts, own]\n\
             \x20 - domain: b.test\n    acl: odd\n\
             \x20 - domain: s.test\n    master: prim\n    acl: upd\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", &text)])).unwrap();
        let zone = |origin: &str| got.zones.iter().find(|z| z.origin == origin).unwrap();
        assert_eq!(
            zone("a.test").allow_update,
            [
                "key tkey zonesub A TXT",
                "192.0.2.0/24 subdomain hosts.{zone} ANY",
                "192.0.2.0/24 subdomain www.example ANY",
                "key tkey selfsub ANY",
            ]
        );
        assert!(zone("b.test").allow_update.is_empty());
        assert!(zone("s.test").allow_update.is_empty());
        let said: Vec<String> = got
            .notes
            .iter()
            .map(|n| format!("{}: {}", n.setting, n.advice))
            .collect();
        assert!(
            said.iter().any(|n| n.contains(
                "acl odd: action update: update-owner zone with update-owner-match pattern"
            )),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|n| n.contains("zone s.test: acl action update: a secondary")),
            "{said:?}"
        );
        assert!(!said.iter().any(|n| n.contains("update-type")), "{said:?}");
        let written = super::super::writer::write_toml(&got, "");
        assert!(
            written.contains("allow-update = [\"key tkey zonesub A TXT\", "),
            "{written}"
        );
        // Mutated, the same text never panics the importer.
        let mut rng = Rng::new(11);
        let path = dir.path().join("mutated.conf");
        for _ in 0..1000 {
            std::fs::write(&path, mutate(&text, &mut rng)).unwrap();
            let _ = parse(&path);
        }
    }

    /// Knot's `xdp:` listen entries become `[xdp] listen`; an address
    /// (Knot finds its interface) and TCP over XDP are said not to be
    /// (black-box finding BJ-11: the whole section was dropped).
    #[test]
    fn xdp_interfaces_are_taken_and_addresses_said() {
        let text = "server:\n  listen: 127.0.0.1@53\n\
                    xdp:\n  listen: [ eth1@5300, eth2, 192.0.2.1@53 ]\n  udp: on\n  tcp: on\n";
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        assert_eq!(got.xdp_listen, ["eth1@5300", "eth2@53"]);
        let said: Vec<&str> = got.notes.iter().map(|n| n.setting.as_str()).collect();
        assert!(said.contains(&"xdp: listen 192.0.2.1@53"), "{said:?}");
        assert!(said.contains(&"xdp: tcp on"), "{said:?}");
        assert!(!said.iter().any(|s| s.starts_with("xdp: udp")), "{said:?}");
        let written = super::super::writer::write_toml(&got, "");
        assert!(
            written.contains("[xdp]\nlisten = [\"eth1@5300\", \"eth2@53\"]"),
            "{written}"
        );
        // Knot's `udp: off` (black-box finding BK-5): no [xdp] at all.
        let off = text.replace("udp: on", "udp: off");
        let got = parse(&write_files(dir.path(), &[("knot.conf", &off)])).unwrap();
        assert!(got.xdp_listen.is_empty());
        let said: Vec<&str> = got.notes.iter().map(|n| n.setting.as_str()).collect();
        assert!(
            said.iter().any(|s| s.starts_with("xdp: listen eth1@5300")),
            "{said:?}"
        );
    }

    #[test]
    fn nsid_is_read_as_hex_after_0x_and_as_text_otherwise() {
        assert_eq!(nsid_hex("0x6e7331"), "6e7331");
        assert_eq!(nsid_hex("0X6E7331"), "6e7331");
        assert_eq!(nsid_hex("ns1"), "6e7331");
        assert_eq!(nsid_hex("0xnot"), "30786e6f74", "not hex: text");
        assert_eq!(nsid_hex("0x"), "", "no digits: no NSID, as Knot");
        let dir = tempfile::tempdir().unwrap();
        let text = "server:\n  listen: 127.0.0.1@53\n  nsid: 0x6e7331\n  version: \"\"\n";
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        assert_eq!(got.nsid_hex.as_deref(), Some("6e7331"));
        assert_eq!(got.version, None, "empty: no answer, as unset in Heron");
        let text = "server:\n  listen: 127.0.0.1@53\n  nsid: \"\"\n";
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        assert_eq!(got.nsid_hex, None, "empty: no NSID");
    }

    #[test]
    fn servers_keys_remotes_acls_templates_and_zones_are_translated() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_files(dir.path(), &[("knot.conf", &conf()), ("zones.conf", ZONES)]);
        let got = parse(&path).unwrap();
        assert_eq!(
            got.listen,
            [
                "127.0.0.1:5353".parse::<SocketAddr>().unwrap(),
                "[::1]:5353".parse().unwrap()
            ]
        );
        assert_eq!(got.identity.as_deref(), Some("ns1"));
        // Knot's own version answer, unset here, is listed; the identity set is not.
        let listed = |needle: &str| got.notes.iter().any(|n| n.setting.contains(needle));
        assert!(listed("server: version (Knot's default"), "{:?}", got.notes);
        assert!(!listed("server: identity"), "{:?}", got.notes);
        assert_eq!(got.rrl.as_ref().unwrap().responses_per_second, Some(50));
        let com = &got.zones[0];
        assert_eq!(
            com.file.as_deref(),
            Some(Path::new("/var/lib/knot/example.com.zone"))
        );
        let acl: Vec<String> = com.allow_transfer.iter().map(Rule::heron).collect();
        assert_eq!(
            acl,
            ["198.51.100.1 key xfr.test", "198.51.100.2 key xfr.test"]
        );
        let notify: Vec<String> = com.notify.iter().map(Peer::heron).collect();
        assert_eq!(notify, ["192.0.2.7:5300", "192.0.2.8"]);
        let net = &got.zones[1];
        assert_eq!(net.primaries[0].heron(), "192.0.2.1:5300 key xfr.test");
        assert_eq!(net.allow_notify[0].heron(), "192.0.2.1");
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("deny") && n.kind == NoteKind::Untranslated)
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("dnssec-signing") && n.loc.line == 9)
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("semantic-checks") && n.kind == NoteKind::NotNeeded)
        );
        assert!(got.notes.iter().all(|n| !n.setting.contains(SECRET)));
    }

    #[test]
    fn catalog_roles_become_catalogs() {
        let dir = tempfile::tempdir().unwrap();
        let text = "remote:\n  - id: p\n    address: 192.0.2.1\n\
                    template:\n  - id: members\n    master: p\n\
                    zone:\n  - domain: cat.test\n    master: p\n    notify: p\n    catalog-role: interpret\n    catalog-template: members\n\
                    \x20 - domain: gen.test\n    catalog-role: generate\n\
                    \x20 - domain: m.test\n    catalog-role: member\n    catalog-zone: gen.test\n    catalog-group: gold\n";
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        assert_eq!(got.catalogs[0].zone, "cat.test");
        assert_eq!(got.catalogs[0].member_primaries[0].heron(), "192.0.2.1");
        // The catalog's own NOTIFY targets (black-box finding BF-4).
        assert_eq!(got.catalogs[0].notify[0].heron(), "192.0.2.1");
        assert!(got.zones[0].catalog_generate);
        assert_eq!(got.zones[1].catalog_member.as_deref(), Some("gen.test"));
        assert_eq!(got.zones[1].catalog_group.as_deref(), Some("gold"));
    }

    /// The notes of `text` read as knot.conf: (kind, setting, advice).
    fn notes_of(text: &str) -> (Imported, Vec<(NoteKind, String, String)>) {
        let dir = tempfile::tempdir().unwrap();
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let notes = (got.notes.iter())
            .map(|n| (n.kind, n.setting.clone(), n.advice.clone()))
            .collect();
        (got, notes)
    }

    /// A catalog template that signs (black-box finding AQ-3: its members
    /// were served unsigned without a line) is a step to do, and the
    /// template's other settings are listed, not dropped.
    #[test]
    fn a_signing_catalog_template_is_a_step_to_do() {
        let text = "remote:\n  - id: p\n    address: 192.0.2.1\n\
                    template:\n  - id: members\n    master: p\n    dnssec-signing: on\n    \
                    dnssec-policy: pol\n    answer-rotation: on\n\
                    policy:\n  - id: pol\n\
                    zone:\n  - domain: cat.test\n    master: p\n    catalog-role: interpret\n    \
                    catalog-template: members\n";
        let (got, notes) = notes_of(text);
        assert_eq!(got.catalogs.len(), 1);
        let step = notes.iter().find(|(kind, setting, _)| {
            *kind == NoteKind::ToDo && setting == "catalog-template members: dnssec-signing on"
        });
        let (_, _, advice) = step.unwrap_or_else(|| panic!("{notes:#?}"));
        assert!(
            advice.contains("unsigned") && advice.contains("cat.test"),
            "{advice}"
        );
        assert!(
            notes
                .iter()
                .any(|(kind, setting, _)| *kind == NoteKind::Untranslated
                    && setting.contains("(catalog-template members): answer-rotation")),
            "{notes:#?}"
        );
    }

    /// Knot gives a member the template its `group` names, the first one
    /// otherwise (black-box finding AQ-11: every member got the first):
    /// each further template is the group of its id, with its own
    /// primaries and transfer ACL.
    #[test]
    fn each_further_catalog_template_becomes_its_group() {
        let text = "remote:\n  - id: up\n    address: 192.0.2.1\n  - id: gp\n    address: 192.0.2.7\n\
                    acl:\n  - id: x1\n    address: 127.0.0.1\n    action: transfer\n\
                    \x20 - id: x2\n    address: 127.0.0.2\n    action: transfer\n\
                    \x20 - id: n2\n    address: 192.0.2.7\n    action: notify\n\
                    template:\n  - id: silver\n    master: up\n    acl: x1\n\
                    \x20 - id: gold\n    master: gp\n    acl: [x2, n2]\n\
                    zone:\n  - domain: cat.test\n    master: up\n    catalog-role: interpret\n    \
                    catalog-template: [silver, gold, silver]\n";
        let (got, notes) = notes_of(text);
        let catalog = &got.catalogs[0];
        let heron = |rules: &[Rule]| rules.iter().map(Rule::heron).collect::<Vec<_>>();
        assert_eq!(catalog.member_primaries[0].heron(), "192.0.2.1");
        assert_eq!(heron(&catalog.member_allow_transfer), ["127.0.0.1"]);
        assert_eq!(catalog.groups.len(), 1, "{:?}", catalog.groups);
        let gold = &catalog.groups[0];
        assert_eq!(gold.name, "gold");
        assert_eq!(gold.primaries[0].heron(), "192.0.2.7");
        assert_eq!(heron(&gold.allow_transfer), ["127.0.0.2"]);
        assert_eq!(heron(&gold.allow_notify), ["192.0.2.7"]);
        assert!(catalog.member_allow_notify.is_empty());
        assert!(
            !notes
                .iter()
                .any(|(_, s, _)| s.contains("several templates")),
            "{notes:#?}"
        );
        let toml = super::super::writer::write_toml(&got, "test");
        assert!(
            toml.contains("[catalog.group.gold]\nprimaries = [\"192.0.2.7\"]\nallow-transfer = [\"127.0.0.2\"]\nallow-notify = [\"192.0.2.7\"]\n"),
            "{toml}"
        );
    }

    /// A primary zone Knot never writes back (`zonefile-sync: -1`) has
    /// changes in Knot's journal only (black-box finding AQ-6): flushing
    /// them is a step to do; for a secondary it is not needed.
    #[test]
    fn a_primary_zone_knot_does_not_write_back_must_be_flushed() {
        let text = "remote:\n  - id: p\n    address: 192.0.2.1\n\
                    template:\n  - id: t\n    zonefile-sync: -1\n\
                    zone:\n  - domain: a.test\n    zonefile-sync: -1\n\
                    \x20 - domain: b.test\n    template: t\n\
                    \x20 - domain: s.test\n    master: p\n    zonefile-sync: -1\n";
        let (_, notes) = notes_of(text);
        let said = |kind: NoteKind, setting: &str| {
            let found = notes.iter().find(|(k, s, _)| *k == kind && s == setting);
            found.map(|(_, _, advice)| advice.clone())
        };
        let a = said(NoteKind::ToDo, "zone a.test: zonefile-sync -1");
        assert!(
            a.is_some_and(|a| a.contains("`knotc zone-flush a.test`")),
            "{notes:#?}"
        );
        let b = said(NoteKind::ToDo, "zone (template): zonefile-sync -1");
        assert!(
            b.is_some_and(|b| b.contains("`knotc zone-flush`")),
            "{notes:#?}"
        );
        assert!(
            said(NoteKind::NotNeeded, "zone s.test: zonefile-sync -1").is_some(),
            "{notes:#?}"
        );
        assert!(said(NoteKind::NotNeeded, "zone a.test: zonefile-sync -1").is_none());
    }

    /// A zone whose served serial Knot makes (black-box finding AQ-10)
    /// gets the step that raises the file's; one with Knot's default
    /// (`increment`, the file's serial) does not.
    #[test]
    fn a_zone_whose_serial_knot_makes_gets_the_serial_step() {
        let text = "zone:\n  - domain: a.test\n    zonefile-load: difference-no-serial\n\
                    \x20   serial-policy: unixtime\n\
                    \x20 - domain: b.test\n    serial-policy: dateserial\n\
                    \x20 - domain: c.test\n    serial-policy: increment\n";
        let (_, notes) = notes_of(text);
        let step = |origin: &str| {
            let found = notes.iter().find(|(k, s, _)| {
                *k == NoteKind::ToDo
                    && s.starts_with(&format!("zone {origin}:"))
                    && s.ends_with("(serial)")
            });
            found.map(|(_, s, advice)| format!("{s}: {advice}"))
        };
        let a = step("a.test").unwrap_or_else(|| panic!("{notes:#?}"));
        assert!(a.contains("zonefile-load difference-no-serial"), "{a}");
        assert!(
            a.contains("dig @KNOT a.test SOA") && a.contains("each edit"),
            "{a}"
        );
        let b = step("b.test").unwrap_or_else(|| panic!("{notes:#?}"));
        assert!(b.contains("dig @KNOT b.test SOA"), "{b}");
        assert_eq!(step("c.test"), None, "{notes:#?}");
        assert!(
            !notes
                .iter()
                .any(|(k, s, _)| *k == NoteKind::NotNeeded && s.contains("difference-no-serial")),
            "{notes:#?}"
        );
    }

    /// Knot's documented whole-server rate limit, `global-module` in the
    /// default template, becomes [rrl], with no line saying it was not.
    #[test]
    fn a_global_rrl_module_becomes_rrl() {
        let dir = tempfile::tempdir().unwrap();
        let text = "mod-rrl:\n  - id: rrl1\n    rate-limit: 20\n    slip: 3\n\
                    template:\n  - id: default\n    storage: /var/lib/knot\n    global-module: mod-rrl/rrl1\n\
                    zone:\n  - domain: a.test\n  - domain: b.test\n";
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let rrl = got.rrl.expect("[rrl] written");
        assert_eq!((rrl.responses_per_second, rrl.slip), (Some(20), Some(3)));
        // DL-2: without `slip`, Knot's default (1), not Heron's (2).
        let text = text.replace("    slip: 3\n", "");
        let got = parse(&write_files(dir.path(), &[("knot.conf", &text)])).unwrap();
        assert_eq!(got.rrl.expect("[rrl] written").slip, Some(1));
        let said: Vec<&str> = got.notes.iter().map(|n| n.setting.as_str()).collect();
        assert!(
            !said.iter().any(|s| s.contains("global-module")),
            "{said:?}"
        );
    }

    #[test]
    fn malformed_configurations_are_errors_with_their_line() {
        let cases: &[(&str, u32, &str)] = &[
            ("server:\n  listen: [127.0.0.1\n", 2, "not closed"),
            ("server:\n  identity: \"open\n", 2, "not closed"),
            ("  listen: x\n", 1, "before any section"),
            ("server:\n\tlisten: x\n", 2, "tab"),
            ("server: x\n", 1, "takes no value"),
            ("server:\n  just words\n", 2, "expected `key: value`"),
            ("include: missing.conf\n", 1, "cannot read"),
            ("\ninclude: knot.conf\n", 2, "include loop"),
            ("key:\n  - id: k\n", 2, "no secret"),
            // A malformed secret line is an error that does not show it.
            (
                "key:\n  - id: k\n    secret:c2VjcmV0c2VjcmV0\n",
                3,
                "found 'secret: (not shown)'",
            ),
            (
                "remote:\n  - id: r\n    address: 192.0.2.1\n    key: nokey\n",
                4,
                "not defined",
            ),
            (
                "acl:\n  - id: a\n    address: 192.0.2.300\n    action: transfer\nzone:\n  - domain: a\n    acl: a\n",
                2,
                "not an address",
            ),
        ];
        for (text, line, needle) in cases {
            let dir = tempfile::tempdir().unwrap();
            let err = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap_err();
            assert_eq!(
                err.loc.as_ref().map(|l| l.line),
                Some(*line),
                "{text:?}: {err}"
            );
            assert!(err.message.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn listen_tls_becomes_a_dot_listener_and_tls_remotes_use_port_853() {
        let dir = tempfile::tempdir().unwrap();
        let text = "server:\n  listen: 192.0.2.53\n  listen-tls: [192.0.2.53, \"2001:db8::53@8853\"]\n\
                    \x20 cert-file: /etc/knot/c.pem\n  key-file: /etc/knot/k.pem\n\
                    remote:\n  - id: p\n    address: 192.0.2.1\n    tls: on\n\
                    zone:\n  - domain: s.test\n    master: p\n";
        let got = parse(&write_files(dir.path(), &[("knot.conf", text)])).unwrap();
        let tls = got.tls.unwrap();
        assert_eq!(
            tls.listen,
            [
                "192.0.2.53:853".parse::<SocketAddr>().unwrap(),
                "[2001:db8::53]:8853".parse().unwrap()
            ]
        );
        assert_eq!(tls.key, Path::new("/etc/knot/k.pem"));
        assert_eq!(got.zones[0].primaries[0].heron(), "192.0.2.1:853 tls");
    }

    #[test]
    fn mutated_configurations_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path(), &[("zones.conf", ZONES)]);
        let mut rng = Rng::new(3);
        let path = dir.path().join("knot.conf");
        let text = conf() + ZONES;
        for _ in 0..2000 {
            std::fs::write(&path, mutate(&text, &mut rng)).unwrap();
            let _ = parse(&path);
        }
    }

    #[test]
    fn a_large_configuration_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("server:\n  listen: 127.0.0.1\nzone:\n");
        for i in 0..50_000 {
            text.push_str(&format!("  - domain: z{i}.test\n"));
        }
        let got = parse(&write_files(dir.path(), &[("knot.conf", &text)])).unwrap();
        assert_eq!(got.zones.len(), 50_000);
    }
}
