"""python-threads: the WSGI application of Python's thread-per-request server.

GET /delay?ms=N sleeps the thread serving the request (time.sleep, as Spring Web's
Thread.sleep; N from 0 to 600000, default 5000; anything else is a 400) and answers
{"success":true}; GET /test answers "works". gunicorn.conf.py gives it one gthread
worker of 200 threads.
"""

import time
import urllib.parse

DEFAULT_MS = 5000
MAX_MS = 600_000


def app(environ, start_response):
    path, method = environ.get("PATH_INFO", ""), environ["REQUEST_METHOD"]
    if method != "GET" or path not in ("/test", "/delay"):
        return answer(start_response, "404 Not Found", "text/plain; charset=utf-8", b"not found")
    if path == "/test":
        return answer(start_response, "200 OK", "text/plain; charset=utf-8", b"works")
    ms = delay_ms(environ.get("QUERY_STRING", ""))
    if ms is None:
        body = f'{{"error":"ms must be an integer from 0 to {MAX_MS}"}}'.encode()
        return answer(start_response, "400 Bad Request", "application/json", body)
    # This thread is held for the whole wait: the pool's 200 threads are 200 waits.
    time.sleep(ms / 1000)
    return answer(start_response, "200 OK", "application/json", b'{"success":true}')


def delay_ms(query_string):
    """?ms= as an integer from 0 to MAX_MS (DEFAULT_MS when absent), None when bad."""
    values = urllib.parse.parse_qs(query_string, keep_blank_values=True).get("ms")
    if values is None:
        return DEFAULT_MS
    text = values[0].strip()
    if not text.isascii() or not text.isdigit():
        return None
    ms = int(text)
    return ms if ms <= MAX_MS else None


def answer(start_response, status, content_type, body):
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
