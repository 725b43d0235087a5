"""What the bench scripts share: where the checkout and its binary are, a free
loopback port, waiting for a server to listen, a process's CPU time (of a running
one from /proc, of a finished one from its rusage), the load average, a self-signed
certificate, and the one-core nginx they measure against.

Imported as `from _common import ...` (a script's own folder is on Python's path).
"""

import os
import re
import shutil
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


def rusage_of(cmd, cpu, tmp):
    """Runs cmd pinned to `cpu`; returns (stdout, stderr, user+sys seconds, exit code): the
    kernel's rusage of the process once it has exited, so all its threads are counted."""
    out_path, err_path = os.path.join(tmp, "tool.out"), os.path.join(tmp, "tool.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(["taskset", "-c", str(cpu)] + cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f, open(err_path) as g:
        return f.read(), g.read(), usage.ru_utime + usage.ru_stime, proc.returncode


# wrk sends no User-Agent; blocklab sends `blocklab-load/VERSION` unless told not to. nginx
# does measurable work for one (it parses the field and searches it for six browser names:
# 1,340 more instructions per request under callgrind, 5 % of its user-space work for a
# keep-alive `return 200` over TLS), so beside wrk blocklab is given `-H 'User-Agent:'` and
# both send the same head; --with-user-agent runs its default head too.
SAME_HEAD_AS_WRK = ["-H", "User-Agent:"]


def add_run_options(parser):
    """The options the side-by-side scripts share: rounds, their length, connections, the two
    CPUs, and --blocklab, --before, --with-user-agent and --busy-poll (which blocklab runs: see
    `builds`)."""
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("-c", "--connections", type=int, default=100)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument("--blocklab", default=BLOCKLAB, help="the blocklab binary measured (default: %(default)s)")
    parser.add_argument("--before", metavar="BINARY",
                        help="another blocklab build (before a change), run as 'blocklab-before' in the same rounds")
    parser.add_argument("--with-user-agent", action="store_true",
                        help="also run blocklab with its default User-Agent, as 'blocklab+UA', in the same rounds")
    parser.add_argument("--busy-poll", action="store_true",
                        help="also run blocklab with --busy-poll (its thread never sleeps, as wrk's at full rate), "
                             "as 'blocklab+busy', in the same rounds")


def nginx_binary():
    """nginx on the PATH or in /usr/sbin, or None."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def built(args):
    """Builds the checkout's release binary when it is the one measured and is missing."""
    if args.blocklab == BLOCKLAB and not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)


def builds(args):
    """(name, binary, extra flags) of each blocklab run the options ask for; the first is 'blocklab'."""
    found = [("blocklab", args.blocklab, SAME_HEAD_AS_WRK)]
    if args.before:
        found.append(("blocklab-before", args.before, SAME_HEAD_AS_WRK))
    if args.with_user_agent:
        found.append(("blocklab+UA", args.blocklab, []))
    if getattr(args, "busy_poll", False):
        found.append(("blocklab+busy", args.blocklab, SAME_HEAD_AS_WRK + ["--busy-poll"]))
    return found


def figures(read, out, err, code, label):
    """What `read(out)` finds in a tool's output (a tuple starting with requests/s and
    requests), or None after printing why: a tool that failed a round is reported, not hidden."""
    try:
        found = read(out)
        if not found[0] or not found[1]:
            raise ValueError("no figures in its output")
        return found
    except Exception as e:
        print(f"  {label}: could not read its output ({e}); exit {code}; stderr: {err.strip()[:200]}")
        return None


def number(pattern, text):
    """The number the first group of `pattern` matches in a tool's output, or None."""
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None



def certificate(tmp):
    """A self-signed server certificate for 127.0.0.1 (not a CA: rustls refuses a CA as a server's),
    made with the openssl CLI; returns the paths of the certificate and its key, PEM."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"],
                   check=True, capture_output=True)
    return cert, key



def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def now_and_load():
    """'load average 1.2 0.9 0.7 at 20:46:03 UTC': the conditions a figure was measured in."""
    return f"load average {loadavg()} at {time.strftime('%H:%M:%S', time.gmtime())} UTC"


def instructions_per_request(cmd, port, load, requests, tmp, cpu):
    """User-space instructions per request of the server `cmd` (listening on `port`), under
    callgrind, a figure the machine's noise does not move: `load(n)` sends n requests; 2,000
    to warm up, the counters zeroed, `requests` more, the total read from callgrind's dump."""
    out = os.path.join(tmp, f"callgrind.{port}")
    proc = subprocess.Popen(["taskset", "-c", str(cpu), "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p"]
                            + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
    try:
        wait_for(port, proc, timeout=300)
        load(2000)
        subprocess.run(["callgrind_control", "--zero", str(proc.pid)], capture_output=True, check=True)
        load(requests)
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], capture_output=True, check=True)
        dump = f"{out}.{proc.pid}.1"
        for _ in range(100):
            if os.path.exists(dump) and os.path.getsize(dump) > 0:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        with open(dump) as f:
            total = next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:")))
        return total / requests
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


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
