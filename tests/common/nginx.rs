//! nginx as a test's child (one process, `master_process off`), with its
//! configuration in a directory of the test's own, killed by pid when the
//! test ends; and the certificates the TLS tests give it (a CA of the
//! test's own and the server certificates it signs, made with rcgen).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A directory of the test's own, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty directory for `name` under the system's temporary directory.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("blocklab-load-nginx-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `contents` to the file `name` in it.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA of the test's own, and server certificates it signs.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    /// A new CA.
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "blocklab test CA");
        Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    /// Its certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names`, valid from `from` to `until` (years),
    /// and its key, both PEM.
    pub fn server(&self, names: &[&str], (from, until): (i32, i32)) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(until, 1, 1);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Valid from 2020 to 4000.
pub const VALID: (i32, i32) = (2020, 4000);

/// nginx serving `return 200 "works"` (over TLS with a certificate, or
/// plaintext; HTTP/1.1, or HTTP/2 with `http2`), as the test's child.
pub struct Nginx {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Nginx {
    /// nginx over TLS with `cert` (certificate and key, PEM), HTTP/1.1.
    pub fn start(name: &str, cert: (String, String)) -> Option<Nginx> {
        Nginx::start_with(name, Some(cert), false, 100_000)
    }

    /// nginx over TLS with `cert`, or plaintext without; `http2` turns HTTP/2
    /// on (over TLS with ALPN h2; over plaintext, h2c with prior knowledge
    /// only, as nginx does: an HTTP/1.1 request is refused); after
    /// `keepalive_requests` requests nginx ends a connection (HTTP/2: a GOAWAY).
    pub fn start_with(
        name: &str,
        cert: Option<(String, String)>,
        http2: bool,
        keepalive_requests: u32,
    ) -> Option<Nginx> {
        let nginx = Path::new("/usr/sbin/nginx");
        if !nginx.exists() {
            let why = "nginx is not installed (apt-get install nginx-light; scripts/test does it)";
            // A skip only when asked for: these tests need no service a developer must start.
            assert!(
                std::env::var("BLOCKLAB_SKIP_NGINX").is_ok_and(|v| v == "1"),
                "{why}; BLOCKLAB_SKIP_NGINX=1 skips these tests"
            );
            super::skip(why);
            return None;
        }
        let dir = TempDir::new(name);
        let tls = match cert {
            Some((cert, key)) => format!(
                " ssl;\n    ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_certificate {};\n    ssl_certificate_key {}",
                dir.write("server.pem", &cert).display(),
                dir.write("server.key", &key).display()
            ),
            None => String::new(),
        };
        // nginx 1.22 (Debian 12): `listen ... http2`, not 1.25's `http2 on;`.
        let http2 = if http2 { " http2" } else { "" };
        // nginx takes its port from its configuration: a port the system picked a moment ago,
        // tried again with another when nginx could not bind it.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let root = dir.0.display();
            let conf = dir.write(
                "nginx.conf",
                &format!(
                    "daemon off;\nmaster_process off;\nworker_processes 1;\npid {root}/nginx.pid;\n\
                     error_log {root}/error.log;\nevents {{ worker_connections 256; }}\n\
                     http {{\n  access_log off;\n  client_body_temp_path {root};\n  proxy_temp_path {root};\n\
                     fastcgi_temp_path {root};\n  uwsgi_temp_path {root};\n  scgi_temp_path {root};\n\
                     keepalive_requests {keepalive_requests};\n\
                     server {{\n    listen 127.0.0.1:{port}{http2}{tls};\n\
                     location / {{ return 200 \"works\"; }}\n  }}\n}}\n"
                ),
            );
            let mut child = Command::new(nginx)
                .args(["-c", conf.to_str().unwrap(), "-p", root.to_string().as_str(), "-e"])
                .arg(dir.0.join("error.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if child.try_wait().unwrap().is_some() {
                    break; // it could not bind: another port
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Nginx { child, port, _dir: dir });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "nginx did not start: {}",
            std::fs::read_to_string(dir.0.join("error.log")).unwrap_or_default()
        );
    }

    /// `https://HOST:PORT/`.
    pub fn url(&self, host: &str) -> String {
        format!("https://{host}:{}/", self.port)
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn plain_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
