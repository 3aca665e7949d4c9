#!/usr/bin/env python3
"""A deterministic OpenAI-compatible model for the producer example's test: `POST
/v1/chat/completions` with `stream: true` answers the same reply every time, a word per chunk,
`--delay-ms` apart. Prints `listening on PORT` once it accepts connections.
"""

import argparse
import http.server
import json
import socketserver
import time

# The reply: numbered words, so a lost or doubled piece shows in the log.
REPLY_WORDS = 400


def reply_pieces():
    return [f"w{index} " for index in range(REPLY_WORDS)]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.005

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        json.loads(self.rfile.read(length) or b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for piece in reply_pieces():
                chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(self.delay)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the producer went away (killed mid-stream)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=5)
    args = parser.parse_args()
    Handler.delay = args.delay_ms / 1000
    server = Server(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
