// node: Node.js's own http server for study 2, one event loop for everything.
//
//   node server.js [--listen HOST:PORT]
//
// GET /delay?ms=N answers {"success":true} from a setTimeout timer after N ms (0 to
// 600000, default 5000; anything else is a 400): the loop serves other requests
// meanwhile, nothing blocks. GET /test answers "works". Prints
// "listening on http://HOST:PORT" once it accepts (port 0 picks a free one; the line
// gives the real port); on SIGTERM closes every connection and exits 0. The http
// module's defaults otherwise (keep-alive 5 s, no connection limit).
'use strict';

const http = require('node:http');

const NAME = 'node';
const USAGE = `usage: ${NAME} [--listen HOST:PORT]   (port 0 picks a free one)`;
const DEFAULT_MS = 5000;
const MAX_MS = 600000;

function fail(message) {
  process.stderr.write(`${NAME}: ${message}\n`);
  process.exit(2);
}

function listenAddress(args) {
  let listen = '127.0.0.1:8080';
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') {
      console.log(USAGE);
      process.exit(0);
    } else if (arg === '--listen' && i + 1 < args.length) {
      listen = args[++i];
    } else if (arg.startsWith('--listen=')) {
      listen = arg.slice('--listen='.length);
    } else {
      fail(`unexpected argument '${arg}' (${USAGE})`);
    }
  }
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = listen.slice(colon + 1);
  if (colon <= 0 || !host || !/^[0-9]{1,5}$/.test(port) || Number(port) > 65535) {
    fail(`--listen takes HOST:PORT, got '${listen}'`);
  }
  return { host, port: Number(port) };
}

// ?ms= as an integer from 0 to MAX_MS (DEFAULT_MS when absent), null when bad.
function delayMs(searchParams) {
  if (!searchParams.has('ms')) return DEFAULT_MS;
  const text = searchParams.get('ms').trim();
  if (!/^[0-9]+$/.test(text)) return null;
  const ms = Number(text);
  return ms <= MAX_MS ? ms : null;
}

function answer(response, status, contentType, body) {
  response.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  response.end(body);
}

function handle(request, response) {
  const url = new URL(request.url, 'http://peer');
  if (request.method !== 'GET' || (url.pathname !== '/test' && url.pathname !== '/delay')) {
    answer(response, 404, 'text/plain; charset=utf-8', 'not found');
  } else if (url.pathname === '/test') {
    answer(response, 200, 'text/plain; charset=utf-8', 'works');
  } else {
    const ms = delayMs(url.searchParams);
    if (ms === null) {
      answer(response, 400, 'application/json', `{"error":"ms must be an integer from 0 to ${MAX_MS}"}`);
    } else {
      // A timer on the event loop: the loop is free while this request waits.
      setTimeout(() => answer(response, 200, 'application/json', '{"success":true}'), ms);
    }
  }
}

const { host, port } = listenAddress(process.argv.slice(2));
const server = http.createServer(handle);
server.on('error', (e) => {
  process.stderr.write(`${NAME}: cannot listen on ${host}:${port}: ${e.message}\n`);
  process.exit(1);
});
server.listen(port, host, () => {
  const shown = host.includes(':') ? `[${host}]` : host;
  process.stdout.write(`listening on http://${shown}:${server.address().port}\n`);
});
process.on('SIGTERM', () => {
  // Stop at once, as the Go peer: the listener and every connection, even with
  // requests in flight (their timers die with the process).
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
