//! `blocklab load` over `https://` against real servers: nginx with
//! certificates made here (a CA of the test's own, a server certificate it
//! signed, an expired one, one for another name), and servers of the test's
//! own that misbehave (plaintext on an `https://` URL, a handshake never
//! answered). Handshakes are counted apart from requests, and each failure
//! is its own kind, never a hang.
//!
//! nginx runs as the test's child (one process, `master_process off`) with
//! its configuration in a directory of the test's own, and is killed by pid
//! when the test ends. Without nginx (`/usr/sbin/nginx`), the nginx tests
//! fail unless `BLOCKLAB_SKIP_NGINX=1`: `scripts/test` installs it.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use blocklab::cli::{Cli, Command as BlocklabCommand};
use blocklab::load::{self, ErrorKind};
use clap::Parser;

use common::nginx::{Ca, Nginx, TempDir, VALID};
use common::{load_errors as errors, load_plan as plan, load_run as run};
#[test]
fn keep_alive_makes_one_handshake_per_connection_and_each_request_one_without() {
    let ca = Ca::new();
    let dir = TempDir::new("roots");
    let roots = dir.write("ca.pem", &ca.pem());
    let Some(nginx) = Nginx::start("keepalive", ca.server(&["localhost", "127.0.0.1"], VALID)) else {
        return;
    };
    let url = nginx.url("127.0.0.1");
    let cacert = roots.to_str().unwrap();

    let kept = run(&["-k", "-c", "4", "-n", "2000", "--cacert", cacert, &url]);
    let s = &kept.stats;
    assert_eq!((s.ok, s.error_total()), (2000, 0), "{:?}", s.tls_first_error);
    assert_eq!(s.handshake.len(), s.connections_opened, "one handshake per connection");
    assert!((4..=8).contains(&s.connections_opened), "{} connections for 4", s.connections_opened);
    assert!(s.tls_session.as_deref().is_some_and(|t| t.contains("ALPN http/1.1")), "{:?}", s.tls_session);

    let closed = run(&["-c", "4", "-n", "200", "--cacert", cacert, &url]);
    let s = &closed.stats;
    assert_eq!((s.ok, s.error_total()), (200, 0));
    assert_eq!(s.handshake.len(), 200, "one handshake per request without keep-alive");
    assert_eq!(s.connections_opened, 200);
    // The client's session cache: later connections resume (no certificate exchanged).
    assert!(s.resumed > 0 && s.resumed < 200, "{} resumed", s.resumed);

    // The JSON and the text say the same, and the document matches its schema.
    let report =
        load::report::LoadReport::new(&plan(&["-c", "4", "-n", "200", "--cacert", cacert, &url]), &closed);
    let tls = report.tls.as_ref().unwrap();
    assert_eq!((tls.handshakes, tls.resumed), (200, s.resumed));
    assert!(tls.handshake_ms.p50 > 0.0 && tls.handshake_ms.p99 >= tls.handshake_ms.p50);
    common::validate_schema("schema/load-result.json", &serde_json::to_value(&report).unwrap());
    let text =
        load::report::text(&plan(&["-c", "4", "-n", "200", "--cacert", cacert, &url]), &closed, &report);
    assert!(text.contains(&format!("TLS handshakes:         200 ({} resumed)", s.resumed)), "{text}");

    // A connection that resumes gets a ticket back for its next handshake, so past the first
    // handshake of each connection every one resumes: at most one full handshake per
    // connection (a cache of 8 tickets for 50 connections made 51 to 111 here).
    let many = run(&["-c", "50", "-n", "1000", "--cacert", cacert, &url]);
    assert_eq!(many.stats.ok, 1000);
    assert!(
        many.stats.resumed >= 950,
        "{} of 1000 handshakes resumed over 50 connections",
        many.stats.resumed
    );

    // --insecure needs no roots; the name is the URL's (localhost is in the certificate).
    let insecure = run(&["-k", "-c", "1", "-n", "10", "--insecure", &nginx.url("localhost")]);
    assert_eq!(insecure.stats.ok, 10);
}

#[test]
fn certificate_failures_are_counted_by_their_reason() {
    let ca = Ca::new();
    let dir = TempDir::new("reasons");
    let roots = dir.write("ca.pem", &ca.pem());
    let cacert = roots.to_str().unwrap();
    let cases = [
        ("wrong-name", ca.server(&["other.example"], VALID), Some(cacert), ErrorKind::TlsNameMismatch),
        ("expired", ca.server(&["127.0.0.1"], (2020, 2021)), Some(cacert), ErrorKind::TlsExpired),
        ("unknown-issuer", ca.server(&["127.0.0.1"], VALID), None, ErrorKind::TlsUnknownIssuer),
    ];
    for (name, cert, cacert, kind) in cases {
        let Some(nginx) = Nginx::start(name, cert) else { return };
        let url = nginx.url("127.0.0.1");
        let mut args = vec!["-k", "-c", "2", "-n", "6", "--timeout", "5s"];
        if let Some(file) = cacert {
            args.extend(["--cacert", file]);
        }
        args.push(&url);
        let result = run(&args);
        assert_eq!(errors(&result, kind), 6, "{name}: {:?}", result.stats.errors);
        assert_eq!(result.stats.handshake.len(), 0, "{name}");
        let reason = result.stats.tls_first_error.clone().unwrap_or_default();
        assert!(reason.contains("certificate"), "{name}: {reason}");
        // --insecure gets through the same server.
        assert_eq!(run(&["-k", "-c", "1", "-n", "3", "--insecure", &url]).stats.ok, 3, "{name}");
    }
}

#[test]
fn a_plaintext_server_on_an_https_url_is_a_protocol_error() {
    let server = common::TestServer::start(common::behaviour(|_, _| (Duration::ZERO, Some(200))));
    let url = format!("https://{}/", server.addr);
    let started = Instant::now();
    let result = run(&["-k", "-c", "2", "-n", "6", "--timeout", "30s", "--insecure", &url]);
    assert_eq!(errors(&result, ErrorKind::TlsProtocol), 6, "{:?}", result.stats.errors);
    assert!(started.elapsed() < Duration::from_secs(15), "no waiting for the timeout");
}

#[test]
fn a_handshake_never_answered_times_out_without_a_hang() {
    // Accepts, reads the ClientHello and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let result =
        run(&["-k", "-c", "2", "-n", "4", "--timeout", "500ms", "--insecure", &format!("https://{addr}/")]);
    assert_eq!(errors(&result, ErrorKind::TlsHandshakeTimeout), 4, "{:?}", result.stats.errors);
    // Two connections, two handshakes each in turn, 0.5 s each.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn bad_tls_options_are_usage_errors() {
    let dir = TempDir::new("usage");
    let empty = dir.write("empty.pem", "");
    let argv = |extra: &[&str]| {
        let args = ["blocklab", "load"].iter().chain(extra).copied().collect::<Vec<_>>();
        match Cli::try_parse_from(args).unwrap().command {
            BlocklabCommand::Load(l) => l.plan().map(|_| ()),
            _ => unreachable!(),
        }
    };
    let e = argv(&["--cacert", empty.to_str().unwrap(), "https://127.0.0.1:1/"]).unwrap_err();
    assert!(e.contains("no certificate"), "{e}");
    let e = argv(&["--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:1/"]).unwrap_err();
    assert!(e.contains("cannot read --cacert"), "{e}");
    assert!(Cli::try_parse_from(["blocklab", "load", "--insecure", "--cacert", "x", "https://h/"]).is_err());
}
