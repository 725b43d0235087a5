"""python-pg: study 1 in Python, on PostgreSQL.

FastAPI on uvicorn's asyncio event loop (one thread; uvloop and httptools) with the
two drivers a Python service reads PostgreSQL with, each endpoint one execution model:

- /getData: psycopg 3, synchronous, called inside an `async def` handler. The handler
  runs on the event loop, so the loop waits for the whole round trip (and for a free
  connection of the pool) and serves no other request meanwhile: the seed's blocking
  /getData, and FastAPI's commonest performance bug, written on purpose.
- /getDataAsync: asyncpg, awaited: the loop serves others while it waits.
- /getDataAsync2: two asyncpg reads in sequence, the second started when the first
  completes; answers the second.
- /getDataSpawnBlocking: psycopg in a plain `def` handler, which Starlette runs on
  anyio's thread pool (40 threads by default) so that the loop stays free: Python's
  idiomatic fix, tokio's spawn_blocking.
- /test: "works".

Every read is `SELECT id, name, code, mime_type, content_type, body FROM content WHERE
id = $1`, parameterised (asyncpg prepares it, once per connection; psycopg binds it
server-side and prepares it after five runs on a connection), of the id `?id=` names
or a random one from 1 to --nodes, answered as
{"id":…,"name":…,"code":…,"mimeType":…,"contentType":…,"body":…}; 400 for a bad id, 404
for a row that is not there, 503 when the database cannot be reached or refuses, 500
otherwise.

    server.py [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N]

Prints "listening on http://HOST:PORT" once it accepts (port 0 picks a free one; the
line gives the real port) and exits 0 on SIGTERM.

The pools: asyncpg's (create_pool) and psycopg_pool's ConnectionPool, each at its
library's default largest size (asyncpg 10, psycopg_pool 4) unless --pool sets both.
Both open connections on demand, from none: the server starts, and answers 503, without
a database. A read waits at most CONNECT_TIMEOUT for a new connection, and psycopg's at
most that for a free one (psycopg_pool's own default is 30 s), so that a read without a
database answers 503 in seconds. Every connection says application_name = "python-pg".
The user comes from the URL, else PGUSER (default postgres); the password only from
PGPASSWORD (none set: no password): a command line is public (`ps`), so a --db that
carries a password is refused, and no message quotes one.
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

import asyncpg
import fastapi
import psycopg
import psycopg.conninfo
import psycopg_pool
import uvicorn
from fastapi.responses import JSONResponse, PlainTextResponse, Response

NAME = "python-pg"
USAGE = (f"usage: {NAME} [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] "
         "[--nodes N] [--pool N]")
COLUMNS = "id, name, code, mime_type, content_type, body"
QUERY_ASYNCPG = f"SELECT {COLUMNS} FROM content WHERE id = $1"
QUERY_PSYCOPG = f"SELECT {COLUMNS} FROM content WHERE id = %s"  # sent as $1, bound server-side
# The columns answered, in blocklab's order: (JSON key, type).
FIELDS = (("id", int), ("name", str), ("code", str), ("mimeType", str), ("contentType", str), ("body", str))
ASYNCPG_POOL = 10  # asyncpg.create_pool's max_size default
PSYCOPG_POOL = 4  # psycopg_pool.ConnectionPool's default (min_size 4, max_size = min_size)
CONNECT_TIMEOUT = 5  # seconds, for a new connection and for psycopg's wait for a free one
# SQLSTATE classes that mean the database cannot be reached or refuses us: connection
# exceptions, authorization, no such database, too many connections/out of resources,
# shutting down or starting up.
UNAVAILABLE_CLASSES = ("08", "28", "3D", "53", "57")


class Problem(Exception):
    """A request answered with an error: its status and public message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Target:
    """Where the database is and who we are there: host, port, database, user, password."""

    def __init__(self, host, port, database, user):
        self.host, self.port, self.database, self.user = host, port, database, user
        self.password = os.environ.get("PGPASSWORD")

    def __str__(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgres://{self.user}@{host}:{self.port}/{self.database}"


class Database:
    """The two pools of one PostgreSQL, and the one read made with each."""

    def __init__(self, target, pool):
        self.target = target
        self.pool = pool
        conninfo = psycopg.conninfo.make_conninfo(
            host=target.host, port=target.port, dbname=target.database, user=target.user,
            application_name=NAME, connect_timeout=CONNECT_TIMEOUT,
            **({"password": target.password} if target.password is not None else {}))
        # min_size 0: no connection until a read asks for one (psycopg_pool's default
        # min_size is its max_size, all opened at start). autocommit, as asyncpg's and
        # JDBC's defaults: a read is one round trip, not BEGIN, SELECT and COMMIT.
        self.sync = psycopg_pool.ConnectionPool(
            conninfo, min_size=0, max_size=pool or PSYCOPG_POOL, open=False, name=NAME,
            timeout=CONNECT_TIMEOUT, kwargs={"autocommit": True})
        self.async_ = None  # made on the event loop, at startup

    def open_sync(self):
        self.sync.open()

    async def open_async(self):
        # min_size 0 (asyncpg's default is max_size, all opened at start): the pool
        # connects as reads come, so it starts without a database.
        self.async_ = await asyncpg.create_pool(
            host=self.target.host, port=self.target.port, database=self.target.database,
            user=self.target.user, password=self.target.password, min_size=0,
            max_size=self.pool or ASYNCPG_POOL, timeout=CONNECT_TIMEOUT,
            server_settings={"application_name": NAME})

    async def close(self):
        if self.async_ is not None:
            try:
                await asyncio.wait_for(self.async_.close(), 2)
            except Exception:  # a timeout included: end what is left at once
                self.async_.terminate()
        self.sync.close(timeout=2)

    def read_blocking(self, row_id):
        """The psycopg read: the calling thread waits for a connection and the round trip."""
        try:
            with self.sync.connection() as conn:
                rows = conn.execute(QUERY_PSYCOPG, (row_id,)).fetchall()
        except Exception as e:
            raise self.failure(e) from e
        return content(row_id, rows)

    async def read(self, row_id):
        """The asyncpg read: the event loop is free until the answer comes."""
        try:
            rows = await self.async_.fetch(QUERY_ASYNCPG, row_id)
        except Exception as e:
            raise self.failure(e) from e
        return content(row_id, [tuple(row) for row in rows])

    def failure(self, error):
        if unavailable(error):
            return Problem(503, f"database unavailable: {self.target}: {one_line(error)}")
        print(f"{NAME}: query failed: {one_line(error)} ({type(error).__name__})", file=sys.stderr)
        return Problem(500, "database query failed")


def unavailable(error):
    """Whether `error` says the database cannot be reached or refuses us (503), not that
    the read itself went wrong (500)."""
    if isinstance(error, (OSError, asyncio.TimeoutError, psycopg_pool.PoolTimeout,
                          asyncpg.exceptions.ConnectionDoesNotExistError)):
        return True
    state = getattr(error, "sqlstate", None)
    if state:
        return state[:2] in UNAVAILABLE_CLASSES
    # psycopg's OperationalError without a SQLSTATE: libpq could not connect, or
    # lost the connection.
    return isinstance(error, psycopg.OperationalError)


def one_line(error):
    text = " ".join(str(error).split()) or type(error).__name__
    return redacted(text)[:200]


def redacted(text):
    """`text` with everything between a URL's :// and its last @ (a user and a password, even
    one holding a '/' or a space) replaced by ***; without a scheme, everything before the last @."""
    at = text.rfind("@")
    if at < 0:
        return text
    scheme = text.find("://")
    start = scheme + 3 if 0 <= scheme < at else 0
    return text[:start] + "***" + text[at:]


def content(row_id, rows):
    """The row as blocklab answers it, or the Problem of a missing or odd row."""
    if not rows:
        raise Problem(404, f"no content row with id {row_id}")
    if len(rows) > 1:
        print(f"{NAME}: {len(rows)} rows with id {row_id}", file=sys.stderr)
        raise Problem(500, "database query failed")
    row = rows[0]
    answer = {}
    for (key, kind), value in zip(FIELDS, row):
        if not isinstance(value, kind):
            print(f"{NAME}: malformed row {row_id}: {key} = {value!r}", file=sys.stderr)
            raise Problem(500, "database query failed")
        answer[key] = value
    return answer


def make_app(target, nodes, pool):
    """The FastAPI application over the PostgreSQL at `target`, whose ids run from 1 to
    `nodes`, with pools of at most `pool` connections each (None: each library's default)."""
    db = Database(target, pool)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        db.open_sync()
        await db.open_async()
        yield
        await db.close()

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
        row_id = int(raw)
        if not 1 <= row_id <= nodes:
            raise Problem(400, f"id {row_id} is out of range: ids run from 1 to {nodes}")
        return row_id

    @app.get("/test")
    async def test():
        return PlainTextResponse("works")

    @app.get("/getData")
    async def get_data(request: fastapi.Request):
        # The anti-pattern, on purpose: a synchronous psycopg call in an async def
        # handler holds the event loop, and with it every other request, until the
        # answer comes.
        return found(db.read_blocking(requested_id(request)))

    @app.get("/getDataAsync")
    async def get_data_async(request: fastapi.Request):
        return found(await db.read(requested_id(request)))

    @app.get("/getDataAsync2")
    async def get_data_async2(request: fastapi.Request):
        row_id = requested_id(request)
        await db.read(row_id)
        return found(await db.read(row_id))

    @app.get("/getDataSpawnBlocking")
    def get_data_spawn_blocking(request: fastapi.Request):
        # A plain def: Starlette runs it on anyio's thread pool, so psycopg blocks a
        # pool thread, never the event loop.
        return found(db.read_blocking(requested_id(request)))

    return app


def found(answer):
    body = json.dumps(answer, separators=(",", ":"), ensure_ascii=False)
    return Response(body, media_type="application/json")


def parse_args(args):
    """(host, port, target, nodes, pool) from the command line; exit 2 with one line on a bad one."""
    values = {"--listen": "127.0.0.1:9000", "--db": "postgres://127.0.0.1:5432/blocklab",
              "--nodes": "10000", "--pool": None}
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
    listen, nodes, pool = values["--listen"], values["--nodes"], values["--pool"]
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        fail(f"--listen takes HOST:PORT, got '{listen}'")
    if not nodes.isdigit() or int(nodes) < 1:
        fail(f"--nodes takes a positive integer, got '{nodes}'")
    if pool is not None and (not pool.isdigit() or int(pool) < 1):
        fail(f"--pool takes a positive integer, got '{pool}'")
    target = parse_db(values["--db"])
    return host, int(port), target, int(nodes), int(pool) if pool is not None else None


def parse_db(db):
    """The Target of postgres://[USER@]HOST:PORT/DATABASE; exit 2 on anything else."""
    shape = "postgres://[USER@]HOST:PORT/DATABASE"
    url = urllib.parse.urlsplit(db)
    userinfo = url.netloc.rpartition("@")[0] if "@" in url.netloc else None
    if userinfo is not None and ":" in userinfo:
        fail(f"--db takes {shape} with no password (give it as PGPASSWORD in the environment), "
             f"got '{redacted(db)}'")
    try:
        port = url.port
        valid = url.scheme in ("postgres", "postgresql") and url.hostname and port is not None
    except ValueError:
        valid = False
    database = urllib.parse.unquote(url.path.removeprefix("/"))
    if not valid or not database or "/" in database or url.query or url.fragment:
        fail(f"--db takes {shape}, got '{redacted(db)}'")
    user = urllib.parse.unquote(url.username) if url.username else os.environ.get("PGUSER") or "postgres"
    return Target(url.hostname, port, database, user)


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
    host, port, target, nodes, pool = parse_args(sys.argv[1:])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        print(f"{NAME}: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        sys.exit(1)
    config = uvicorn.Config(make_app(target, nodes, pool), lifespan="on", access_log=False,
                            log_level="warning", timeout_graceful_shutdown=1)
    # uvicorn handles SIGTERM (stops serving, then raises it again once its own
    # handler is gone): this one makes that second SIGTERM, or one before uvicorn
    # is up, an exit with status 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
