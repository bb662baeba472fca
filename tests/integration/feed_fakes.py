"""A scripted stand-in for kpool serve, for what a real one cannot be made to do on cue: answer
429 with Retry-After: 5, or a 503 of one kind or the other, or hold exactly N requests at once.
It records every request (when, which job, how many were in flight), so a test can say what a
client sent and when. Beside the real kpool serve in test_feed.py, not instead of it."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServe:
    """`answer(job_id, attempt, in_flight)` returns (status, headers, body dict, seconds to take).
    The job id comes from the request's X-Request-Id (what kpool feed sends for a plain id)."""

    def __init__(self, answer, port=0):
        self.answer = answer
        self.requests = []  # (monotonic time, job id, attempt, in flight at arrival)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.attempts = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                job = self.headers.get("X-Request-Id")
                with fake.lock:
                    fake.in_flight += 1
                    fake.peak = max(fake.peak, fake.in_flight)
                    attempt = fake.attempts[job] = fake.attempts.get(job, 0) + 1
                    fake.requests.append((time.monotonic(), job, attempt, fake.in_flight))
                    in_flight = fake.in_flight
                try:
                    status, headers, body, seconds = fake.answer(job, attempt, in_flight)
                    time.sleep(seconds)
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


OK_EXEC = {"execution_count": 1, "outputs": [], "status": "ok"}


def ok(seconds=0.0, queued_ms=0):
    return 200, {"Kpool-Outcome": "ok", "Kpool-Queued-Ms": str(queued_ms)}, OK_EXEC, seconds
