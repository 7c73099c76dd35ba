//! Knot and BIND as consumers of a catalog zone (RFC 9432) from a
//! primary under test: each transfers the catalog, takes NOTIFY for it,
//! and adds, drops and transfers the member zones it lists, from the
//! same primary. Counts as started once it answers the SOA of a member:
//! Knot refuses queries for a catalog zone, so its serial is asked with
//! `knotc` ([`CatalogConsumer::catalog_serial`]).

use std::net::SocketAddr;
use std::process::Command;

use crate::peer_conf::{bind_key, bind_options, knot_key, knot_primary, knot_server, peer_command};
use crate::process::{KNOTC, KNOTD, NAMED, ServerKind, ServerProcess, TempDir, require_binary};
use crate::secondary::TsigSpec;

/// A catalog to consume.
#[derive(Clone, Debug)]
pub struct CatalogConsumer {
    /// With a trailing dot.
    pub catalog: String,
    pub primary: SocketAddr,
    /// Signs transfers and NOTIFYs, of the catalog and its members.
    pub key: Option<TsigSpec>,
    /// The `group` values the catalog may give its members: Knot gets a
    /// template for each (the first template, for members without a
    /// group, is `member`). BIND 9.18 has no templates.
    pub groups: Vec<String>,
}

impl CatalogConsumer {
    /// Starts `kind` (Knot or BIND) on 127.0.0.1:`port`; panics with its
    /// log if it does not serve `member` (from the catalog) soon.
    pub fn start(&self, kind: ServerKind, port: u16, member: &str) -> ServerProcess {
        let dir = TempDir::new(&format!("{}-catalog", kind.to_string().to_lowercase()));
        let cmd = match kind {
            ServerKind::Knot => self.knot(&dir, port),
            ServerKind::Bind => self.bind(&dir, port),
            other => panic!("{other} is not a catalog consumer here"),
        };
        ServerProcess::start(kind, dir, port, cmd, member)
            .unwrap_or_else(|log| panic!("{kind} did not serve {member} from its catalog: {log}"))
    }

    /// The serial of the catalog `consumer` has: from `knotc zone-status`
    /// for Knot, which answers no query for a catalog zone; from its SOA
    /// for BIND.
    pub fn catalog_serial(&self, consumer: &ServerProcess) -> Option<u32> {
        if consumer.kind() != ServerKind::Knot {
            return crate::client::soa_serial(consumer.addr(), &self.catalog);
        }
        let output = Command::new(KNOTC)
            .arg("-c")
            .arg(consumer.dir().join("knot.conf"))
            .args(["zone-status", &self.catalog])
            .output()
            .ok()?;
        let status = String::from_utf8_lossy(&output.stdout);
        let (_, after) = status.split_once("serial: ")?;
        after.split_whitespace().next()?.parse().ok()
    }

    /// Knot 3.2: `catalog-role: interpret`, one template per group.
    fn knot(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(KNOTD);
        let d = dir.0.display();
        let primary = self.primary;
        let mut conf = knot_server(&d.to_string(), port);
        let key_line = knot_key(&mut conf, self.key.as_ref());
        conf.push_str(&knot_primary(primary, &key_line));
        let secondary = format!(
            "    storage: \"{d}\"\n    master: primary\n    acl: notify\n    zonefile-sync: -1\n"
        );
        conf.push_str("template:\n");
        let templates: Vec<&str> = std::iter::once("member")
            .chain(self.groups.iter().map(String::as_str))
            .collect();
        for id in &templates {
            conf.push_str(&format!("  - id: {id}\n{secondary}"));
        }
        conf.push_str(&format!(
            "zone:\n  - domain: \"{}\"\n{secondary}    catalog-role: interpret\n    \
             catalog-template: [ {} ]\n",
            self.catalog,
            templates.join(", ")
        ));
        peer_command(ServerKind::Knot, &dir.0, &conf)
    }

    /// BIND 9.18: `catalog-zones` in `options`, members from
    /// `default-primaries`, and the catalog itself a secondary zone.
    fn bind(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(NAMED);
        let d = dir.0.display();
        let (primary, catalog) = (self.primary, &self.catalog);
        let mut keys = String::new();
        let key_clause = bind_key(&mut keys, self.key.as_ref());
        let primaries = format!(
            "port {} {{ {}{key_clause}; }}",
            primary.port(),
            primary.ip()
        );
        let options = format!(
            "  notify no;\n  allow-new-zones yes;\n  catalog-zones {{\n    zone \"{catalog}\" \
             default-primaries {primaries} zone-directory \"{d}\" in-memory no \
             min-update-interval 0;\n  }};\n"
        );
        let mut conf = bind_options(&d.to_string(), port, &options);
        conf.push_str(&keys);
        conf.push_str(&format!(
            "zone \"{catalog}\" {{\n  type secondary;\n  file \"{d}/catalog.db\";\n  \
             primaries {primaries};\n  allow-notify {{ {}; }};\n}};\n",
            primary.ip()
        ));
        peer_command(ServerKind::Bind, &dir.0, &conf)
    }
}
