//! `heron keygen NAME`: a new TSIG key, printed as a `[[key]]` block.

use std::io::Read;
use std::process::ExitCode;

use heron_proto::Name;
use heron_proto::tsig::{Algorithm, Key};

pub fn run(name: &str, algorithm: &str) -> ExitCode {
    match key_block(name, algorithm) {
        Ok(block) => {
            print!("{block}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("heron keygen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration block for a new random key.
fn key_block(name: &str, algorithm: &str) -> Result<String, String> {
    let name = Name::parse(name).map_err(|e| format!("bad key name '{name}': {e}"))?;
    let algorithm = Algorithm::from_text(algorithm)
        .ok_or_else(|| format!("unknown algorithm '{algorithm}'"))?;
    // As long as the MAC: RFC 8945 6 recommends the hash's output length.
    let mut random = vec![0u8; algorithm.mac_len()];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let secret = Key::generate_secret_base64(algorithm, &random);
    Ok(format!(
        "[[key]]\nname = \"{}\"\nalgorithm = \"{}\"\nsecret = \"{secret}\"\n",
        name.to_string().trim_end_matches('.'),
        algorithm.text()
    ))
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
