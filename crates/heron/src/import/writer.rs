//! The one writer of heron.toml: whatever the source, an [`Imported`]
//! becomes the same sections in the same order.

use std::fmt::Write;
use std::path::Path;

use super::model::{CatalogConsumer, Imported, Peer, Rrl, Rule, Zone};

/// Where secondary zones, catalogs consumed and catalogs generated keep
/// their copies, relative to the written file: never the old server's
/// files, which it may still write.
pub const SECONDARY_DIR: &str = "secondary";

/// heron.toml's text for `config`; `header` goes first as comments.
pub fn write_toml(config: &Imported, header: &str) -> String {
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "# {line}");
    }
    server(&mut out, config);
    if let Some(rrl) = &config.rrl {
        rrl_section(&mut out, rrl);
    }
    if let Some(tls) = &config.tls {
        out.push_str("\n[tls]\n");
        list(&mut out, "listen", tls.listen.iter().map(|a| a.to_string()));
        string(&mut out, "certificate", &tls.certificate.to_string_lossy());
        string(&mut out, "key", &tls.key.to_string_lossy());
    }
    if !config.xdp_listen.is_empty() {
        out.push_str("\n[xdp]\n");
        list(&mut out, "listen", config.xdp_listen.iter().cloned());
    }
    if let Some(ca) = &config.tls_ca {
        out.push_str("\n[secondary]\n");
        string(&mut out, "tls-ca", &ca.to_string_lossy());
    }
    for key in &config.keys {
        out.push_str("\n[[key]]\n");
        string(&mut out, "name", &key.name);
        string(&mut out, "algorithm", &key.algorithm);
        string(&mut out, "secret", &key.secret);
    }
    for policy in &config.policies {
        out.push_str("\n[[dnssec-policy]]\n");
        string(&mut out, "name", &policy.name);
        for (key, value) in &policy.settings {
            let _ = writeln!(out, "{key} = {value}");
        }
    }
    let (singles, groups) = grouped(&config.zones);
    for zone in singles {
        zone_table(&mut out, zone);
    }
    for (pattern, zones) in groups {
        group_table(&mut out, &pattern, &zones);
    }
    for catalog in &config.catalogs {
        catalog_table(&mut out, catalog);
    }
    out
}

fn server(out: &mut String, config: &Imported) {
    out.push_str("\n[server]\n");
    list(out, "listen", config.listen.iter().map(|a| a.to_string()));
    if let Some(v) = &config.version {
        string(out, "version", v);
    }
    if let Some(v) = &config.identity {
        string(out, "identity", v);
    }
    if let Some(v) = &config.nsid_hex {
        string(out, "nsid-hex", v);
    }
    if let Some(rules) = &config.allow_query {
        list(out, "allow-query", rules.iter().map(Rule::heron));
    }
    if !config.blackhole.is_empty() {
        list(
            out,
            "blackhole",
            config.blackhole.iter().map(|p| p.to_string()),
        );
    }
}

fn rrl_section(out: &mut String, rrl: &Rrl) {
    out.push_str("\n[rrl]\n");
    let numbers = [
        (
            "responses-per-second",
            rrl.responses_per_second.map(u64::from),
        ),
        (
            "nxdomains-per-second",
            rrl.nxdomains_per_second.map(u64::from),
        ),
        ("errors-per-second", rrl.errors_per_second.map(u64::from)),
        ("window", rrl.window.map(u64::from)),
        ("slip", rrl.slip.map(u64::from)),
        ("ipv4-prefix-length", rrl.ipv4_prefix_length.map(u64::from)),
        ("ipv6-prefix-length", rrl.ipv6_prefix_length.map(u64::from)),
        ("table-size", rrl.table_size.map(|t| t as u64)),
    ];
    for (name, value) in numbers {
        if let Some(value) = value {
            let _ = writeln!(out, "{name} = {value}");
        }
    }
    if !rrl.exempt.is_empty() {
        list(out, "exempt", rrl.exempt.iter().map(|p| p.to_string()));
    }
    if rrl.log_only {
        out.push_str("log-only = true\n");
    }
}

fn zone_table(out: &mut String, zone: &Zone) {
    out.push_str("\n[[zone]]\n");
    string(out, "origin", &zone.origin);
    match &zone.file {
        Some(file) => string(out, "file", &file.to_string_lossy()),
        None => string(
            out,
            "file",
            &format!("{SECONDARY_DIR}/{}.zone", file_stem(&zone.origin)),
        ),
    }
    if zone.catalog_generate {
        string(out, "catalog", "generate");
    }
    zone_settings(out, zone);
}

/// Zones that share every setting and whose files differ only by their
/// name, as `[[zone-group]]`s (heron.toml reads them about five times
/// faster than a `[[zone]]` each); the rest one by one, in order.
fn grouped(zones: &[Zone]) -> (Vec<&Zone>, Vec<(String, Vec<&Zone>)>) {
    let mut groups: Vec<(String, String, Vec<&Zone>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut singles = Vec::new();
    for zone in zones {
        let Some(pattern) = file_pattern(zone) else {
            singles.push(zone);
            continue;
        };
        let shared = format!(
            "{pattern}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{:?}|{:?}",
            zone.primaries,
            zone.allow_transfer,
            zone.allow_notify,
            zone.allow_query,
            zone.allow_update,
            zone.notify,
            zone.journal_off,
            zone.catalog_member,
            zone.catalog_group,
            zone.dnssec_policy
        );
        match index.get(&shared) {
            Some(&i) => groups[i].2.push(zone),
            None => {
                index.insert(shared.clone(), groups.len());
                groups.push((shared, pattern, vec![zone]));
            }
        }
    }
    let mut out = Vec::new();
    for (_, pattern, members) in groups {
        if members.len() >= GROUP_AT_LEAST {
            out.push((pattern, members));
        } else {
            singles.extend(members);
        }
    }
    (singles, out)
}

/// Zones alike enough to be worth a `[[zone-group]]`.
const GROUP_AT_LEAST: usize = 3;

/// The zone's file with its origin as `{zone}`, when the origin is in
/// the file's name once and short enough that Heron keeps the name as
/// it is (a group's names past 237 octets are shortened with a hash).
fn file_pattern(zone: &Zone) -> Option<String> {
    if zone.catalog_generate || zone.origin == "." || zone.origin.len() > 180 {
        return None;
    }
    let file = match &zone.file {
        Some(file) => file.to_str()?.to_string(),
        None if file_stem(&zone.origin) == zone.origin => {
            format!("{SECONDARY_DIR}/{}.zone", zone.origin)
        }
        None => return None,
    };
    let name = std::path::Path::new(&file).file_name()?.to_str()?;
    if name.matches(zone.origin.as_str()).count() != 1 || file.contains('{') || file.contains('}') {
        return None;
    }
    let at = file.len() - name.len();
    Some(format!(
        "{}{}",
        &file[..at],
        name.replacen(zone.origin.as_str(), "{zone}", 1)
    ))
}

/// The settings a `[[zone]]` and a `[[zone-group]]` write alike.
fn zone_settings(out: &mut String, zone: &Zone) {
    peers(out, "primaries", &zone.primaries);
    rules_list(out, "allow-transfer", &zone.allow_transfer);
    rules_list(out, "allow-notify", &zone.allow_notify);
    if let Some(rules) = &zone.allow_query {
        list(out, "allow-query", rules.iter().map(Rule::heron));
    }
    if !zone.allow_update.is_empty() {
        list(out, "allow-update", zone.allow_update.iter().cloned());
    }
    peers(out, "notify", &zone.notify);
    if zone.journal_off {
        out.push_str("journal = false\n");
    }
    if let Some(catalog) = &zone.catalog_member {
        string(out, "catalog-member", catalog);
    }
    if let Some(group) = &zone.catalog_group {
        string(out, "catalog-group", group);
    }
    if let Some(policy) = &zone.dnssec_policy {
        string(out, "dnssec-policy", policy);
    }
}

fn group_table(out: &mut String, pattern: &str, zones: &[&Zone]) {
    let zone = zones[0];
    out.push_str("\n[[zone-group]]\n");
    string(out, "file", pattern);
    zone_settings(out, zone);
    list(out, "origins", zones.iter().map(|z| z.origin.clone()));
}

fn catalog_table(out: &mut String, catalog: &CatalogConsumer) {
    let stem = file_stem(&catalog.zone);
    out.push_str("\n[[catalog]]\n");
    string(out, "zone", &catalog.zone);
    string(out, "file", &format!("{SECONDARY_DIR}/{stem}.zone"));
    peers(out, "primaries", &catalog.primaries);
    rules_list(out, "allow-transfer", &catalog.allow_transfer);
    peers(out, "notify", &catalog.notify);
    string(
        out,
        "members-dir",
        &format!("{SECONDARY_DIR}/{stem}.members"),
    );
    out.push_str("\n[catalog.default]\n");
    peers(out, "primaries", &catalog.member_primaries);
    rules_list(out, "allow-transfer", &catalog.member_allow_transfer);
    rules_list(out, "allow-notify", &catalog.member_allow_notify);
    peers(out, "notify", &catalog.member_notify);
    for group in &catalog.groups {
        let _ = writeln!(out, "\n[catalog.group.{}]", table_key(&group.name));
        peers(out, "primaries", &group.primaries);
        rules_list(out, "allow-transfer", &group.allow_transfer);
        rules_list(out, "allow-notify", &group.allow_notify);
        peers(out, "notify", &group.notify);
    }
}

/// A TOML table key: bare when it may be, else quoted.
fn table_key(name: &str) -> String {
    let bare = !name.is_empty()
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    match bare {
        true => name.to_string(),
        false => quote(name),
    }
}

/// A file name for a zone's kept copy: its name without the final dot,
/// `root` for the root, and anything but letters, digits, `-`, `_` and
/// `.` as `%XX`.
pub fn file_stem(origin: &str) -> String {
    let name = origin.trim_end_matches('.');
    if name.is_empty() {
        return "root".into();
    }
    let mut stem = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && !stem.is_empty()) {
            stem.push(b.to_ascii_lowercase() as char);
        } else {
            let _ = write!(stem, "%{b:02X}");
        }
    }
    stem
}

fn peers(out: &mut String, name: &str, peers: &[Peer]) {
    if !peers.is_empty() {
        list(out, name, peers.iter().map(Peer::heron));
    }
}

/// An access list; an empty one is left out (Heron's default for each
/// is nobody, or for `allow-notify` a secondary's primaries).
fn rules_list(out: &mut String, name: &str, rules: &[Rule]) {
    if !rules.is_empty() {
        list(out, name, rules.iter().map(Rule::heron));
    }
}

fn list(out: &mut String, name: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.map(|i| quote(&i)).collect();
    let _ = writeln!(out, "{name} = [{}]", items.join(", "));
}

fn string(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "{name} = {}", quote(value));
}

/// A TOML basic string.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes `text` to `path`: new files only unless `force`, readable by
/// the owner alone when it holds TSIG secrets. A file replaced (`force`)
/// keeps its group and mode, less any access for others when it holds
/// secrets: an operator who gave it to the server's group (`chmod 640`)
/// keeps a file the server can read (black-box finding DB-5: it was set
/// to 0600 again).
pub fn write_file(path: &Path, text: &str, secret: bool, force: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(if secret { 0o600 } else { 0o644 });
    let replaced = match force {
        true => std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777),
        false => None,
    };
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path)?;
    let mode = match (replaced, secret) {
        (Some(mode), true) => Some(mode & !0o007),
        (None, true) => Some(0o600),
        (_, false) => None,
    };
    if let Some(mode) = mode {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file replaced with `--force` keeps the mode the operator gave it
    /// (for the server's group), less access for others when it holds
    /// secrets; a new one holding secrets is the owner's alone.
    #[test]
    fn a_replaced_file_keeps_its_mode_less_others_when_it_holds_secrets() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("heron.toml");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        write_file(&path, "a = 1\n", true, false).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(
            write_file(&path, "a = 2\n", true, false).is_err(),
            "not without force"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&path, "a = 3\n", true, true).unwrap();
        assert_eq!(mode(&path), 0o640);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 3\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&path, "a = 4\n", true, true).unwrap();
        assert_eq!(mode(&path), 0o640, "no secret readable by others");
        write_file(&path, "a = 5\n", false, true).unwrap();
        assert_eq!(mode(&path), 0o640, "kept");
    }

    #[test]
    fn strings_are_quoted_so_that_toml_reads_them_back() {
        for text in ["plain", "a\"b", "back\\slash", "tab\there", "\u{1}", "ünï"] {
            let doc = format!("v = {}", quote(text));
            let table: toml::Table = toml::from_str(&doc).unwrap();
            assert_eq!(table["v"].as_str(), Some(text));
        }
    }

    #[test]
    fn zones_alike_become_a_group_and_the_rest_stay_single() {
        let zone = |origin: &str, file: Option<&str>| Zone {
            origin: origin.into(),
            file: file.map(std::path::PathBuf::from),
            ..Zone::default()
        };
        let zones = [
            zone("a.test", Some("/z/a.test.zone")),
            zone("b.test", Some("/z/b.test.zone")),
            zone("c.test", Some("/z/c.test.zone")),
            zone("d.test", Some("/y/db.d.test")),
            zone("e.test", None),
            zone("x.test", Some("/z/x.test.x.test")),
        ];
        let (singles, groups) = grouped(&zones);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].0, "/z/{zone}.zone");
        let origins: Vec<&str> = groups[0].1.iter().map(|z| z.origin.as_str()).collect();
        assert_eq!(origins, ["a.test", "b.test", "c.test"]);
        let single: Vec<&str> = singles.iter().map(|z| z.origin.as_str()).collect();
        assert_eq!(single, ["x.test", "d.test", "e.test"]);
    }

    #[test]
    fn kept_copies_get_safe_file_names() {
        assert_eq!(file_stem("."), "root");
        assert_eq!(file_stem("Example.COM."), "example.com");
        assert_eq!(file_stem("a/b"), "a%2Fb");
        assert_eq!(file_stem(".."), "root");
    }
}
