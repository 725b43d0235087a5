//! `https://` for `blocklab load`: the rustls client configuration a run
//! shares (which roots it trusts, ALPN `http/1.1`, or `h2` with `--h2`, the server name sent as
//! SNI and checked against the certificate), the handshake over a connected
//! socket, and how a failed handshake is classified into an [`ErrorKind`]
//! with its reason (unknown issuer, name mismatch, expired, not TLS).
//!
//! The configuration is built once per run and shared by every engine
//! thread (an `Arc`): its session cache lets a new connection resume an
//! earlier session (TLS 1.3 tickets, TLS 1.2 session ids) as browsers and
//! curl do, and the report counts how many handshakes did.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Resumption, Tls12ClientSessionValue,
    Tls13ClientSessionValue,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, NamedGroup, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::client::ErrorKind;

/// Which certificates a run accepts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// The platform's roots: `/etc/ssl/certs` (or `SSL_CERT_FILE`, `SSL_CERT_DIR`).
    Platform,
    /// The certificates of a PEM file the user trusts (`--cacert FILE`), alone.
    File(std::path::PathBuf),
    /// Any certificate (`--insecure`): the handshake's signatures are still
    /// checked, the certificate's issuer, name and dates are not.
    Insecure,
}

/// What a run needs to open TLS connections: built once, shared by every thread.
#[derive(Clone)]
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
    /// The URL's host: sent as SNI (unless an IP address) and checked against the certificate.
    server_name: ServerName<'static>,
    /// How certificates are checked, for reports.
    pub trust: String,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .field("trust", &self.trust)
            .finish()
    }
}

impl TlsClient {
    /// The configuration for `connections` connections to `host` trusting `trust`; a
    /// missing or empty `--cacert` file, or no roots on the platform, is an error.
    pub fn new(host: &str, trust: &Trust, connections: usize) -> Result<TlsClient, String> {
        // ring, not aws-lc-rs: already built for the Neo4j driver, and no cmake or assembler needed.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS configuration: {e}"))?;
        let (mut config, trust) = match trust {
            Trust::Insecure => (
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                    .with_no_client_auth(),
                "none (--insecure)".to_string(),
            ),
            Trust::File(path) => (
                builder.with_root_certificates(roots_from(path)?).with_no_client_auth(),
                format!("--cacert {}", path.display()),
            ),
            Trust::Platform => {
                let found = rustls_native_certs::load_native_certs();
                let mut roots = RootCertStore::empty();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err("no trusted root certificates found on this machine (/etc/ssl/certs, SSL_CERT_FILE): \
                                give --cacert FILE, or --insecure"
                        .to_string());
                }
                (
                    builder.with_root_certificates(roots).with_no_client_auth(),
                    format!("the platform's {added} roots"),
                )
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.resumption = Resumption::store(Arc::new(Tickets::new(connections)));
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(bare.to_string())
            .map_err(|e| format!("'{bare}' is not a TLS server name: {e}"))?;
        Ok(TlsClient { connector: Arc::new(config).into(), server_name, trust })
    }

    /// The same configuration offering ALPN `h2` alone (`--h2`): a server
    /// that does not agree fails the handshake or negotiates nothing, and
    /// either is counted as [`ErrorKind::H2Refused`].
    pub fn offering_h2(&self) -> TlsClient {
        let mut config = ClientConfig::clone(self.connector.config());
        config.alpn_protocols = vec![b"h2".to_vec()];
        TlsClient {
            connector: Arc::new(config).into(),
            server_name: self.server_name.clone(),
            trust: self.trust.clone(),
        }
    }

    /// The handshake over `tcp`; `Err` is the kind of failure and rustls'
    /// own words for it.
    pub async fn handshake(&self, tcp: TcpStream) -> Result<Box<TlsStream<TcpStream>>, (ErrorKind, String)> {
        match self.connector.connect(self.server_name.clone(), tcp).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(e) => Err((classify(&e), e.to_string())),
        }
    }
}

/// The run's session store: rustls' own for the key-exchange hint and
/// TLS 1.2 sessions, and up to one TLS 1.3 ticket per connection (at least
/// 8) instead of rustls' 8 per server. A ticket is used once; a server sends
/// one with each resumed handshake (two or more after a full one), so a
/// connection that resumes gives back what it took. With rustls' 8 kept for
/// 100 connections, a handshake that began while more than 8 others were in
/// flight found none and was a full one: nginx logged 127 to 342 full
/// handshakes in 3 s runs at `-c 100` (1 to 6 %; bench runs on a busy machine
/// showed 72 to 91 % resumed) where wrk, which keeps a session per connection,
/// made only its first 100. Kept per connection, it is 100 too.
struct Tickets {
    other: ClientSessionMemoryCache,
    /// Per server name (a run has one), newest last; the newest is taken first.
    tls13: Mutex<Vec<(ServerName<'static>, VecDeque<Tls13ClientSessionValue>)>>,
    keep: usize,
}

impl Tickets {
    fn new(connections: usize) -> Tickets {
        Tickets {
            other: ClientSessionMemoryCache::new(8),
            tls13: Mutex::new(Vec::new()),
            keep: connections.max(8),
        }
    }
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets").field("keep", &self.keep).finish_non_exhaustive()
    }
}

impl ClientSessionStore for Tickets {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.other.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.other.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.other.set_tls12_session(server_name, value);
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.other.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.other.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        let mut servers = self.tls13.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tickets = match servers.iter().position(|(name, _)| *name == server_name) {
            Some(i) => &mut servers[i].1,
            None => {
                servers.push((server_name, VecDeque::new()));
                &mut servers.last_mut().expect("pushed above").1
            }
        };
        if tickets.len() == self.keep {
            tickets.pop_front();
        }
        tickets.push_back(value);
    }

    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        let mut servers = self.tls13.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        servers.iter_mut().find(|(name, _)| name == server_name).and_then(|(_, tickets)| tickets.pop_back())
    }
}

/// What an established TLS connection negotiated, for the report: `TLSv1_3
/// TLS13_AES_256_GCM_SHA384, ALPN http/1.1`.
pub fn session(stream: &TlsStream<TcpStream>) -> String {
    let (_, connection) = stream.get_ref();
    let version =
        connection.protocol_version().map_or("?".to_string(), |v| format!("{v:?}").replace('_', "."));
    let suite = connection.negotiated_cipher_suite().map_or("?".to_string(), |s| format!("{:?}", s.suite()));
    let alpn =
        connection.alpn_protocol().map_or("none".to_string(), |p| String::from_utf8_lossy(p).into_owned());
    format!("{version} {suite}, ALPN {alpn}")
}

/// Whether the handshake resumed an earlier session (no certificate exchanged).
pub fn resumed(stream: &TlsStream<TcpStream>) -> bool {
    stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
}

/// The kind of a failed handshake. tokio-rustls hands rustls' own error
/// inside the `io::Error`; a socket error is what it is.
fn classify(e: &io::Error) -> ErrorKind {
    let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) else {
        return match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe => {
                ErrorKind::ConnectionReset
            }
            // The server closed the connection in the middle of the handshake: not a TLS server, or one
            // that refused this client without saying why.
            _ => ErrorKind::TlsProtocol,
        };
    };
    match tls {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer => ErrorKind::TlsUnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                ErrorKind::TlsNameMismatch
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => ErrorKind::TlsExpired,
            _ => ErrorKind::TlsBadCertificate,
        },
        // The server would speak none of the protocols offered: h2 alone, with --h2.
        rustls::Error::NoApplicationProtocol
        | rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
            ErrorKind::H2Refused
        }
        _ => ErrorKind::TlsProtocol,
    }
}

/// Whether the handshake agreed to HTTP/2 (ALPN `h2`).
pub fn agreed_h2(stream: &TlsStream<TcpStream>) -> bool {
    stream.get_ref().1.alpn_protocol() == Some(b"h2")
}

/// The certificates of the PEM file at `path`.
fn roots_from(path: &Path) -> Result<RootCertStore, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read --cacert {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--cacert {}: not PEM certificates: {e}", path.display()))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("--cacert {}: no certificate in it", path.display()));
    }
    Ok(roots)
}

/// `--insecure`: accepts any certificate, but checks that the server holds
/// its key (the handshake signature), so the connection is still TLS.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

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
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_handshake_gets_its_reason() {
        let tls = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let cert = |e: CertificateError| tls(rustls::Error::InvalidCertificate(e));
        assert_eq!(classify(&cert(CertificateError::UnknownIssuer)), ErrorKind::TlsUnknownIssuer);
        assert_eq!(classify(&cert(CertificateError::NotValidForName)), ErrorKind::TlsNameMismatch);
        assert_eq!(classify(&cert(CertificateError::Expired)), ErrorKind::TlsExpired);
        assert_eq!(classify(&cert(CertificateError::NotValidYet)), ErrorKind::TlsBadCertificate);
        assert_eq!(classify(&cert(CertificateError::BadSignature)), ErrorKind::TlsBadCertificate);
        let alert = tls(rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure));
        assert_eq!(classify(&alert), ErrorKind::TlsProtocol);
        let no_h2 = tls(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol));
        assert_eq!(classify(&no_h2), ErrorKind::H2Refused);
        assert_eq!(classify(&io::Error::from(io::ErrorKind::UnexpectedEof)), ErrorKind::TlsProtocol);
        assert_eq!(classify(&io::Error::from(io::ErrorKind::ConnectionReset)), ErrorKind::ConnectionReset);
    }

    #[test]
    fn a_missing_or_empty_cacert_is_refused_and_an_ip_is_a_server_name() {
        assert!(
            TlsClient::new("127.0.0.1", &Trust::File("/nonexistent.pem".into()), 1)
                .unwrap_err()
                .contains("cannot read")
        );
        assert!(TlsClient::new("[::1]", &Trust::Insecure, 1).is_ok());
        assert!(TlsClient::new("localhost", &Trust::Insecure, 1).unwrap().trust.contains("--insecure"));
    }
}
