"""gunicorn's settings for the python-threads peer (read with --config).

The thread-per-request model, as Python users run it: gunicorn's gthread worker,
one worker process whose pool of 200 threads (Tomcat's maxThreads) each serves one
request at a time; a request beyond them waits for a thread. gunicorn's defaults
otherwise: backlog 2048, keep-alive 2 s, worker_connections 1000 (connections the
worker holds; more wait in the backlog), worker timeout 30 s.
"""

worker_class = "gthread"
workers = 1
threads = 200
# SIGTERM stops the master at once: the worker gets 1 s for requests in flight.
graceful_timeout = 1
accesslog = None
errorlog = "-"
loglevel = "warning"


def post_worker_init(worker):
    """Once the worker is ready to accept, say where: the line the harness waits for."""
    host, port = worker.sockets[0].getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{port}", flush=True)
