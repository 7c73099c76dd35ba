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
    for zone in &config.zones {
        zone_table(&mut out, zone);
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
    peers(out, "primaries", &zone.primaries);
    rules_list(out, "allow-transfer", &zone.allow_transfer);
    rules_list(out, "allow-notify", &zone.allow_notify);
    if let Some(rules) = &zone.allow_query {
        list(out, "allow-query", rules.iter().map(Rule::heron));
    }
    peers(out, "notify", &zone.notify);
    if zone.journal_off && !zone.allow_transfer.is_empty() {
        out.push_str("journal = false\n");
    }
    if let Some(catalog) = &zone.catalog_member {
        string(out, "catalog-member", catalog);
    }
    if let Some(group) = &zone.catalog_group {
        string(out, "catalog-group", group);
    }
}

fn catalog_table(out: &mut String, catalog: &CatalogConsumer) {
    let stem = file_stem(&catalog.zone);
    out.push_str("\n[[catalog]]\n");
    string(out, "zone", &catalog.zone);
    string(out, "file", &format!("{SECONDARY_DIR}/{stem}.zone"));
    peers(out, "primaries", &catalog.primaries);
    rules_list(out, "allow-transfer", &catalog.allow_transfer);
    string(
        out,
        "members-dir",
        &format!("{SECONDARY_DIR}/{stem}.members"),
    );
    out.push_str("\n[catalog.default]\n");
    peers(out, "primaries", &catalog.member_primaries);
    rules_list(out, "allow-transfer", &catalog.member_allow_transfer);
    peers(out, "notify", &catalog.member_notify);
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
/// the owner alone when it holds TSIG secrets.
pub fn write_file(path: &Path, text: &str, secret: bool, force: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(if secret { 0o600 } else { 0o644 });
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path)?;
    if secret {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_so_that_toml_reads_them_back() {
        for text in ["plain", "a\"b", "back\\slash", "tab\there", "\u{1}", "ünï"] {
            let doc = format!("v = {}", quote(text));
            let table: toml::Table = toml::from_str(&doc).unwrap();
            assert_eq!(table["v"].as_str(), Some(text));
        }
    }

    #[test]
    fn kept_copies_get_safe_file_names() {
        assert_eq!(file_stem("."), "root");
        assert_eq!(file_stem("Example.COM."), "example.com");
        assert_eq!(file_stem("a/b"), "a%2Fb");
        assert_eq!(file_stem(".."), "root");
    }
}
