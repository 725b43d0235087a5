"""What the bench scripts share: where the checkout and its binary are, a free
loopback port, waiting for a server to listen, a process's CPU time (live from
/proc, or at its end from the kernel's rusage), the load average, a self-signed
certificate, and the one-core nginx they measure against.

Imported as `from _common import ...` (a script's own folder is on Python's path).
"""

import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKLAB = os.environ.get("BLOCKLAB") or os.path.join(ROOT, "target", "release", "blocklab")
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, proc=None, timeout=60):
    """Waits until 127.0.0.1:PORT accepts; exits the script if `proc` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            sys.exit(f"the server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listened on port {port} within {timeout} s")


def cpu_seconds(pid):
    """user + system time of the whole process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def number(pattern, text):
    """The number the first group of `pattern` matches in a tool's output, or None."""
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def rusage_of(cmd, cpu, tmp):
    """Runs cmd pinned to `cpu`; returns (stdout, stderr, user+sys seconds of it and its threads, exit code)."""
    out_path, err_path = os.path.join(tmp, "tool.out"), os.path.join(tmp, "tool.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(["taskset", "-c", str(cpu)] + cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f, open(err_path) as g:
        return f.read(), g.read(), usage.ru_utime + usage.ru_stime, proc.returncode


def certificate(tmp):
    """A self-signed server certificate for 127.0.0.1 (not a CA: rustls refuses a CA as a server's),
    made with the openssl CLI; returns the paths of the certificate and its key, PEM."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"],
                   check=True, capture_output=True)
    return cert, key


def nginx_config(tmp, port, server_extra="", http_extra="", listen_extra=""):
    """Writes the config of a one-worker nginx answering "works" on every path
    of 127.0.0.1:PORT (keep-alive unbounded, no access log); returns its path.
    `server_extra` and `http_extra` add lines (TLS, HTTP/2) to those blocks,
    `listen_extra` words to the listen line (nginx 1.22: `ssl`, `http2`)."""
    conf = os.path.join(tmp, f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
daemon off;
master_process off;
pid {tmp}/nginx-{port}.pid;
error_log {tmp}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    {http_extra}
    server {{
        listen 127.0.0.1:{port}{" " + listen_extra if listen_extra else ""};
        {server_extra}
        location / {{ return 200 "works"; }}
    }}
}}
""")
    return conf
