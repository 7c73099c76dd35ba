//! `heron keygen NAME`: a new TSIG key, printed as a `[[key]]` block, or
//! (`--format`) as the peer's configuration wants it, so that both ends of
//! a transfer get the same key from one command.

use std::io::Read;
use std::process::ExitCode;

use heron_proto::Name;
use heron_proto::tsig::{Algorithm, Key};

/// Whose configuration syntax a key is printed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyFormat {
    /// A `[[key]]` block for heron.toml.
    Heron,
    /// A `key:` entry for knot.conf.
    Knot,
    /// A `key` statement for named.conf.
    Bind,
    /// A `key:` clause for nsd.conf.
    Nsd,
    /// Each of the above, one after the other.
    All,
}

pub fn run(name: &str, algorithm: &str, format: KeyFormat) -> ExitCode {
    match new_key(name, algorithm) {
        Ok(key) => {
            out!("{}", key.formatted(format));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("heron keygen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A new key's name (no final dot), algorithm and base64 secret.
struct NewKey {
    name: String,
    algorithm: &'static str,
    secret: String,
}

impl NewKey {
    fn formatted(&self, format: KeyFormat) -> String {
        let NewKey {
            name,
            algorithm,
            secret,
        } = self;
        match format {
            KeyFormat::Heron => {
                format!(
                    "[[key]]\nname = \"{name}\"\nalgorithm = \"{algorithm}\"\nsecret = \"{secret}\"\n"
                )
            }
            KeyFormat::Knot => {
                format!("key:\n  - id: {name}\n    algorithm: {algorithm}\n    secret: {secret}\n")
            }
            KeyFormat::Bind => format!(
                "key \"{name}\" {{\n    algorithm {algorithm};\n    secret \"{secret}\";\n}};\n"
            ),
            KeyFormat::Nsd => format!(
                "key:\n    name: \"{name}\"\n    algorithm: {algorithm}\n    secret: \"{secret}\"\n"
            ),
            KeyFormat::All => [
                ("heron.toml", KeyFormat::Heron),
                ("knot.conf", KeyFormat::Knot),
                ("named.conf", KeyFormat::Bind),
                ("nsd.conf", KeyFormat::Nsd),
            ]
            .map(|(file, f)| format!("# {file}\n{}", self.formatted(f)))
            .join("\n"),
        }
    }
}

/// The configuration block for a new random key.
#[cfg(test)]
fn key_block(name: &str, algorithm: &str) -> Result<String, String> {
    Ok(new_key(name, algorithm)?.formatted(KeyFormat::Heron))
}

/// A new random key.
fn new_key(name: &str, algorithm: &str) -> Result<NewKey, String> {
    let name = Name::parse(name).map_err(|e| format!("bad key name '{name}': {e}"))?;
    let algorithm = Algorithm::from_text(algorithm)
        .ok_or_else(|| format!("unknown algorithm '{algorithm}'"))?;
    // As long as the MAC: RFC 8945 6 recommends the hash's output length.
    let mut random = vec![0u8; algorithm.mac_len()];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let secret = Key::generate_secret_base64(algorithm, &random);
    Ok(NewKey {
        name: name.to_string().trim_end_matches('.').to_string(),
        algorithm: algorithm.text(),
        secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_random_and_load_as_keys() {
        let a = key_block("xfr.example", "hmac-sha512").unwrap();
        let b = key_block("xfr.example", "hmac-sha512").unwrap();
        assert_ne!(a, b);
        assert!(
            a.contains("name = \"xfr.example\"") && a.contains("hmac-sha512"),
            "{a}"
        );
        let secret = a
            .lines()
            .find_map(|l| l.strip_prefix("secret = \""))
            .unwrap();
        let key = Key::from_base64(
            "xfr.example",
            Algorithm::HmacSha512,
            secret.trim_end_matches('"'),
        );
        assert!(key.is_ok());
    }

    #[test]
    fn bad_names_and_algorithms_are_errors() {
        assert!(key_block("a..b", "hmac-sha256").is_err());
        assert!(
            key_block("k", "hmac-sha3")
                .unwrap_err()
                .contains("unknown algorithm")
        );
    }
}
