//! Connections to primaries over TLS (XoT, RFC 9103), for SOA checks and
//! transfers alike: a [`Stream`] is a TCP connection with or without TLS,
//! so the pool and the pipelined lines do not care which.
//!
//! Two ways to trust a primary (RFC 9103 allows both): strictly, its certificate
//! must chain to the configured CA and be valid for a given name; or
//! opportunistically, encrypted without checking the certificate, as
//! BIND's `tls ephemeral` does. TSIG still authenticates the zone either
//! way. The ALPN protocol "dot" is offered, as RFC 9103 requires.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How a secondary trusts a primary it reaches over TLS.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum XotTrust {
    /// Encrypted; any certificate accepted.
    Opportunistic,
    /// The certificate must chain to the configured CA and be valid for
    /// this name (a host name or an IP address).
    Strict { name: String },
}

impl XotTrust {
    /// Strict trust for `name`, if it is a host name or an IP address.
    pub fn strict(name: &str) -> Result<XotTrust, String> {
        ServerName::try_from(name).map_err(|e| format!("'{name}': {e}"))?;
        Ok(XotTrust::Strict { name: name.into() })
    }
}

/// A connection to a primary.
pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// What TLS connections to primaries are made with.
#[derive(Clone)]
pub struct TlsClients {
    opportunistic: TlsConnector,
    /// None when no CA is configured: strict primaries cannot be reached.
    strict: Option<TlsConnector>,
}

impl TlsClients {
    /// `ca_pem`: the certificates strict primaries must chain to.
    pub fn new(ca_pem: Option<&[u8]>) -> Result<TlsClients, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = || {
            ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())
        };
        let anything = Arc::new(AnyCertificate(provider.signature_verification_algorithms));
        let opportunistic = builder()?
            .dangerous()
            .with_custom_certificate_verifier(anything)
            .with_no_client_auth();
        let strict = match ca_pem {
            None => None,
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| format!("CA certificates: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("CA certificate: {e}"))?;
                }
                if roots.is_empty() {
                    return Err("CA certificates: no CERTIFICATE block".into());
                }
                Some(
                    builder()?
                        .with_root_certificates(roots)
                        .with_no_client_auth(),
                )
            }
        };
        let connector = |mut config: ClientConfig| {
            config.alpn_protocols = vec![b"dot".to_vec()];
            TlsConnector::from(Arc::new(config))
        };
        Ok(TlsClients {
            opportunistic: connector(opportunistic),
            strict: strict.map(connector),
        })
    }

    /// Runs the TLS handshake on `tcp`, connected to `ip`.
    pub async fn connect(
        &self,
        tcp: TcpStream,
        ip: IpAddr,
        trust: &XotTrust,
    ) -> io::Result<Stream> {
        let (connector, name) = match trust {
            XotTrust::Opportunistic => (&self.opportunistic, ServerName::IpAddress(ip.into())),
            XotTrust::Strict { name } => {
                let connector = self.strict.as_ref().ok_or_else(|| {
                    io::Error::other("a strict TLS primary needs [secondary] tls-ca")
                })?;
                let name = ServerName::try_from(name.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                (connector, name)
            }
        };
        let tls = connector.connect(name, tcp).await?;
        Ok(Stream::Tls(Box::new(tls)))
    }
}

/// Whether a failed connect says something of the zone's own settings
/// (the name its primary's certificate must carry) rather than of the
/// primary: such a failure is the zone's, and the address is not left
/// alone for the other zones it serves.
pub fn is_zone_setting_error(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput
        || (e.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)))
}

impl std::fmt::Debug for TlsClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClients")
            .field("strict", &self.strict.is_some())
            .finish()
    }
}

impl TlsClients {
    /// Whether primaries can be checked strictly (a CA is configured).
    pub fn can_check_certificates(&self) -> bool {
        self.strict.is_some()
    }
}

/// Accepts any certificate, but still checks that the handshake was
/// signed by the key in it.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {

    /// A certificate not for the zone's name is the zone's failure; a
    /// primary that cannot be reached is the address's.
    #[test]
    fn certificate_errors_are_the_zones_not_the_primarys() {
        let not_for_name =
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        let e = io::Error::new(io::ErrorKind::InvalidData, not_for_name);
        assert!(is_zone_setting_error(&e));
        let name = io::Error::new(io::ErrorKind::InvalidInput, "not a DNS name");
        assert!(is_zone_setting_error(&name));
        let alert = io::Error::new(io::ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert!(!is_zone_setting_error(&alert));
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert!(!is_zone_setting_error(&refused));
    }

    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_an_error() {
        assert!(TlsClients::new(Some(b"")).is_err());
        assert!(TlsClients::new(Some(b"not pem at all")).is_err());
        assert!(TlsClients::new(None).is_ok());
    }

    #[test]
    fn strict_names_are_host_names_or_addresses() {
        assert!(XotTrust::strict("ns1.example").is_ok());
        assert!(XotTrust::strict("192.0.2.1").is_ok());
        assert!(XotTrust::strict("not a name").is_err());
    }
}
