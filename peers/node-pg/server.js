// node-pg: study 1 in Node.js on PostgreSQL: Node's own http server, one event loop
// for everything, reading through node-postgres (pg) and its Pool.
//
//   node server.js [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N]
//
// - /getDataAsync: pool.query awaited on the event loop. pg's client is non-blocking:
//   the loop sends the query and serves other requests until the answer comes (or, when
//   every pooled connection is lent, until one is returned).
// - /getDataAsync2: two reads in sequence, the second started when the first
//   completes; answers the second.
// - /test: "works".
// Node has no blocking PostgreSQL client to hold the loop with, and no thread pool to
// move one to, so there is no /getData and no /getDataSpawnBlocking.
//
// Every read is `SELECT id, name, code, mime_type, content_type, body FROM content
// WHERE id = $1`, a named prepared statement (pg prepares it once per connection), of
// the id ?id= names or a random one from 1 to --nodes, answered as
// {"id":…,"name":…,"code":…,"mimeType":…,"contentType":…,"body":…}; 400 for an id
// that is not an integer from 1 to --nodes, 404 for a row that is not there, 503 when
// PostgreSQL cannot be reached or refuses, 500 otherwise.
//
// The pool connects lazily (the server starts, and answers 503, without a database),
// each connection within 3 s, and holds at most --pool connections (default: pg's own,
// 10). The user comes from the URL, else PGUSER (default postgres); the password only
// from PGPASSWORD (a command line is public: a --db carrying one is refused, and no
// message quotes it). Each connection's application_name is "node-pg". Prints
// "listening on http://HOST:PORT" once it accepts (port 0 picks a free one; the line
// gives the real port); on SIGTERM closes every connection and exits 0. The http
// module's defaults otherwise (keep-alive 5 s, no connection limit).
'use strict';

const http = require('node:http');
const pg = require('pg'); // from OUT/node_modules, through NODE_PATH (peers/node-pg/run)

const NAME = 'node-pg';
const USAGE = `usage: ${NAME} [--listen HOST:PORT] [--db postgres://[USER@]HOST:PORT/DATABASE] [--nodes N] [--pool N]`;
const QUERY = 'SELECT id, name, code, mime_type, content_type, body FROM content WHERE id = $1';
const CONNECT_TIMEOUT_MS = 3000;
// Statuses that mean PostgreSQL refused the connection rather than failed the query.
const REFUSED_SQLSTATE = /^(08|28|57P)|^53300$|^3D000$/;
// Socket errors that mean PostgreSQL could not be reached or dropped the connection.
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
]);
const UNREACHABLE_MESSAGES = /^(timeout expired|Connection terminated|Client has encountered a connection error)/;

/** A request answered with an error: its status and public message. */
class Problem extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * pg's client with a connect timeout of its own. pg's Pool option of that name
 * (connectionTimeoutMillis) would also bound the wait for a free pooled connection,
 * which under load is the queue being measured; the client's bounds the connect only.
 */
class ConnectBoundedClient extends pg.Client {
  constructor(config) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
}

function fail(message) {
  process.stderr.write(`${NAME}: ${message}\n`);
  process.exit(2);
}

/** `text` with everything between a URL's :// and its last @ (a user and a password) replaced by ***. */
function redacted(text) {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const scheme = text.indexOf('://');
  const start = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  return `${text.slice(0, start)}***${text.slice(at)}`;
}

/** The validated command line; one line on stderr and exit 2 on a bad one. */
function parseArgs(args) {
  const values = {
    '--listen': '127.0.0.1:8080',
    '--db': 'postgres://127.0.0.1:5432/blocklab',
    '--nodes': '10000',
    '--pool': '',
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') {
      console.log(USAGE);
      process.exit(0);
    }
    const eq = arg.indexOf('=');
    const key = eq < 0 ? arg : arg.slice(0, eq);
    if (!(key in values)) fail(`unexpected argument '${redacted(arg)}' (${USAGE})`);
    if (eq < 0) {
      if (i + 1 >= args.length) fail(`${key} needs a value`);
      values[key] = args[++i];
    } else {
      values[key] = arg.slice(eq + 1);
    }
  }

  const listen = values['--listen'];
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = listen.slice(colon + 1);
  if (colon <= 0 || !host || !/^[0-9]{1,5}$/.test(port) || Number(port) > 65535) {
    fail(`--listen takes HOST:PORT, got '${listen}'`);
  }

  const raw = values['--db'];
  const shape = `--db takes postgres://[USER@]HOST:PORT/DATABASE, got '${redacted(raw)}'`;
  const scheme = raw.indexOf('://');
  const at = raw.lastIndexOf('@');
  if (scheme >= 0 && at > scheme && raw.slice(scheme + 3, at).includes(':')) {
    fail(`--db carries a password: give it as PGPASSWORD in the environment, never on the command line (got '${redacted(raw)}')`);
  }
  let db;
  try {
    db = new URL(raw);
  } catch {
    fail(shape);
  }
  const database = decodeURIComponent(db.pathname.replace(/^\//, ''));
  if (!['postgres:', 'postgresql:'].includes(db.protocol) || !db.hostname || !/^[0-9]{1,5}$/.test(db.port) ||
      Number(db.port) < 1 || Number(db.port) > 65535 || database.includes('/') || db.search || db.hash) {
    fail(shape);
  }

  const nodes = values['--nodes'];
  if (!/^[0-9]+$/.test(nodes) || !Number.isSafeInteger(Number(nodes)) || Number(nodes) < 1) {
    fail(`--nodes takes a positive integer, got '${nodes}'`);
  }
  const pool = values['--pool'];
  if (pool !== '' && (!/^[0-9]+$/.test(pool) || Number(pool) < 1 || Number(pool) > 100000)) {
    fail(`--pool takes a positive integer, got '${pool}'`);
  }

  const user = decodeURIComponent(db.username) || process.env.PGUSER || 'postgres';
  return {
    host,
    port: Number(port),
    nodes: Number(nodes),
    db: {
      host: db.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: Number(db.port),
      user,
      database: database || user, // libpq's default
    },
    pool: pool === '' ? undefined : Number(pool),
  };
}

/** ?id=N when given (an integer from 1 to nodes), else a random id in 1..=nodes. */
function requestedId(searchParams, nodes) {
  if (!searchParams.has('id')) return 1 + Math.floor(Math.random() * nodes);
  const raw = searchParams.get('id');
  const text = raw.trim();
  const id = /^[+-]?[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id) || id < 1 || id > nodes) {
    throw new Problem(400, `id must be an integer from 1 to ${nodes}, got '${raw.slice(0, 40)}'`);
  }
  return id;
}

/** Whether `error` means PostgreSQL could not be reached, dropped the connection or refused it. */
function unavailable(error) {
  if (error instanceof pg.DatabaseError) return REFUSED_SQLSTATE.test(error.code || '');
  return UNREACHABLE_CODES.has(error.code) || UNREACHABLE_MESSAGES.test(error.message) ||
    (error.cause instanceof Error && unavailable(error.cause));
}

/** The one read: a pooled connection (waiting while all are lent), the prepared statement, the row. */
async function read(pool, id) {
  let result;
  try {
    result = await pool.query({ name: 'content-by-id', text: QUERY, values: [id] });
  } catch (error) {
    if (unavailable(error)) throw new Problem(503, `database unavailable: ${String(error.message).slice(0, 200)}`);
    process.stderr.write(`${NAME}: query failed: ${error.message}\n`);
    throw new Problem(500, 'database query failed');
  }
  if (result.rows.length === 0) throw new Problem(404, `no content row with id ${id}`);
  const row = result.rows[0];
  // bigint arrives as a string (pg's default for int8): a number again here.
  return {
    id: Number(row.id),
    name: row.name,
    code: row.code,
    mimeType: row.mime_type,
    contentType: row.content_type,
    body: row.body,
  };
}

function answer(response, status, contentType, body) {
  response.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  response.end(body);
}

function makeHandler(pool, nodes) {
  return async function handle(request, response) {
    const url = new URL(request.url, 'http://peer');
    const path = url.pathname;
    if (request.method !== 'GET' || !['/test', '/getDataAsync', '/getDataAsync2'].includes(path)) {
      answer(response, 404, 'text/plain; charset=utf-8', 'not found');
      return;
    }
    if (path === '/test') {
      answer(response, 200, 'text/plain; charset=utf-8', 'works');
      return;
    }
    try {
      const id = requestedId(url.searchParams, nodes);
      // Awaited: the loop serves other requests while PostgreSQL answers.
      let row = await read(pool, id);
      if (path === '/getDataAsync2') row = await read(pool, id);
      answer(response, 200, 'application/json', JSON.stringify(row));
    } catch (error) {
      const status = error instanceof Problem ? error.status : 500;
      const message = error instanceof Problem ? error.message : 'internal error';
      if (!(error instanceof Problem)) process.stderr.write(`${NAME}: ${error.stack || error}\n`);
      answer(response, status, 'application/json', JSON.stringify({ error: message }));
    }
  };
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  const pool = new pg.Pool({
    ...options.db,
    // Only from the environment: a function, so that pg never falls back to ~/.pgpass.
    password: () => process.env.PGPASSWORD ?? '',
    application_name: NAME,
    ...(options.pool === undefined ? {} : { max: options.pool }), // pg's default: 10
    Client: ConnectBoundedClient,
  });
  // An idle pooled connection that PostgreSQL drops: the pool discards it; say so once.
  let warned = false;
  pool.on('error', (error) => {
    if (!warned) process.stderr.write(`${NAME}: an idle connection failed: ${error.message}\n`);
    warned = true;
  });

  const server = http.createServer(makeHandler(pool, options.nodes));
  server.on('error', (e) => {
    process.stderr.write(`${NAME}: cannot listen on ${options.host}:${options.port}: ${e.message}\n`);
    process.exit(1);
  });
  server.listen(options.port, options.host, () => {
    const shown = options.host.includes(':') ? `[${options.host}]` : options.host;
    process.stdout.write(`listening on http://${shown}:${server.address().port}\n`);
  });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // Stop at once: the listener and every connection, even with requests in flight;
    // then close the pool's connections, waiting at most 2 s for those still lent.
    server.close();
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
    pool.end().then(() => process.exit(0), () => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
