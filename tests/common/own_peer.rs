//! A user's own peer, written by a test into a temporary folder outside the
//! checkout: a Python server of the standard library (no build), a thread
//! per request, whose `/delay` holds `hold` bytes while it waits. Variants of
//! it break one rule of the contract each. Dropping it removes the folder
//! and its build under `.local/peers/`.

use std::path::{Path, PathBuf};

/// The server, with the lines a variant replaces.
const SERVER: &str = r#"import http.server, signal, socketserver, sys, time, urllib.parse

HOLD = 0
args = sys.argv[1:]
listen = args[args.index("--listen") + 1] if "--listen" in args else "127.0.0.1:8080"
host, port = listen.rsplit(":", 1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *_):
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/test":
            return self.answer(200, "text/plain", b"works")
        if url.path == "/delay":
            ms = query.get("ms", ["5000"])[0]
            if not ms.isdigit() or int(ms) > 600000:
                return self.answer(400, "application/json", b'{"error":"bad ms"}')
            held = b"x" * HOLD
            time.sleep(int(ms) / 1000)  # WAIT
            return self.answer(200, "application/json", b'{"success":true}')
        if url.path == "/getDataAsync":
            wanted = query.get("id", ["1"])[0]
            if not wanted.isdigit() or not 1 <= int(wanted) <= int(args[args.index("--nodes") + 1]):
                return self.answer(400, "application/json", b'{"error":"bad id"}')
            node = int(wanted)  # NODE
            body = ('{"id":%d,"name":"resource%d","code":"test.lp.content.%d","mimeType":"application/pdf",'
                    '"contentType":"Resource","body":"body string"}' % (node, node, node))
            return self.answer(200, "application/json", body.encode())
        self.answer(404, "text/plain", b"not found")

    def answer(self, status, kind, body):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


server = Server((host, int(port)), Handler)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SIGTERM
print(f"listening on http://{host}:{server.server_address[1]}", flush=True)  # READY
server.serve_forever()
"#;

/// One peer folder in a temporary folder of its own.
pub struct OwnPeer {
    /// The folder that holds the peer's folder (what `--peers` may name too).
    pub parent: PathBuf,
    /// The peer's name, its folder's.
    pub name: String,
}

impl OwnPeer {
    /// A peer called `name-PID` serving `endpoints`, its server's marked lines
    /// replaced by `changes` (marker, new line), its manifest extended by `extra`.
    pub fn new(name: &str, endpoints: &str, changes: &[(&str, &str)], extra: &str) -> OwnPeer {
        let name = format!("{name}-{}", std::process::id());
        let parent = std::env::temp_dir().join(format!("blocklab-own-{name}"));
        let _ = std::fs::remove_dir_all(&parent);
        let dir = parent.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = SERVER.to_string();
        for (marker, line) in changes {
            let old = server.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("no {marker}"));
            let indent = &old[..old.len() - old.trim_start().len()];
            server = server.replace(old, &format!("{indent}{line}"));
        }
        std::fs::write(dir.join("server.py"), server).unwrap();
        // A study-1 server says which database it reads (its manifest's `db`).
        let db =
            if endpoints.contains("/getData") && !extra.contains("db = ") { "db = \"neo4j\"\n" } else { "" };
        std::fs::write(
            dir.join("peer.toml"),
            format!(
                "name = \"{name}\"\nkind = \"server\"\nruntime = \"python\"\n\
                 stands_for = \"a user's own server: Python's standard library, a thread per request\"\n\
                 versions = \"CPython 3\"\nneeds = \"python3\"\nendpoints = \"{endpoints}\"\n{db}{extra}"
            ),
        )
        .unwrap();
        std::fs::write(dir.join("README.md"), "A test's own server.\n").unwrap();
        executable(
            &dir.join("build"),
            "#!/bin/sh\n# nothing to build: server.py runs from its folder\nexit 0\n",
        );
        executable(
            &dir.join("run"),
            "#!/bin/sh\nHERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nshift\nexec python3 -u \"$HERE/server.py\" \"$@\"\n",
        );
        OwnPeer { parent, name }
    }

    /// The peer's folder.
    pub fn dir(&self) -> PathBuf {
        self.parent.join(&self.name)
    }
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let mut permissions = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(path, permissions).unwrap();
}

impl Drop for OwnPeer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.parent);
        let built = Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/peers").join(&self.name);
        let _ = std::fs::remove_dir_all(built);
    }
}
