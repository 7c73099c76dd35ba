//! `[dnstap]`: the query log (issue 26), off unless the section names a
//! `socket` or a `file`. Read into the writer's settings
//! (`heron_server::dnstap`) and the processor's tap layer's.

use std::path::{Path, PathBuf};

use heron_server::dnstap::{Output, Settings as WriterSettings};
use serde::Deserialize;

/// Highest `sample`: one query in a million.
pub const MAX_SAMPLE: u32 = 1_000_000;
/// Bounds of `queue-messages` and `queue-bytes`.
pub const MAX_QUEUE_MESSAGES: usize = 1_000_000;
pub const MIN_QUEUE_BYTES: usize = 64 << 10;
pub const MAX_QUEUE_BYTES: usize = 1 << 30;
/// Longest `identity` or `version`.
pub const MAX_LABEL: usize = 255;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DnstapSection {
    /// A Frame Streams reader's Unix socket (e.g. `fstrm_capture`'s).
    pub socket: Option<PathBuf>,
    /// Or a file, written from its start at each server start.
    pub file: Option<PathBuf>,
    /// Default: the host name.
    pub identity: Option<String>,
    /// Default: "heron " and the version.
    pub version: Option<String>,
    #[serde(default = "both_messages")]
    pub messages: Vec<String>,
    /// Log one query in this many (and its response).
    #[serde(default = "one")]
    pub sample: u32,
    #[serde(default = "default_queue_messages")]
    pub queue_messages: usize,
    #[serde(default = "default_queue_bytes")]
    pub queue_bytes: usize,
}

fn both_messages() -> Vec<String> {
    vec!["AUTH_QUERY".into(), "AUTH_RESPONSE".into()]
}

fn one() -> u32 {
    1
}

fn default_queue_messages() -> usize {
    10_000
}

fn default_queue_bytes() -> usize {
    16 << 20
}

/// Why `file` cannot be the query log: it exists and is not a regular
/// file (`/dev/zero` would swallow every message, a FIFO block the
/// server until something reads it).
fn not_a_log_file(file: &Path) -> Option<String> {
    let metadata = std::fs::metadata(file).ok()?;
    (!metadata.is_file()).then(|| {
        format!(
            "[dnstap] file: {} is {}, not a regular file",
            file.display(),
            heron_sys::files::file_kind(&metadata)
        )
    })
}

/// The query log, read and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dnstap {
    pub writer: WriterSettings,
    pub sample: u32,
    pub queries: bool,
    pub responses: bool,
}

impl DnstapSection {
    /// The settings, with paths taken from `base`; errors name the key.
    pub fn settings(&self, base: &Path) -> Result<Dnstap, Vec<String>> {
        let mut errors = Vec::new();
        let output = match (&self.socket, &self.file) {
            (Some(socket), None) => Some(Output::Socket(base.join(socket))),
            (None, Some(file)) => {
                errors.extend(not_a_log_file(&base.join(file)));
                Some(Output::File(base.join(file)))
            }
            _ => {
                errors.push("[dnstap] needs either 'socket' or 'file' (one of them)".into());
                None
            }
        };
        let (mut queries, mut responses) = (false, false);
        for m in &self.messages {
            match m.as_str() {
                "AUTH_QUERY" => queries = true,
                "AUTH_RESPONSE" => responses = true,
                other => errors.push(format!(
                    "[dnstap] messages: '{other}' is not AUTH_QUERY or AUTH_RESPONSE"
                )),
            }
        }
        if self.messages.is_empty() {
            errors
                .push("[dnstap] messages is empty: name AUTH_QUERY, AUTH_RESPONSE or both".into());
        }
        if !(1..=MAX_SAMPLE).contains(&self.sample) {
            errors.push(format!(
                "[dnstap] sample must be 1 to {MAX_SAMPLE} (one query in N)"
            ));
        }
        if !(1..=MAX_QUEUE_MESSAGES).contains(&self.queue_messages) {
            errors.push(format!(
                "[dnstap] queue-messages must be 1 to {MAX_QUEUE_MESSAGES}"
            ));
        }
        if !(MIN_QUEUE_BYTES..=MAX_QUEUE_BYTES).contains(&self.queue_bytes) {
            errors.push(format!(
                "[dnstap] queue-bytes must be {MIN_QUEUE_BYTES} to {MAX_QUEUE_BYTES}"
            ));
        }
        let identity = self.identity.clone().unwrap_or_else(host_name);
        let version = (self.version.clone())
            .unwrap_or_else(|| format!("heron {}", env!("CARGO_PKG_VERSION")));
        for (key, value) in [("identity", &identity), ("version", &version)] {
            if value.len() > MAX_LABEL {
                errors.push(format!("[dnstap] {key} is longer than {MAX_LABEL} bytes"));
            }
        }
        match output {
            Some(output) if errors.is_empty() => Ok(Dnstap {
                writer: WriterSettings {
                    output,
                    identity: identity.into_bytes(),
                    version: version.into_bytes(),
                    queue_messages: self.queue_messages,
                    queue_bytes: self.queue_bytes,
                },
                sample: self.sample,
                queries,
                responses,
            }),
            _ => Err(errors),
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Dnstap, Vec<String>> {
        let section: DnstapSection = toml::from_str(text).map_err(|e| vec![e.to_string()])?;
        section.settings(Path::new("/etc/heron"))
    }

    #[test]
    fn a_file_with_defaults() {
        let d = read("file = \"tap.fstrm\"").unwrap();
        assert_eq!(d.writer.output, Output::File("/etc/heron/tap.fstrm".into()));
        assert_eq!((d.sample, d.queries, d.responses), (1, true, true));
        assert_eq!(
            d.writer.version,
            format!("heron {}", env!("CARGO_PKG_VERSION")).as_bytes()
        );
        assert_eq!(d.writer.identity, host_name().as_bytes());
        assert_eq!(
            (d.writer.queue_messages, d.writer.queue_bytes),
            (10_000, 16 << 20)
        );
    }

    #[test]
    fn a_socket_with_every_key() {
        let d = read(
            "socket = \"/run/dnstap.sock\"\nidentity = \"ns1\"\nversion = \"v\"\n\
             messages = [\"AUTH_RESPONSE\"]\nsample = 100\nqueue-messages = 5\nqueue-bytes = 65536",
        )
        .unwrap();
        assert_eq!(d.writer.output, Output::Socket("/run/dnstap.sock".into()));
        assert_eq!((d.sample, d.queries, d.responses), (100, false, true));
        assert_eq!(
            (&d.writer.identity[..], &d.writer.version[..]),
            (&b"ns1"[..], &b"v"[..])
        );
        assert_eq!((d.writer.queue_messages, d.writer.queue_bytes), (5, 65536));
    }

    #[test]
    fn a_file_that_is_not_a_regular_file_is_refused() {
        let errors = read("file = \"/dev/zero\"").unwrap_err();
        assert_eq!(
            errors,
            ["[dnstap] file: /dev/zero is a character device, not a regular file"]
        );
        assert!(read("file = \"/tmp\"").unwrap_err()[0].contains("is a directory"));
    }

    #[test]
    fn limits_at_and_past() {
        let with = |extra: &str| read(&format!("file = \"f\"\n{extra}"));
        assert!(with(&format!("sample = {MAX_SAMPLE}")).is_ok());
        assert!(with(&format!("sample = {}", MAX_SAMPLE + 1)).is_err());
        assert!(with("sample = 0").is_err());
        assert!(with(&format!("queue-messages = {MAX_QUEUE_MESSAGES}")).is_ok());
        assert!(with(&format!("queue-messages = {}", MAX_QUEUE_MESSAGES + 1)).is_err());
        assert!(with("queue-messages = 0").is_err());
        assert!(with(&format!("queue-bytes = {MIN_QUEUE_BYTES}")).is_ok());
        assert!(with(&format!("queue-bytes = {}", MIN_QUEUE_BYTES - 1)).is_err());
        assert!(with(&format!("queue-bytes = {MAX_QUEUE_BYTES}")).is_ok());
        assert!(with(&format!("queue-bytes = {}", MAX_QUEUE_BYTES + 1)).is_err());
        let label = |n| "x".repeat(n);
        assert!(with(&format!("identity = \"{}\"", label(MAX_LABEL))).is_ok());
        assert!(with(&format!("identity = \"{}\"", label(MAX_LABEL + 1))).is_err());
        assert!(with(&format!("version = \"{}\"", label(MAX_LABEL + 1))).is_err());
    }

    #[test]
    fn mistakes_are_named() {
        let errors = read("").unwrap_err();
        assert!(
            errors[0].contains("either 'socket' or 'file'"),
            "{errors:?}"
        );
        assert!(read("file = \"a\"\nsocket = \"b\"").is_err());
        let errors = read("file = \"a\"\nmessages = [\"CLIENT_QUERY\"]").unwrap_err();
        assert!(errors[0].contains("'CLIENT_QUERY'"), "{errors:?}");
        assert!(read("file = \"a\"\nmessages = []").is_err());
        assert!(read("file = \"a\"\nrate = 5").is_err(), "unknown key");
    }
}
