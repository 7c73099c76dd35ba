//! NSD, Knot and BIND as primaries of a secondary under test: each serves
//! one zone from a file, lets 127.0.0.1 transfer it (with a TSIG key if
//! given), keeps the differences between versions of the file so it can
//! answer IXFR, and sends NOTIFY to the secondary on every new serial
//! (after `ServerProcess::reload`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use crate::peer_conf::{
    bind_key, bind_options, knot_key, knot_server, nsd_key, nsd_server, peer_command,
};
use crate::process::{
    KNOTD, NAMED, NSD, ServerKind, ServerProcess, TempDir, free_port, require_binary,
};
use crate::secondary::TsigSpec;

/// One zone to serve to a secondary.
#[derive(Clone, Debug)]
pub struct Primary {
    /// With a trailing dot.
    pub origin: String,
    /// The zone file: edit it and call `reload` to make a new version.
    pub file: PathBuf,
    /// Where NOTIFY goes.
    pub secondary: SocketAddr,
    pub key: Option<TsigSpec>,
    /// Transfers over TLS too (XoT, RFC 9103); BIND and NSD (Knot 3.2
    /// cannot).
    pub tls: Option<TlsServe>,
}

/// Where and with which certificate a primary serves XFR over TLS.
#[derive(Clone, Debug)]
pub struct TlsServe {
    pub port: u16,
    /// PEM files.
    pub chain: PathBuf,
    pub key: PathBuf,
}

impl Primary {
    /// Starts `kind` as a primary on a free loopback port; panics with the
    /// peer's log if it does not answer the zone's SOA.
    pub fn start(&self, kind: ServerKind) -> ServerProcess {
        self.start_as(kind, "")
    }

    /// BIND as [`Primary::start`] starts it, but sending every transfer
    /// one record per message (`transfer-format one-answer`), so that the
    /// first message of an IXFR is the newest SOA alone.
    pub fn start_bind_one_answer(&self) -> ServerProcess {
        self.start_as(ServerKind::Bind, "  transfer-format one-answer;\n")
    }

    /// `bind_options`: more of BIND's `options` (nothing for the others).
    fn start_as(&self, kind: ServerKind, bind_options: &str) -> ServerProcess {
        assert!(
            self.tls.is_none() || matches!(kind, ServerKind::Bind | ServerKind::Nsd),
            "XoT primaries: BIND and NSD only"
        );
        let dir = TempDir::new(&format!("{}-primary", kind.to_string().to_lowercase()));
        let port = free_port();
        let cmd = match kind {
            ServerKind::Nsd => self.nsd(&dir, port),
            ServerKind::Knot => self.knot(&dir, port),
            ServerKind::Bind => self.bind(&dir, port, bind_options),
            ServerKind::Heron => panic!("start a Heron primary with its own configuration"),
        };
        ServerProcess::start(kind, dir, port, cmd, &self.origin)
            .unwrap_or_else(|log| panic!("{kind} primary did not serve {}: {log}", self.origin))
    }

    fn nsd(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(NSD);
        let d = dir.0.display();
        let mut conf = nsd_server(&d.to_string(), port);
        if let Some(tls) = &self.tls {
            let p = tls.port;
            let server = format!(
                "server:\n  ip-address: 127.0.0.1@{p}\n  tls-port: {p}\n  \
                 tls-service-key: \"{}\"\n  tls-service-pem: \"{}\"\n",
                tls.key.display(),
                tls.chain.display()
            );
            conf = conf.replacen("server:\n", &server, 1);
        }
        let key = nsd_key(&mut conf, self.key.as_ref());
        let to = self.secondary;
        conf.push_str(&format!(
            "zone:\n  name: \"{}\"\n  zonefile: \"{}\"\n  provide-xfr: 127.0.0.1 {key}\n  \
             notify: {}@{} {key}\n  store-ixfr: yes\n  create-ixfr: yes\n",
            self.origin,
            self.file.display(),
            to.ip(),
            to.port()
        ));
        peer_command(ServerKind::Nsd, &dir.0, &conf)
    }

    fn knot(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(KNOTD);
        let d = dir.0.display();
        let mut conf = knot_server(&d.to_string(), port);
        let key_line = knot_key(&mut conf, self.key.as_ref());
        let to = self.secondary;
        conf.push_str(&format!(
            "remote:\n  - id: secondary\n    address: {}@{}\n{key_line}\
             acl:\n  - id: transfer\n    address: 127.0.0.1\n    action: transfer\n{key_line}\
             zone:\n  - domain: \"{}\"\n    file: \"{}\"\n    notify: secondary\n    \
             acl: transfer\n    zonefile-sync: -1\n    zonefile-load: difference\n    \
             journal-content: changes\n    semantic-checks: off\n",
            to.ip(),
            to.port(),
            self.origin,
            self.file.display()
        ));
        peer_command(ServerKind::Knot, &dir.0, &conf)
    }

    fn bind(&self, dir: &TempDir, port: u16, options: &str) -> Command {
        require_binary(NAMED);
        let d = dir.0.display();
        let mut conf = match &self.tls {
            None => bind_options(&d.to_string(), port, options),
            Some(tls) => {
                let listen = format!("  listen-on port {} tls xot {{ 127.0.0.1; }};\n", tls.port);
                let mut conf = bind_options(&d.to_string(), port, &(listen + options));
                conf.push_str(&format!(
                    "tls xot {{ key-file \"{}\"; cert-file \"{}\"; }};\n",
                    tls.key.display(),
                    tls.chain.display()
                ));
                conf
            }
        };
        let key_clause = bind_key(&mut conf, self.key.as_ref());
        let allowed = match &self.key {
            Some(k) => format!("key \"{}\"", k.name),
            None => "127.0.0.1".into(),
        };
        let to = self.secondary;
        conf.push_str(&format!(
            "zone \"{}\" {{\n  type primary;\n  file \"{}\";\n  check-names ignore;\n  \
             ixfr-from-differences yes;\n  notify explicit;\n  \
             also-notify {{ {} port {}{key_clause}; }};\n  allow-transfer {{ {allowed}; }};\n}};\n",
            self.origin,
            self.file.display(),
            to.ip(),
            to.port()
        ));
        peer_command(ServerKind::Bind, &dir.0, &conf)
    }
}

/// Knot as the primary of several zones (origins with the trailing dot,
/// and their files), each sent NOTIFY to `secondary` on a new serial
/// (after `ServerProcess::reload`); the first zone is waited for. A
/// catalog zone written as a file is served so like any other: what a
/// test needs to set unique IDs and groups exactly.
pub fn knot_primary_of(
    zones: &[(String, PathBuf)],
    secondary: SocketAddr,
    key: Option<&TsigSpec>,
) -> ServerProcess {
    require_binary(KNOTD);
    let dir = TempDir::new("knot-primary");
    let port = free_port();
    let d = dir.0.display().to_string();
    let mut conf = knot_server(&d, port);
    let key_line = knot_key(&mut conf, key);
    conf.push_str(&format!(
        "remote:\n  - id: secondary\n    address: {}@{}\n{key_line}\
         acl:\n  - id: transfer\n    address: 127.0.0.1\n    action: transfer\n{key_line}\
         template:\n  - id: default\n    notify: secondary\n    acl: transfer\n    \
         zonefile-sync: -1\n    zonefile-load: difference\n    journal-content: changes\n    \
         semantic-checks: off\nzone:\n",
        secondary.ip(),
        secondary.port(),
    ));
    for (origin, file) in zones {
        conf.push_str(&format!(
            "  - domain: \"{origin}\"\n    file: \"{}\"\n",
            file.display()
        ));
    }
    let cmd = peer_command(ServerKind::Knot, &dir.0, &conf);
    let first = &zones.first().expect("a zone").0;
    ServerProcess::start(ServerKind::Knot, dir, port, cmd, first)
        .unwrap_or_else(|log| panic!("Knot primary did not serve {first}: {log}"))
}
