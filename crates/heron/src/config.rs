//! The configuration file (TOML) and the command-line equivalents.
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:53", "[::1]:53"]
//! workers = 2
//! cpu-affinity = [0, 1]      # pin UDP workers to these CPUs, round robin
//! max-udp-payload = 1232
//! version = "heron"          # CH TXT version.bind; REFUSED when absent
//! identity = "ns1"           # CH TXT id.server; REFUSED when absent
//!
//! [tcp]
//! idle-timeout = 10          # seconds
//! max-connections = 10000
//! max-connections-per-client = 100
//!
//! [[zone]]
//! origin = "example.com"
//! file = "zones/example.com.zone"   # relative to this file's folder
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::Name;
use heron_server::{ServerConfig, TcpLimits};
use heron_zone::AnswerConfig;
use serde::Deserialize;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:5300";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub tcp: TcpSection,
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSection {
    #[serde(default = "default_listen")]
    pub listen: Vec<SocketAddr>,
    /// UDP worker threads (and async runtime threads); default one per core.
    pub workers: Option<usize>,
    /// CPUs to pin UDP workers to (round robin); empty: no pinning.
    #[serde(default)]
    pub cpu_affinity: Vec<usize>,
    #[serde(default = "default_udp_payload")]
    pub max_udp_payload: u16,
    pub version: Option<String>,
    pub identity: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: default_listen(),
            workers: None,
            cpu_affinity: Vec::new(),
            max_udp_payload: default_udp_payload(),
            version: None,
            identity: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TcpSection {
    #[serde(default = "default_idle")]
    pub idle_timeout: u64,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    #[serde(default = "default_per_client")]
    pub max_connections_per_client: usize,
}

impl Default for TcpSection {
    fn default() -> Self {
        TcpSection {
            idle_timeout: default_idle(),
            max_connections: default_max_connections(),
            max_connections_per_client: default_per_client(),
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ZoneEntry {
    pub origin: String,
    pub file: PathBuf,
}

fn default_listen() -> Vec<SocketAddr> {
    vec![DEFAULT_LISTEN.parse().unwrap()]
}
fn default_udp_payload() -> u16 {
    1232
}
fn default_idle() -> u64 {
    TcpLimits::default().idle_timeout.as_secs()
}
fn default_max_connections() -> usize {
    TcpLimits::default().max_connections
}
fn default_per_client() -> usize {
    TcpLimits::default().max_connections_per_client
}

/// A zone to load: its origin and file, resolved.
#[derive(Debug, Clone)]
pub struct ZoneSpec {
    pub origin: Name,
    pub file: PathBuf,
}

/// A configuration ready to run.
#[derive(Debug)]
pub struct Settings {
    pub server: ServerConfig,
    pub zones: Vec<ZoneSpec>,
}

/// Reads and checks a configuration file. Errors name the file and say what
/// is wrong (TOML errors carry line and column).
pub fn load(path: &Path) -> Result<Settings, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("{}: cannot read: {e}", path.display())])?;
    let file: ConfigFile =
        toml::from_str(&text).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    let base = path.parent().unwrap_or(Path::new("."));
    from_file(file, base, path)
}

fn from_file(file: ConfigFile, base: &Path, path: &Path) -> Result<Settings, Vec<String>> {
    let mut errors = Vec::new();
    let mut zones = Vec::new();
    for entry in &file.zones {
        match zone_spec(&entry.origin, &base.join(&entry.file)) {
            Ok(spec) => zones.push(spec),
            Err(e) => errors.push(format!("{}: zone '{}': {e}", path.display(), entry.origin)),
        }
    }
    errors.extend(
        check_unique_origins(&zones)
            .into_iter()
            .map(|e| format!("{}: {e}", path.display())),
    );
    let server = &file.server;
    if server.listen.is_empty() {
        errors.push(format!("{}: [server] listen is empty", path.display()));
    }
    if server.max_udp_payload < 512 {
        errors.push(format!(
            "{}: [server] max-udp-payload {} is below the minimum of 512",
            path.display(),
            server.max_udp_payload
        ));
    }
    if server.workers == Some(0) {
        errors.push(format!(
            "{}: [server] workers must be at least 1",
            path.display()
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Settings {
        server: ServerConfig {
            listen: server.listen.clone(),
            workers: server.workers.unwrap_or_else(default_workers),
            cpu_affinity: server.cpu_affinity.clone(),
            tcp: TcpLimits {
                idle_timeout: Duration::from_secs(file.tcp.idle_timeout),
                max_connections: file.tcp.max_connections,
                max_connections_per_client: file.tcp.max_connections_per_client,
            },
            answer: AnswerConfig {
                max_udp_payload: server.max_udp_payload,
                version: server.version.clone(),
                identity: server.identity.clone(),
            },
        },
        zones,
    })
}

/// One worker per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn zone_spec(origin: &str, file: &Path) -> Result<ZoneSpec, String> {
    let origin = Name::parse(origin).map_err(|e| format!("bad origin '{origin}': {e}"))?;
    Ok(ZoneSpec {
        origin,
        file: file.to_path_buf(),
    })
}

/// Parses `ORIGIN=FILE` from the command line.
pub fn parse_zone_arg(arg: &str) -> Result<ZoneSpec, String> {
    let (origin, file) = arg
        .split_once('=')
        .ok_or_else(|| format!("--zone '{arg}': expected ORIGIN=FILE"))?;
    zone_spec(origin, Path::new(file))
}

fn check_unique_origins(zones: &[ZoneSpec]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    zones
        .iter()
        .filter(|z| !seen.insert(z.origin.clone()))
        .map(|z| format!("zone {} is configured more than once", z.origin))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, Vec<String>> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| vec![e.to_string()])?;
        from_file(file, Path::new("/etc/heron"), Path::new("heron.toml"))
    }

    #[test]
    fn full_config() {
        let s = parse(
            r#"
            [server]
            listen = ["127.0.0.1:53", "[::1]:53"]
            workers = 2
            version = "heron 0.1"
            [tcp]
            idle-timeout = 3
            max-connections = 50
            max-connections-per-client = 5
            [[zone]]
            origin = "example.com"
            file = "example.com.zone"
            "#,
        )
        .unwrap();
        assert_eq!(s.server.listen.len(), 2);
        assert_eq!(s.server.workers, 2);
        assert_eq!(s.server.tcp.idle_timeout, Duration::from_secs(3));
        assert_eq!(s.server.tcp.max_connections_per_client, 5);
        assert_eq!(s.server.answer.version.as_deref(), Some("heron 0.1"));
        assert_eq!(s.zones[0].file, Path::new("/etc/heron/example.com.zone"));
    }

    #[test]
    fn defaults() {
        let s = parse("").unwrap();
        assert_eq!(s.server.listen, default_listen());
        assert_eq!(s.server.answer.max_udp_payload, 1232);
        assert!(s.zones.is_empty());
    }

    #[test]
    fn mistakes_are_reported() {
        let err = parse("[server]\nlisten = [\"nonsense\"]\n").unwrap_err();
        assert!(err[0].contains("line 2"), "{err:?}");
        let err = parse("[server]\nlisen = []\n").unwrap_err();
        assert!(err[0].contains("unknown field `lisen`"), "{err:?}");
        let err = parse(
            "[[zone]]\norigin = \"a.test\"\nfile = \"x\"\n[[zone]]\norigin = \"A.test.\"\nfile = \"y\"\n",
        )
        .unwrap_err();
        assert!(err[0].contains("more than once"), "{err:?}");
        let err = parse("[server]\nmax-udp-payload = 100\nworkers = 0\n").unwrap_err();
        assert_eq!(err.len(), 2, "{err:?}");
        assert!(parse_zone_arg("example.com").is_err());
        assert!(parse_zone_arg("exa..mple=f").is_err());
        assert_eq!(
            parse_zone_arg("example.com=f.zone").unwrap().origin,
            Name::parse("example.com").unwrap()
        );
    }
}
