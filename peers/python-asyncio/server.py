"""python-asyncio: Python's non-blocking server for study 2.

uvicorn's asyncio event loop (one thread; uvloop and httptools, which uvicorn picks
when they are installed, as `uvicorn[standard]` installs them) under a plain ASGI
application: GET /delay?ms=N awaits asyncio.sleep (N from 0 to 600000, default 5000;
anything else is a 400) and answers {"success":true}; GET /test answers "works". While
a request waits, the loop serves the others: nothing blocks.

    server.py [--listen HOST:PORT]

Prints "listening on http://HOST:PORT" once it accepts (port 0 picks a free one; the
line gives the real port) and exits 0 on SIGTERM, closing the connections at once
(uvicorn waits at most a second for requests in flight). uvicorn's defaults otherwise
(backlog 2048, keep-alive 5 s, no connection limit); no access log.
"""

import asyncio
import signal
import socket
import sys
import urllib.parse

import uvicorn

NAME = "python-asyncio"
USAGE = f"usage: {NAME} [--listen HOST:PORT]   (port 0 picks a free one)"
DEFAULT_MS = 5000
MAX_MS = 600_000


async def app(scope, receive, send):
    """The ASGI application: /test and /delay."""
    if scope["type"] != "http":
        return  # lifespan is off; nothing else is served
    path, method = scope["path"], scope["method"]
    if method != "GET" or path not in ("/test", "/delay"):
        await answer(send, 404, "text/plain; charset=utf-8", b"not found")
        return
    if path == "/test":
        await answer(send, 200, "text/plain; charset=utf-8", b"works")
        return
    ms = delay_ms(scope["query_string"])
    if ms is None:
        body = f'{{"error":"ms must be an integer from 0 to {MAX_MS}"}}'.encode()
        await answer(send, 400, "application/json", body)
        return
    # The event loop is free while this request waits: a timer, no thread.
    await asyncio.sleep(ms / 1000)
    await answer(send, 200, "application/json", b'{"success":true}')


def delay_ms(query_string):
    """?ms= as an integer from 0 to MAX_MS (DEFAULT_MS when absent), None when bad."""
    values = urllib.parse.parse_qs(query_string.decode("latin-1"), keep_blank_values=True).get("ms")
    if values is None:
        return DEFAULT_MS
    text = values[0].strip()
    if not text.isascii() or not text.isdigit():
        return None
    ms = int(text)
    return ms if ms <= MAX_MS else None


async def answer(send, status, content_type, body):
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def listen_address(args):
    """(host, port) from the command line; exit 2 with one line on a bad one."""
    listen = "127.0.0.1:8080"
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        elif arg == "--listen" and i + 1 < len(args):
            listen = args[i + 1]
            i += 1
        elif arg.startswith("--listen="):
            listen = arg.removeprefix("--listen=")
        else:
            fail(f"unexpected argument '{arg}' ({USAGE})")
        i += 1
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        fail(f"--listen takes HOST:PORT, got '{listen}'")
    return host, int(port)


def fail(message):
    print(f"{NAME}: {message}", file=sys.stderr)
    sys.exit(2)


class Server(uvicorn.Server):
    """uvicorn's server, which says where it listens once it accepts."""

    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        if self.started:
            host, port = sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"listening on http://{shown}:{port}", flush=True)


def main():
    host, port = listen_address(sys.argv[1:])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        print(f"{NAME}: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        sys.exit(1)
    config = uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning",
                            timeout_graceful_shutdown=1)
    # uvicorn handles SIGTERM (stops serving, then raises it again once its own
    # handler is gone): this one makes that second SIGTERM, or one before uvicorn
    # is up, an exit with status 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
