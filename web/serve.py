#!/usr/bin/env python3
"""Serves the browser page (web/www) on localhost.

    python3 web/serve.py [--port 8000]

then open http://localhost:8000/ (build the module first: web/build.sh). A
page opened with ?post=1 POSTs its result JSON to /result; the server prints
it (or hands it to a callback, which is how web/e2e.py reads it).
"""

import argparse
import functools
import http.server
import os
import sys

WWW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "www")


class Handler(http.server.SimpleHTTPRequestHandler):
    # Set per server by make_server: called with the POSTed body (text).
    on_result = None

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm", ".js": "text/javascript"}

    def end_headers(self):
        # A rebuilt module must be fetched again, not taken from a cache.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_POST(self):
        if self.path != "/result":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8", "replace")
        self.send_response(204)
        self.end_headers()
        (self.on_result or print)(body)

    def log_message(self, fmt, *args):
        if os.environ.get("GPUHASH_WEB_LOG"):
            super().log_message(fmt, *args)


def make_server(port=0, on_result=None):
    """A threaded server for WWW on 127.0.0.1:port (0: any free port)."""
    handler = type("ResultHandler", (Handler,), {"on_result": staticmethod(on_result) if on_result else None})
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(handler, directory=WWW))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=8000)
    args = p.parse_args()
    if not os.path.exists(os.path.join(WWW, "pkg", "gpuhash_web.js")):
        sys.exit("web/www/pkg is missing: build the module first (web/build.sh)")
    server = make_server(args.port)
    print(f"serving {WWW} at http://localhost:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
