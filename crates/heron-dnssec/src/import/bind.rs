//! BIND key pairs: `K<zone>+<alg>+<tag>.key` (the DNSKEY record) and
//! `.private` (private-key format v1.2 or v1.3: `Name: value` lines).

use std::path::{Path, PathBuf};

use base64::Engine;

use super::{
    ECDSAP256SHA256, ED25519, ImportError, ImportedKey, KeyTimes, RSASHA256, der, error,
    parse_bind_time,
};
use crate::dnskey::PROTOCOL;

/// The largest key file read: an RSA-4096 private key is under 4 KB.
pub const MAX_FILE_SIZE: u64 = 64 * 1024;

/// A BIND key and the zone its DNSKEY record names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindKey {
    /// The DNSKEY record's owner, as written.
    pub zone: String,
    pub key: ImportedKey,
    /// The DNSKEY record's TTL, when the file gives one (dnssec-policy
    /// writes the TTL it serves the key with).
    pub ttl: Option<u32>,
}

/// The DNSKEY record of a `.key` file: owner, flags, algorithm, public
/// key, and its TTL if written.
type PublicKey = (String, u16, u8, Vec<u8>, Option<u32>);

/// The DNSKEY record of a `.key` file.
fn parse_public(text: &str) -> Result<PublicKey, ImportError> {
    let body: String = text
        .lines()
        .map(|line| line.split(';').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['(', ')'], " ");
    let tokens: Vec<&str> = body.split_whitespace().collect();
    let Some(at) = tokens.iter().position(|t| t.eq_ignore_ascii_case("DNSKEY")) else {
        return error("no DNSKEY record in the .key file");
    };
    if at == 0 || tokens.len() < at + 5 {
        return error("the DNSKEY record lacks its owner, flags, protocol, algorithm or key");
    }
    let number = |index: usize, what: &str| {
        tokens[index]
            .parse::<u16>()
            .map_err(|_| ImportError(format!("DNSKEY {what} `{}` is not a number", tokens[index])))
    };
    let flags = number(at + 1, "flags")?;
    if number(at + 2, "protocol")? != u16::from(PROTOCOL) {
        return error("DNSKEY protocol is not 3");
    }
    let algorithm = u8::try_from(number(at + 3, "algorithm")?)
        .map_err(|_| ImportError("DNSKEY algorithm out of range".into()))?;
    let public = base64_field("the DNSKEY public key", &tokens[at + 4..].concat())?;
    // Between the owner and the type: the TTL and the class, each optional.
    let ttl = tokens[1..at].iter().find_map(|t| t.parse::<u32>().ok());
    Ok((tokens[0].to_string(), flags, algorithm, public, ttl))
}

fn base64_field(what: &str, text: &str) -> Result<Vec<u8>, ImportError> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| ImportError(format!("{what} is not base64: {e}")))
}

/// The `Name: value` fields of a `.private` file, checked for its format.
fn private_fields(text: &str) -> Result<Vec<(&str, &str)>, ImportError> {
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return error(format!("`{line}` is not a `Name: value` line"));
        };
        if fields.iter().any(|(n, _)| *n == name) {
            return error(format!("{name} appears twice"));
        }
        fields.push((name, value.trim()));
    }
    let format = fields.first().filter(|(n, _)| *n == "Private-key-format");
    let Some((_, version)) = format else {
        return error("not a BIND private key file (no Private-key-format line first)");
    };
    let minor = version
        .strip_prefix("v1.")
        .and_then(|m| m.parse::<u32>().ok());
    if minor.is_none_or(|m| m < 2) {
        return error(format!(
            "private key format {version} (v1.2 or later needed)"
        ));
    }
    Ok(fields)
}

fn field<'a>(fields: &[(&str, &'a str)], name: &str) -> Result<&'a str, ImportError> {
    fields
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| ImportError(format!("the private key file has no {name}")))
}

fn times(fields: &[(&str, &str)]) -> Result<KeyTimes, ImportError> {
    let time = |name: &str| -> Result<Option<u64>, ImportError> {
        match fields.iter().find(|(n, _)| *n == name) {
            None => Ok(None),
            Some((_, value)) => parse_bind_time(value).map(Some).ok_or_else(|| {
                ImportError(format!("{name} `{value}` is not a YYYYMMDDHHMMSS time"))
            }),
        }
    };
    Ok(KeyTimes {
        created: time("Created")?,
        publish: time("Publish")?,
        activate: time("Activate")?,
        ready: None,
        inactive: time("Inactive")?,
        delete: time("Delete")?,
    })
}

/// `digits`, a big-endian number, in `len` octets (leading zeros added
/// or dropped); unchanged when it does not fit.
pub(super) fn left_padded(digits: &[u8], len: usize) -> Vec<u8> {
    let digits: Vec<u8> = digits.iter().copied().skip_while(|&b| b == 0).collect();
    if digits.len() > len {
        return digits;
    }
    let mut fixed = vec![0; len - digits.len()];
    fixed.extend_from_slice(&digits);
    fixed
}

/// The PKCS#8 of the private key the fields hold.
fn pkcs8(fields: &[(&str, &str)], algorithm: u8, public: &[u8]) -> Result<Vec<u8>, ImportError> {
    let decoded = |name: &str| base64_field(name, field(fields, name)?);
    match algorithm {
        ECDSAP256SHA256 | ED25519 => {
            let private = decoded("PrivateKey")?;
            // BIND writes a P-256 scalar without its leading zero octets
            // (one key in 256 has 31): ring wants exactly 32.
            let private = match algorithm {
                ECDSAP256SHA256 => left_padded(&private, 32),
                _ => private,
            };
            if private.len() != 32 || public.len() != if algorithm == ED25519 { 32 } else { 64 } {
                return error("the key is not of the length its algorithm needs");
            }
            if algorithm == ED25519 {
                return Ok(der::pkcs8_ed25519(&private, public));
            }
            let mut point = vec![4];
            point.extend_from_slice(public);
            Ok(der::pkcs8_p256(&private, &point))
        }
        RSASHA256 => {
            let names = [
                "Modulus",
                "PublicExponent",
                "PrivateExponent",
                "Prime1",
                "Prime2",
                "Exponent1",
                "Exponent2",
                "Coefficient",
            ];
            let numbers = names.map(decoded);
            let mut parts: Vec<Vec<u8>> = Vec::with_capacity(8);
            for number in numbers {
                parts.push(number?);
            }
            let refs: [&[u8]; 8] = std::array::from_fn(|i| parts[i].as_slice());
            Ok(der::pkcs8_rsa(&refs))
        }
        other => error(format!(
            "algorithm {other} is not one Heron imports (8, 13, 15)"
        )),
    }
}

/// A key from the texts of its `.key` and `.private` files.
pub fn parse(key_text: &str, private_text: &str) -> Result<BindKey, ImportError> {
    let (zone, flags, algorithm, public_key, ttl) = parse_public(key_text)?;
    let fields = private_fields(private_text)?;
    let private_algorithm = field(&fields, "Algorithm")?
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<u8>().ok());
    if private_algorithm != Some(algorithm) {
        return error("the .key and .private files name different algorithms");
    }
    let key = ImportedKey {
        algorithm,
        flags,
        pkcs8: pkcs8(&fields, algorithm, &public_key)?,
        public_key,
        times: times(&fields)?,
    };
    key.check_pair()?;
    Ok(BindKey { zone, key, ttl })
}

/// The zone, algorithm and key tag a `K<zone>+<alg>+<tag>` name gives.
pub fn name_parts(stem: &str) -> Option<(&str, u8, u16)> {
    let rest = stem.strip_prefix('K')?;
    let (rest, tag) = rest.rsplit_once('+')?;
    let (zone, algorithm) = rest.rsplit_once('+')?;
    Some((zone, algorithm.parse().ok()?, tag.parse().ok()?))
}

fn read_bounded(path: &Path) -> Result<String, ImportError> {
    let failed = |e: std::io::Error| ImportError(format!("{}: {e}", path.display()));
    let size = std::fs::metadata(path).map_err(failed)?.len();
    if size > MAX_FILE_SIZE {
        return error(format!(
            "{}: {size} bytes, too large for a key file",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(failed)
}

/// Reads the pair named by `path` (the `.key` file, the `.private` file, or
/// their common stem), and checks the name's algorithm and tag.
pub fn read(path: &Path) -> Result<BindKey, ImportError> {
    let text = path.to_string_lossy();
    let stem = text
        .strip_suffix(".key")
        .or_else(|| text.strip_suffix(".private"))
        .unwrap_or(&text);
    let with = |suffix: &str| PathBuf::from(format!("{stem}{suffix}"));
    let key = parse(
        &read_bounded(&with(".key"))?,
        &read_bounded(&with(".private"))?,
    )
    .map_err(|e| ImportError(format!("{stem}: {e}")))?;
    let file_name = Path::new(stem)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    if let Some((_, algorithm, tag)) = file_name.as_deref().and_then(name_parts)
        && (algorithm, tag) != (key.key.algorithm, key.key.tag())
    {
        return error(format!(
            "{stem}: the file name says algorithm {algorithm} tag {tag}, the key is algorithm {} tag {}",
            key.key.algorithm,
            key.key.tag()
        ));
    }
    Ok(key)
}
