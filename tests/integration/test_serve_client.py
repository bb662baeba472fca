"""kpool.ServeClient and kpool.AsyncServeClient (issue #50): exec, run and map through a real
kpool serve, under kpool feed's policy (the shared trace says the Python policy decides as the
C++ one does), and what a scripted server makes them face: Retry-After, a 429 storm, a
connection lost mid-run (reported, never sent again), a server not up yet (sent again)."""
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from feed_fakes import ScriptedServe, ok
from test_feed import free_port, notebook_file
from serve_fixtures import KPOOL, daemon, serve, serve_processes  # noqa: F401 (fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import kpool  # noqa: E402
from kpool.feed_policy import FeedPolicy  # noqa: E402


def test_the_python_policy_decides_the_shared_trace_as_the_cpp_one():
    with open(os.path.join(HERE, "..", "data", "feed_policy_trace.json")) as f:
        trace = json.load(f)
    p = FeedPolicy(**trace["settings"])
    for n, e in enumerate(trace["events"]):
        if e["op"] == "sent":
            assert p.sent(e["now"], e["in_flight"]) == e["ticket"]
        elif e["op"] == "answered":
            p.answered(e["now"], e["ticket"], e["latency"], e["queued"])
        elif e["op"] == "refused":
            assert p.refused(e["now"], e["in_flight"], e["retry_after"]) == pytest.approx(e["returns"])
        else:
            assert p.unreachable(e["now"]) == pytest.approx(e["returns"])
        assert (p.window, p.held_until) == (e["window"], pytest.approx(e["held_until"])), n


def test_exec_run_and_map_on_a_real_kpool_serve(serve, daemon, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    notebook_file(root / "served.ipynb", "print(a * 3)")
    local = notebook_file(tmp_path / "in.ipynb", "print(a * 2)")
    s = serve("--root", str(root), token_default=True)  # its token found as kpool feed finds it
    with kpool.ServeClient(s.url) as c:
        r = c.exec("print(6 * 7)")
        assert r.ok and r.result["outputs"][0]["text"] == ["42\n"]
        r = c.exec("1 / 0")
        assert r.status == 200 and r.outcome == "error" and not r.ok and r.result["ename"] == "ZeroDivisionError"
        r = c.run(local, parameters={"a": 21}, output=str(tmp_path / "out.ipynb"))
        assert r.ok and r.notebook["cells"][-1]["outputs"][0]["text"] == ["42\n"]
        written = json.loads((tmp_path / "out.ipynb").read_text())
        assert written["metadata"]["papermill"]["input_path"] == local
        assert written["metadata"]["papermill"]["output_path"] == str(tmp_path / "out.ipynb")
        r = c.run(root="served.ipynb", parameters={"a": 5})
        assert r.notebook["cells"][-1]["outputs"][0]["text"] == ["15\n"]
        with pytest.raises(kpool.ServeError) as e:
            c.exec("1", kernel="no-such-pool")
        assert e.value.result.status == 404
        jobs = [{"id": i, "code": "print(%d)" % i} for i in range(20)] + [{"id": "bad", "cod": "1"}]
        results = list(c.map(jobs))
    assert sorted(r.index for r in results) == list(range(21))
    assert all(r.ok and r.result["outputs"][0]["text"] == ["%d\n" % r.id] for r in results if r.id != "bad")
    bad = [r for r in results if r.id == "bad"][0]
    assert bad.status is None and bad.error["error"] == "bad_job"
    assert c.stats["jobs"] == {"total": 21, "ok": 20, "raised": 0, "failed": 1}
    # A request may be refused once under the module's small pool (429) and sent again.
    assert c.stats["requests"] == 20 + c.stats["retries"] and c.stats["latency_ms"]["p50"] > 0

    async def main():
        async with kpool.AsyncServeClient(s.url) as ac:
            r = await ac.exec("6 * 7")
            assert r.result["outputs"][0]["data"]["text/plain"] == ["42"]
            results = [r async for r in ac.map({"id": i, "code": "%d" % i} for i in range(20))]
            assert sorted(r.index for r in results) == list(range(20)) and all(r.ok for r in results)
            return ac.stats

    assert asyncio.run(main())["jobs"]["ok"] == 20


def test_a_wrong_token_stops_map_at_once(serve, tmp_path):
    token = tmp_path / "token"
    token.write_text("right\n")
    s = serve("--token-file", str(token))
    with kpool.ServeClient(s.url, token="wrong") as c:
        results = list(c.map({"id": i, "code": "1"} for i in range(30)))
    assert c.stats["requests"] <= 2 and all(not r.ok for r in results)
    assert {r.status for r in results} <= {401, None}


@pytest.mark.parametrize("client", ["sync", "async"])
def test_retry_after_is_waited_and_a_429_storm_ridden_out(client):
    def answer(job, attempt, in_flight):
        if job == "0" and attempt == 1:
            return 429, {"Retry-After": "2"}, {"error": "overloaded", "message": "busy"}, 0
        if in_flight > 3:
            return 429, {"Retry-After": "1"}, {"error": "overloaded", "message": "busy"}, 0
        return ok(0.1)

    fake = ScriptedServe(answer)
    jobs = [{"id": i, "code": "1"} for i in range(40)]
    try:
        if client == "sync":
            with kpool.ServeClient(fake.url, max_in_flight=32) as c:
                results = list(c.map(jobs))
                stats = c.stats
        else:
            async def main():
                async with kpool.AsyncServeClient(fake.url, max_in_flight=32) as c:
                    return [r async for r in c.map(jobs)], c.stats
            results, stats = asyncio.run(main())
    finally:
        fake.close()
    assert len(results) == 40 and all(r.ok for r in results), stats
    times = [t for t, job, _, _ in fake.requests if job == "0"]
    assert times[1] - times[0] >= 2
    assert stats["responses"].get("429", 0) <= 10, stats


def test_a_connection_lost_mid_run_is_reported_not_resent_and_a_server_not_up_is_waited_for():
    import http.server

    seen = []

    class Cut(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.headers.get("X-Request-Id"))
            self.connection.shutdown(socket.SHUT_RDWR)  # the request arrived; no answer comes

        def log_message(self, *a):
            pass

    cut = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Cut)
    threading.Thread(target=cut.serve_forever, daemon=True).start()
    try:
        with kpool.ServeClient("http://127.0.0.1:%d" % cut.server_address[1]) as c:
            (r,) = list(c.map([{"id": "x", "code": "1"}]))
    finally:
        cut.shutdown()
        cut.server_close()
    assert r.status is None and r.error["error"] == "lost" and r.attempts == 1 and seen == ["x"]

    # Nothing listens for a second: refused connections, sent again until the server is up.
    port = free_port()
    fake = {}

    def later():
        time.sleep(1.0)
        fake["s"] = ScriptedServe(lambda *a: ok(), port=port)

    t = threading.Thread(target=later)
    t.start()
    try:
        with kpool.ServeClient("http://127.0.0.1:%d" % port, patience=30) as c:
            results = list(c.map({"id": i, "code": "1"} for i in range(3)))
    finally:
        t.join()
        fake["s"].close()
    assert all(r.ok for r in results) and max(r.attempts for r in results) > 1
    assert c.stats["no_answer"] >= 1 and c.stats["jobs"]["ok"] == 3
