//! Memory per idle DNS-over-TLS connection (issue 40): each server's TLS
//! listener is sent `count` connections that each finish a TLS handshake
//! (rustls client, the certificate not checked: the suite made it), ask
//! one question, read the answer and then stay open, silent. The server's
//! RSS with them held, less its RSS before, over the count, is what an
//! idle TLS client costs it (kernel socket memory is not in RSS and is
//! the same for every server). The client keeps only the sockets (its
//! TLS state is dropped, which sends nothing), and checks after the
//! reading that every connection is still open (no end of stream).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::results::IdleTls;
use crate::servers::Server;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

/// The longest a handshake and its one answer may take.
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// Opens `count` idle TLS connections to `server`'s TLS listener asking
/// `query` (unframed) on each, reads its memory, checks them, closes.
pub fn measure(server: &Server, count: usize, query: &[u8]) -> Result<IdleTls, String> {
    let addr = server.tls_addr.ok_or("no TLS listener")?;
    let config = Arc::new(client_config());
    let (rss_before_kib, _, _) = server.memory_kib();
    let mut held = Vec::with_capacity(count);
    // Bounded: `count` attempts, each bounded by CONNECT_WAIT.
    for _ in 0..count {
        if crate::interrupt::interrupted() {
            return Err("interrupted".into());
        }
        if let Ok(stream) = open(addr, &config, query) {
            held.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let (rss_with_kib, _, _) = server.memory_kib();
    let still_open = held.iter().filter(|s| is_open(s)).count();
    Ok(IdleTls {
        server: server.kind.name().into(),
        asked: count,
        opened: held.len(),
        still_open,
        rss_before_kib,
        rss_with_kib,
    })
}

/// One connection: handshake, one question answered; the socket alone
/// is kept.
fn open(addr: SocketAddr, config: &Arc<ClientConfig>, query: &[u8]) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_WAIT)?;
    stream.set_read_timeout(Some(CONNECT_WAIT))?;
    stream.set_write_timeout(Some(CONNECT_WAIT))?;
    let name = ServerName::IpAddress(addr.ip().into());
    let mut tls = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    let mut session = rustls::Stream::new(&mut tls, &mut stream);
    session.write_all(&framed)?;
    let mut len = [0u8; 2];
    session.read_exact(&mut len)?;
    let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
    session.read_exact(&mut answer)?;
    if answer.len() < 12 || answer[..2] != query[..2] || answer[2] & 0x80 == 0 {
        return Err(std::io::Error::other("not an answer to the question"));
    }
    drop(tls);
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Open: no end of stream and no error waiting (WouldBlock).
fn is_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

fn client_config() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

/// Accepts the suite's own self-signed certificate (signatures are still
/// checked, so the handshake does its full work).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
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
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
