//! Configuration fragments NSD, Knot and BIND share whichever side of a
//! transfer they play: the server section for a loopback port and a test
//! folder, and a TSIG key as each spells it.

use std::path::Path;
use std::process::Command;

use crate::process::{KNOTD, NAMED, NSD, ServerKind, write};
use crate::secondary::TsigSpec;

/// Writes `conf` into `dir` under the name the peer `kind` reads and
/// returns the command that runs the peer on it, in the foreground.
pub(crate) fn peer_command(kind: ServerKind, dir: &Path, conf: &str) -> Command {
    let (file, program, args): (&str, &str, &[&str]) = match kind {
        ServerKind::Nsd => ("nsd.conf", NSD, &["-d", "-c"]),
        ServerKind::Knot => ("knot.conf", KNOTD, &["-c"]),
        ServerKind::Bind => ("named.conf", NAMED, &["-g", "-n", "1", "-c"]),
        ServerKind::Heron => panic!("Heron is started with its own configuration"),
    };
    let path = dir.join(file);
    write(&path, conf);
    let mut cmd = Command::new(program);
    cmd.args(args).arg(&path);
    cmd
}

/// Knot's `remote` for the `primary` and its `acl` taking NOTIFY from it
/// (`key_line` from [`knot_key`]).
pub(crate) fn knot_primary(primary: std::net::SocketAddr, key_line: &str) -> String {
    format!(
        "remote:\n  - id: primary\n    address: {}@{}\n{key_line}\
         acl:\n  - id: notify\n    address: {}\n    action: notify\n{key_line}",
        primary.ip(),
        primary.port(),
        primary.ip()
    )
}

/// NSD's `server:` and `remote-control:` sections.
pub(crate) fn nsd_server(dir: &str, port: u16) -> String {
    format!(
        "server:\n  ip-address: 127.0.0.1@{port}\n  server-count: 1\n  username: \"\"\n  \
         chroot: \"\"\n  database: \"\"\n  zonelistfile: \"{dir}/zone.list\"\n  \
         xfrdfile: \"{dir}/xfrd.state\"\n  xfrdir: \"{dir}\"\n  pidfile: \"{dir}/nsd.pid\"\n  \
         zonesdir: \"{dir}\"\n  verbosity: 2\nremote-control:\n  control-enable: no\n"
    )
}

/// NSD's `key:` section (appended to `conf`) and the name ACL entries
/// use (`NOKEY` without a key).
pub(crate) fn nsd_key(conf: &mut String, key: Option<&TsigSpec>) -> String {
    match key {
        Some(k) => {
            conf.push_str(&format!(
                "key:\n  name: \"{}\"\n  algorithm: {}\n  secret: \"{}\"\n",
                k.name, k.algorithm, k.secret_base64
            ));
            k.name.clone()
        }
        None => "NOKEY".into(),
    }
}

/// Knot's `server:`, `log:` and `database:` sections.
pub(crate) fn knot_server(dir: &str, port: u16) -> String {
    format!(
        "server:\n  rundir: \"{dir}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n  \
         udp-workers: 1\n  tcp-workers: 1\nlog:\n  - target: stderr\n    any: info\n\
         database:\n  storage: \"{dir}\"\n  journal-db-max-size: 16M\n  kasp-db-max-size: 16M\n  \
         timer-db-max-size: 16M\n  catalog-db-max-size: 16M\n"
    )
}

/// Knot's `key:` section (appended to `conf`) and the `key:` line remotes
/// and ACLs use (empty without a key).
pub(crate) fn knot_key(conf: &mut String, key: Option<&TsigSpec>) -> String {
    match key {
        Some(k) => {
            conf.push_str(&format!(
                "key:\n  - id: {}\n    algorithm: {}\n    secret: {}\n",
                k.name, k.algorithm, k.secret_base64
            ));
            format!("    key: {}\n", k.name)
        }
        None => String::new(),
    }
}

/// BIND's `options` (with `extra` inside) and empty `controls`.
pub(crate) fn bind_options(dir: &str, port: u16, extra: &str) -> String {
    format!(
        "options {{\n  directory \"{dir}\";\n  pid-file \"{dir}/named.pid\";\n  \
         session-keyfile \"{dir}/session.key\";\n  listen-on port {port} {{ 127.0.0.1; }};\n  \
         listen-on-v6 {{ none; }};\n  recursion no;\n  dnssec-validation no;\n{extra}}};\n\
         controls {{ }};\n"
    )
}

/// BIND's `key` statement (appended to `conf`) and the ` key "NAME"`
/// clause address lists use (empty without a key).
pub(crate) fn bind_key(conf: &mut String, key: Option<&TsigSpec>) -> String {
    match key {
        Some(k) => {
            conf.push_str(&format!(
                "key \"{}\" {{ algorithm {}; secret \"{}\"; }};\n",
                k.name, k.algorithm, k.secret_base64
            ));
            format!(" key \"{}\"", k.name)
        }
        None => String::new(),
    }
}
