//! NSD, Knot and BIND as secondaries of a primary under test: each is
//! configured to transfer one zone (with a TSIG key if given) and to take
//! NOTIFY from the primary, and counts as started once it answers the
//! zone's SOA, that is once its first transfer succeeded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use crate::peer_conf::{
    bind_key, bind_options, knot_key, knot_primary, knot_server, nsd_key, nsd_server, peer_command,
};
use crate::process::{KNOTD, NAMED, NSD, ServerKind, ServerProcess, TempDir, require_binary};

/// A TSIG key as the peers' configurations spell it.
#[derive(Clone, Debug)]
pub struct TsigSpec {
    /// e.g. `hmac-sha256`
    pub algorithm: String,
    /// e.g. `xfr.test` (no trailing dot)
    pub name: String,
    pub secret_base64: String,
}

/// One zone to pull from a primary.
#[derive(Clone, Debug)]
pub struct Secondary {
    /// With a trailing dot.
    pub origin: String,
    pub primary: SocketAddr,
    pub key: Option<TsigSpec>,
    /// Transfers over TLS (XoT, RFC 9103) to `primary`, a TLS port. Knot
    /// 3.2 cannot; BIND 9.18 does it opportunistically, NSD strictly.
    pub tls: Option<XotTrust>,
}

/// How a secondary trusts its primary's TLS certificate.
#[derive(Clone, Debug)]
pub enum XotTrust {
    /// Encrypted, the certificate not checked (BIND's `tls ephemeral`).
    Opportunistic,
    /// The certificate must chain to `ca` and carry `name` (NSD's
    /// `tls-auth`).
    Strict { ca: PathBuf, name: String },
}

impl Secondary {
    /// Starts `kind` as a secondary listening on 127.0.0.1:`port`; panics
    /// with the peer's log if the first transfer does not happen.
    pub fn start(&self, kind: ServerKind, port: u16) -> ServerProcess {
        let dir = TempDir::new(&format!("{}-secondary", kind.to_string().to_lowercase()));
        let xot_ok = match (&self.tls, kind) {
            (None, _) => true,
            (Some(XotTrust::Opportunistic), k) => k == ServerKind::Bind,
            (Some(XotTrust::Strict { .. }), k) => k == ServerKind::Nsd,
        };
        assert!(xot_ok, "{kind} cannot be a secondary with {:?}", self.tls);
        let cmd = match kind {
            ServerKind::Nsd => self.nsd(&dir, port),
            ServerKind::Knot => self.knot(&dir, port),
            ServerKind::Bind => self.bind(&dir, port),
            ServerKind::Heron => panic!("start a Heron secondary with its own configuration"),
        };
        ServerProcess::start(kind, dir, port, cmd, &self.origin)
            .unwrap_or_else(|log| panic!("{kind} secondary did not get {}: {log}", self.origin))
    }

    fn nsd(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(NSD);
        let d = dir.0.display();
        let (primary, origin) = (self.primary, &self.origin);
        let mut conf = nsd_server(&d.to_string(), port);
        let key = nsd_key(&mut conf, self.key.as_ref());
        let mut auth = String::new();
        if let Some(XotTrust::Strict { ca, name }) = &self.tls {
            let bundle = format!("  tls-cert-bundle: \"{}\"\n", ca.display());
            conf = conf.replacen("server:\n", &format!("server:\n{bundle}"), 1);
            conf.push_str(&format!(
                "tls-auth:\n  name: xot\n  auth-domain-name: \"{name}\"\n"
            ));
            auth.push_str(" xot");
        }
        let ip = primary.ip();
        conf.push_str(&format!(
            "zone:\n  name: \"{origin}\"\n  zonefile: \"{d}/secondary.zone\"\n  \
             request-xfr: {ip}@{} {key}{auth}\n  allow-notify: {ip} {key}\n",
            primary.port()
        ));
        peer_command(ServerKind::Nsd, &dir.0, &conf)
    }

    fn knot(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(KNOTD);
        let d = dir.0.display();
        let (primary, origin) = (self.primary, &self.origin);
        let mut conf = knot_server(&d.to_string(), port);
        let key_line = knot_key(&mut conf, self.key.as_ref());
        conf.push_str(&knot_primary(primary, &key_line));
        conf.push_str(&format!(
            "zone:\n  - domain: \"{origin}\"\n    storage: \"{d}\"\n    master: primary\n    \
             acl: notify\n    zonefile-sync: -1\n    journal-content: changes\n"
        ));
        peer_command(ServerKind::Knot, &dir.0, &conf)
    }

    fn bind(&self, dir: &TempDir, port: u16) -> Command {
        require_binary(NAMED);
        let d = dir.0.display();
        let (primary, origin) = (self.primary, &self.origin);
        let mut conf = bind_options(&d.to_string(), port, "  notify no;\n");
        let mut key_clause = bind_key(&mut conf, self.key.as_ref());
        if self.tls.is_some() {
            key_clause.push_str(" tls ephemeral");
        }
        conf.push_str(&format!(
            "zone \"{origin}\" {{\n  type secondary;\n  file \"{d}/secondary.db\";\n  \
             primaries port {} {{ {}{key_clause}; }};\n  allow-notify {{ {}; }};\n}};\n",
            primary.port(),
            primary.ip(),
            primary.ip()
        ));
        peer_command(ServerKind::Bind, &dir.0, &conf)
    }
}
