"""python-neo4j: study 1 in Python, on the seed's Neo4j.

FastAPI on uvicorn's asyncio event loop (one thread; uvloop and httptools) with the
official neo4j driver, its synchronous and its asynchronous API, each endpoint one
execution model:

- /getData: the synchronous driver called inside an `async def` handler. The handler
  runs on the event loop, so the loop waits for the whole round trip and serves no
  other request meanwhile: the seed's blocking /getData, and FastAPI's commonest
  performance bug, written on purpose.
- /getDataAsync: the async driver, awaited: the loop serves others while it waits.
- /getDataAsync2: two async reads in sequence, the second started when the first
  completes; answers the second.
- /getDataSpawnBlocking: the synchronous driver in a plain `def` handler, which
  FastAPI runs on its thread pool (anyio's, 40 threads by default) so that the loop
  stays free: Python's idiomatic fix, tokio's spawn_blocking.
- /test: "works".

Every read is blocklab's query, `MATCH (n:Content {id: $id}) RETURN n`, of the id `?id=`
names or a random one from 1 to --nodes, answered as the node's properties in JSON
(as blocklab and the Play peer answer it); 400 for a bad id, 404 for a node that is
not there, 503 when the database cannot be reached, 500 otherwise.

    server.py [--listen HOST:PORT] [--db bolt://HOST:PORT] [--nodes N]

Prints "listening on http://HOST:PORT" once it accepts (port 0 picks a free one; the
line gives the real port) and exits 0 on SIGTERM. The drivers connect lazily (the
server starts, and answers 503, without a database); each keeps its own pool of 100
connections (the driver's default, as the Play peer's Java driver). The database's user
and password come from the environment, NEO4J_USER (default neo4j) and NEO4J_PASSWORD
(none set: no authentication), as blocklab reads them: never from the command line, which
`ps` shows to anyone; a --db that carries them is refused, and no message quotes them.
"""

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import sys
import urllib.parse

import fastapi
import neo4j
import neo4j.exceptions
import uvicorn
from fastapi.responses import JSONResponse, PlainTextResponse, Response

NAME = "python-neo4j"
USAGE = f"usage: {NAME} [--listen HOST:PORT] [--db bolt://HOST:PORT] [--nodes N]"
QUERY = "MATCH (n:Content {id: $id}) RETURN n"
POOL = 100
# The properties answered, in blocklab's order.
PROPERTIES = (("id", int), ("name", str), ("code", str), ("mimeType", str), ("contentType", str), ("body", str))
UNAVAILABLE = (
    neo4j.exceptions.ServiceUnavailable,
    neo4j.exceptions.SessionExpired,
    neo4j.exceptions.TransientError,
    neo4j.exceptions.ConnectionPoolError,
    neo4j.exceptions.AuthError,
    OSError,
    asyncio.TimeoutError,
)


class Problem(Exception):
    """A request answered with an error: its status and public message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Graph:
    """The two drivers of one Neo4j, and the one read made with each."""

    def __init__(self, db):
        self.db = db
        self.sync = neo4j.GraphDatabase.driver(db, auth=auth_from_environment(), max_connection_pool_size=POOL)
        self.async_ = None  # made on the event loop, at startup

    def read_blocking(self, node_id):
        """The synchronous read: the calling thread waits for the whole round trip."""
        try:
            with self.sync.session() as session:
                records = list(session.run(QUERY, id=node_id))
        except Exception as e:
            raise self.failure(e) from e
        return content(node_id, records)

    async def read(self, node_id):
        """The asynchronous read: the event loop is free until the answer comes."""
        try:
            async with self.async_.session() as session:
                result = await session.run(QUERY, id=node_id)
                records = [record async for record in result]
        except Exception as e:
            raise self.failure(e) from e
        return content(node_id, records)

    def failure(self, error):
        if isinstance(error, UNAVAILABLE):
            return Problem(503, f"database unavailable: {self.db}: {str(error)[:200]}")
        print(f"{NAME}: query failed: {error!r}", file=sys.stderr)
        return Problem(500, "database query failed")


def auth_from_environment():
    """(user, password) from NEO4J_USER (default neo4j) and NEO4J_PASSWORD; None without a password."""
    password = os.environ.get("NEO4J_PASSWORD")
    if password is None:
        return None
    return (os.environ.get("NEO4J_USER", "neo4j"), password)


def redacted(text):
    """`text` with everything between a URL's :// and its last @ (a user and a password, even
    one holding a '/' or a space) replaced by ***; without a scheme, everything before the last @."""
    at = text.rfind("@")
    if at < 0:
        return text
    scheme = text.find("://")
    start = scheme + 3 if 0 <= scheme < at else 0
    return text[:start] + "***" + text[at:]


def content(node_id, records):
    """The node's properties as blocklab answers them, or the Problem of a missing or odd node."""
    if not records:
        raise Problem(404, f"no Content node with id {node_id}")
    if len(records) > 1:
        print(f"{NAME}: {len(records)} nodes with id {node_id}", file=sys.stderr)
        raise Problem(500, "database query failed")
    node = records[0]["n"]
    answer = {}
    for key, kind in PROPERTIES:
        value = node.get(key)
        if not isinstance(value, kind):
            print(f"{NAME}: malformed node {node_id}: {key} = {value!r}", file=sys.stderr)
            raise Problem(500, "database query failed")
        answer[key] = value
    return answer


def make_app(db, nodes):
    """The FastAPI application over the Neo4j at `db`, whose ids run from 1 to `nodes`."""
    graph = Graph(db)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        graph.async_ = neo4j.AsyncGraphDatabase.driver(db, auth=auth_from_environment(),
                                                       max_connection_pool_size=POOL)
        yield
        await graph.async_.close()
        graph.sync.close()

    app = fastapi.FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)

    @app.exception_handler(Problem)
    async def problem(_request, error):
        return JSONResponse({"error": error.message}, status_code=error.status)

    def requested_id(request):
        """?id=N if given (an integer from 1 to nodes), else a random id in 1..=nodes."""
        raw = request.query_params.get("id")
        if raw is None:
            return random.randint(1, nodes)
        if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
            raise Problem(400, f"id must be an integer from 1 to {nodes}, got '{raw[:40]}'")
        node_id = int(raw)
        if not 1 <= node_id <= nodes:
            raise Problem(400, f"id {node_id} is out of range: ids run from 1 to {nodes}")
        return node_id

    @app.get("/test")
    async def test():
        return PlainTextResponse("works")

    @app.get("/getData")
    async def get_data(request: fastapi.Request):
        # The anti-pattern, on purpose: a synchronous call in an async def handler
        # holds the event loop, and with it every other request, for the round trip.
        return found(graph.read_blocking(requested_id(request)))

    @app.get("/getDataAsync")
    async def get_data_async(request: fastapi.Request):
        return found(await graph.read(requested_id(request)))

    @app.get("/getDataAsync2")
    async def get_data_async2(request: fastapi.Request):
        node_id = requested_id(request)
        await graph.read(node_id)
        return found(await graph.read(node_id))

    @app.get("/getDataSpawnBlocking")
    def get_data_spawn_blocking(request: fastapi.Request):
        # A plain def: FastAPI runs it on its thread pool, so the synchronous
        # driver blocks a pool thread, never the event loop.
        return found(graph.read_blocking(requested_id(request)))

    return app


def found(answer):
    body = json.dumps(answer, separators=(",", ":"), ensure_ascii=False)
    return Response(body, media_type="application/json")


def parse_args(args):
    """(host, port, db, nodes) from the command line; exit 2 with one line on a bad one."""
    values = {"--listen": "127.0.0.1:9000", "--db": "bolt://127.0.0.1:7687", "--nodes": "10000"}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        name, eq, value = arg.partition("=")
        if name not in values:
            fail(f"unknown argument '{redacted(arg)}' ({USAGE})")
        if not eq:
            if i + 1 >= len(args):
                fail(f"{name} needs a value")
            value = args[i + 1]
            i += 1
        values[name] = value
        i += 1
    listen, db, nodes = values["--listen"], values["--db"], values["--nodes"]
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        fail(f"--listen takes HOST:PORT, got '{listen}'")
    if "@" in db:
        fail(f"--db takes bolt://HOST:PORT with no user or password (give them as NEO4J_USER and "
             f"NEO4J_PASSWORD in the environment), got '{redacted(db)}'")
    url = urllib.parse.urlsplit(db)
    try:
        valid = url.scheme == "bolt" and url.hostname and url.port is not None
    except ValueError:
        valid = False
    if not valid or url.username or url.path or url.query:
        fail(f"--db takes bolt://HOST:PORT, got '{db}'")
    if not nodes.isdigit() or int(nodes) < 1:
        fail(f"--nodes takes a positive integer, got '{nodes}'")
    return host, int(port), db, int(nodes)


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
    host, port, db, nodes = parse_args(sys.argv[1:])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        print(f"{NAME}: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        sys.exit(1)
    config = uvicorn.Config(make_app(db, nodes), lifespan="on", access_log=False, log_level="warning",
                            timeout_graceful_shutdown=1)
    # uvicorn handles SIGTERM (stops serving, then raises it again once its own
    # handler is gone): this one makes that second SIGTERM, or one before uvicorn
    # is up, an exit with status 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
