"""A JSON HTTP server on 127.0.0.1 for the fakes the tests stand in for real services (Prometheus' query API)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

# (path, the query's parameters, each its last value) -> (HTTP status, the JSON body)
Answer = Callable[[str, dict[str, str]], tuple[int, Any]]


def serve(answer: Answer) -> ThreadingHTTPServer:
    """A started server answering every GET with `answer`; `.url` is its base URL. Stop it with stop()."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            code, body = answer(url.path, {k: v[-1] for k, v in parse_qs(url.query).items()})
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shutdown() waits a poll
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()
