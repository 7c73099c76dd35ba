//! DNS over TLS (RFC 7858) and zone transfers over TLS (RFC 9103): the
//! TLS settings a listener serves with. The connections themselves are
//! TCP connections with TLS under the same framing ([`crate::tcp`]).
//!
//! TLS 1.2 and 1.3 with rustls's ring provider. The ALPN protocol "dot" is
//! offered, as RFC 9103 asks of XoT; clients that offer no ALPN
//! are served too (RFC 7858 predates it). Sessions resume by stateless
//! tickets (RFC 8446 section 4.6.1).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub use tokio_rustls::TlsAcceptor;

/// The ALPN protocol of DNS over TLS (RFC 9103).
pub const ALPN_DOT: &[u8] = b"dot";

/// The certificate and key a TLS listener presents, replaced while it
/// serves: a reload reads the files again, so a certificate renewed in
/// place is taken without a restart (connections open keep theirs).
#[derive(Debug)]
pub struct CertificateSlot(ArcSwap<CertifiedKey>);

impl CertificateSlot {
    /// Takes the certificate `other` holds, if it is another one (a new
    /// chain); whether it did.
    pub fn take_from(&self, other: &CertificateSlot) -> bool {
        let new = other.0.load_full();
        if new.cert == self.0.load().cert {
            return false;
        }
        self.0.store(new);
        true
    }
}

impl ResolvesServerCert for CertificateSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// Server settings from a PEM certificate chain (the server's certificate
/// first) and a PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn server_config(chain_pem: &[u8], key_pem: &[u8]) -> Result<Arc<ServerConfig>, String> {
    server_config_with_slot(chain_pem, key_pem).map(|(config, _)| config)
}

/// What to tell the operator of a key file that gave no key.
fn key_error(key_pem: &[u8], e: rustls::pki_types::pem::Error) -> String {
    let text = String::from_utf8_lossy(key_pem);
    if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        return "key: the private key is encrypted (a passphrase), which Heron cannot read: \
                write it unencrypted, owner-only (openssl pkey -in KEY -out KEY.plain)"
            .into();
    }
    match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            "key: no PRIVATE KEY block (PKCS#8, PKCS#1 or SEC1) in the file".into()
        }
        e => format!("key: {e}"),
    }
}

/// [`server_config`], and the slot its certificate is presented from.
pub fn server_config_with_slot(
    chain_pem: &[u8],
    key_pem: &[u8],
) -> Result<(Arc<ServerConfig>, Arc<CertificateSlot>), String> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate: {e}"))?;
    if chain.is_empty() {
        return Err("certificate: no CERTIFICATE block".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| key_error(key_pem, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            "certificate and key: the certificate's public key is not the private key's (a key of another certificate?)".to_string()
        }
        e => format!(
            "certificate and key: {e} (Heron takes ECDSA P-256 and P-384, Ed25519 and RSA keys; \
             not P-521)"
        ),
    })?;
    let slot = Arc::new(CertificateSlot(ArcSwap::from_pointee(certified)));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(slot.clone());
    config.alpn_protocols = vec![ALPN_DOT.to_vec()];
    // Resumption by stateless tickets (keys in memory, rotated every 6
    // hours): a returning client skips the certificate and its signature,
    // and the server holds nothing per session. Without them rustls keeps
    // 256 sessions, too few for many clients.
    config.ticketer =
        rustls::crypto::ring::Ticketer::new().map_err(|e| format!("session tickets: {e}"))?;
    Ok((Arc::new(config), slot))
}

/// [`server_config_with_slot`] from files; errors name the file. Files
/// unchanged since the last read (the same inode, size and times) are not
/// read again: a server running as another user may not be able to read
/// a key only root can, and a reload then failed as a whole, zone files
/// included (black-box finding); the session ticket keys stay too.
pub fn server_config_from_files(
    chain: &Path,
    key: &Path,
) -> Result<(Arc<ServerConfig>, Arc<CertificateSlot>), String> {
    server_config_from_files_noting(chain, key).map(|(config, slot, _)| (config, slot))
}

/// Why a certificate read before was kept, if it was.
pub type KeptWarning = Option<String>;

/// [`server_config_from_files`], and the warning when the files could
/// not be looked at and the certificate read before was kept: a reload's
/// answer says it, so that the deploy hook running it (certbot's) is not
/// told all went well (black-box finding AS-5).
pub fn server_config_from_files_noting(
    chain: &Path,
    key: &Path,
) -> Result<(Arc<ServerConfig>, Arc<CertificateSlot>, KeptWarning), String> {
    let mut last = LAST_READ.lock().unwrap_or_else(|e| e.into_inner());
    let (Ok(chain_stamp), Ok(key_stamp)) = (stamp(chain), stamp(key)) else {
        let denied =
            |p: &Path| stamp(p).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
        // Files this user cannot even look at (certbot's live/ and
        // archive/ are 0700 root): the ones read before, by root at the
        // start, are kept (regression hunt: every reload failed).
        if let Some(((c, k, _), read)) = last.as_ref()
            && c == chain
            && k == key
            && (denied(chain) || denied(key))
        {
            let kept = format!(
                "TLS: {} and {} cannot be looked at as this user: the certificate read before is kept (a renewed one is taken at a restart)",
                chain.display(),
                key.display()
            );
            tracing::warn!("{kept}");
            return Ok((read.0.clone(), read.1.clone(), Some(kept)));
        }
        return read_config_files(chain, key).map(|(config, slot)| (config, slot, None));
    };
    let read_as = (
        chain.to_path_buf(),
        key.to_path_buf(),
        [chain_stamp, key_stamp],
    );
    if let Some((stamped, read)) = last.as_ref()
        && *stamped == read_as
    {
        return Ok((read.0.clone(), read.1.clone(), None));
    }
    let read = read_config_files(chain, key)?;
    *last = Some((read_as, read.clone()));
    Ok((read.0, read.1, None))
}

/// A file's device, inode, size, modification and change times.
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The files last read by [`server_config_from_files`], as they were.
type LastRead = (
    (PathBuf, PathBuf, [Stamp; 2]),
    (Arc<ServerConfig>, Arc<CertificateSlot>),
);

static LAST_READ: std::sync::Mutex<Option<LastRead>> = std::sync::Mutex::new(None);

/// What is wrong with the dates of the server's certificate (the first
/// of the PEM chain in `chain`) at `now` (Unix seconds): expired, not yet
/// valid, or expiring within a week. A reload that takes such a file is
/// told so (black-box finding BQ-3: a renewal hook that deployed an old
/// certificate was told all went well). None when the dates are fine or
/// the file cannot be read as a certificate (the loading says why).
pub fn validity_problem(chain: &Path, now: i64) -> Option<String> {
    let pem = heron_sys::files::read_settings_file(chain).ok()?;
    let der = CertificateDer::pem_slice_iter(&pem).next()?.ok()?;
    validity_problem_of(&der, now).map(|why| format!("TLS: {}: {why}", chain.display()))
}

/// [`validity_problem`] for one certificate in DER.
fn validity_problem_of(der: &[u8], now: i64) -> Option<String> {
    const WEEK: i64 = 7 * 86_400;
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let validity = certificate.validity();
    let (from, until) = (validity.not_before, validity.not_after);
    if now > until.timestamp() {
        return Some(format!(
            "the certificate expired on {until}: clients that check it refuse every connection"
        ));
    }
    if now < from.timestamp() {
        return Some(format!(
            "the certificate is not valid before {from}: clients that check it refuse every connection until then"
        ));
    }
    (until.timestamp() - now < WEEK)
        .then(|| format!("the certificate expires on {until}, within a week"))
}

fn read_config_files(
    chain: &Path,
    key: &Path,
) -> Result<(Arc<ServerConfig>, Arc<CertificateSlot>), String> {
    let read = heron_sys::files::read_settings_file;
    let (chain_pem, key_pem) = (read(chain)?, read(key)?);
    server_config_with_slot(&chain_pem, &key_pem).map_err(|e| {
        let (chain, key) = (chain.display(), key.display());
        match e.split_once(':').map(|(what, _)| what) {
            Some("key") => format!("{key}: {e}"),
            Some("certificate") => format!("{chain}: {e}"),
            _ => format!("{chain} and {key}: {e}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_pem_is_an_error_that_says_which() {
        assert!(
            server_config(b"", b"")
                .unwrap_err()
                .contains("no CERTIFICATE")
        );
        let junk = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(
            server_config(junk, b"")
                .unwrap_err()
                .starts_with("certificate")
        );
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let chain = cert.cert.pem();
        assert!(
            server_config(chain.as_bytes(), b"")
                .unwrap_err()
                .starts_with("key")
        );
        // A key that does not match the certificate.
        let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let err = server_config(chain.as_bytes(), other.as_bytes()).unwrap_err();
        assert!(err.starts_with("certificate and key"), "{err}");
        let key = cert.signing_key.serialize_pem();
        let config = server_config(chain.as_bytes(), key.as_bytes()).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"dot".to_vec()]);
        assert!(config.ticketer.enabled(), "sessions resumed by tickets");
    }

    /// A slot takes another certificate, and says so; the same one again
    /// changes nothing.
    #[test]
    fn a_slot_takes_a_renewed_certificate() {
        let pair = || {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
            let (chain, key) = (cert.cert.pem(), cert.signing_key.serialize_pem());
            server_config_with_slot(chain.as_bytes(), key.as_bytes()).unwrap()
        };
        let ((_, running), (_, same_again), (_, renewed)) = (pair(), pair(), pair());
        let first = running.0.load_full();
        assert!(!running.take_from(&running));
        assert!(running.take_from(&renewed));
        assert_eq!(running.0.load().cert, renewed.0.load().cert);
        assert_ne!(running.0.load().cert, first.cert);
        assert!(running.take_from(&same_again));
    }

    /// An encrypted key, and a key of another certificate, are said as
    /// such (they were "no items found" and rustls's debug text).
    #[test]
    fn key_mistakes_are_said_plainly() {
        let one = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let chain = one.cert.pem();
        let mismatch = server_config(
            chain.as_bytes(),
            other.signing_key.serialize_pem().as_bytes(),
        );
        assert!(mismatch.unwrap_err().contains("is not the private key's"));
        let encrypted = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0w\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let err = server_config(chain.as_bytes(), encrypted).unwrap_err();
        assert!(err.contains("encrypted"), "{err}");
        let err = server_config(chain.as_bytes(), b"nothing").unwrap_err();
        assert!(err.contains("no PRIVATE KEY block"), "{err}");
        // A P-521 key (openssl genpkey ... ec_paramgen_curve:P-521): what
        // is taken instead is said.
        let p521 = "-----BEGIN PRIVATE KEY-----\nMIHuAgEAMBAGByqGSM49AgEGBSuBBAAjBIHWMIHTAgEBBEIBkAky24A/nByeuN05\nEuExawww97+yCO+HZqF1U+9OXD1TKf3Nk0Tb26WV8yniE3QuYh86d4tCJ25koX47\nnQhs/QuhgYkDgYYABAC6FIBu1Z2Yqd+/HJj7bdL9rMQSZEx6e2YIKMGfU9tTepVK\nNstJIYdBDOaJ/6h8BqWOcOWgPrCrWx/2cmj+U2c89QCQ6SnUDQddsMFr5vXCX6Fc\nHW+v5vbFhLjpieEyHsetXgYQNyqrAO1lH9n5BlNNN9N7MBbTDOcuCFNTJAERYkFk\nfQ==\n-----END PRIVATE KEY-----\n";
        let err = server_config(chain.as_bytes(), p521.as_bytes()).unwrap_err();
        assert!(err.contains("not P-521"), "{err}");
    }

    #[test]
    fn missing_files_are_named() {
        let err = server_config_from_files(Path::new("/nonexistent/c.pem"), Path::new("k.pem"));
        assert!(err.unwrap_err().starts_with("/nonexistent/c.pem"));
    }

    /// A certificate made for `from`..`until` (years).
    fn dated(from: i32, until: i32) -> rcgen::Certificate {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(until, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap()
    }

    /// BQ-3: expired, not yet valid and expiring within a week are said;
    /// a certificate in its dates, or bytes that are none, are not.
    #[test]
    fn a_certificate_out_of_its_dates_is_said() {
        let day = 86_400;
        let y2021 = 1_609_459_200; // 2021-01-01
        let old = dated(2020, 2021);
        let der = old.der().to_vec();
        let expired = validity_problem_of(&der, y2021 + day).unwrap();
        assert!(
            expired.contains("expired on Jan  1 00:00:00 2021"),
            "{expired}"
        );
        assert!(validity_problem_of(&der, y2021 - 30 * day).is_none());
        let soon = validity_problem_of(&der, y2021 - 3 * day).unwrap();
        assert!(soon.contains("within a week"), "{soon}");
        let early = validity_problem_of(&der, y2021 - 400 * day).unwrap();
        assert!(
            early.contains("not valid before Jan  1 00:00:00 2020"),
            "{early}"
        );
        for bytes in [&[][..], &[0x30, 0x82, 0xff][..], &der[..der.len() / 2]] {
            assert!(validity_problem_of(bytes, y2021).is_none());
        }
        let pem = std::env::temp_dir().join(format!("heron-dated-{}.pem", std::process::id()));
        std::fs::write(&pem, old.pem()).unwrap();
        let said = validity_problem(&pem, y2021 + day);
        let _ = std::fs::remove_file(&pem);
        let said = said.unwrap();
        assert!(
            said.starts_with("TLS: ") && said.contains("heron-dated"),
            "{said}"
        );
    }
}
