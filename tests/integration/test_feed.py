"""kpool feed (issue #50): JSON lines of jobs through a real kpool serve and kpoold, every job
answered exactly once, whatever the server does meanwhile: killed and restarted mid-feed (what
never ran is sent again, what was cut off mid-run is reported and never run twice), a 429
storm, a token refused, TLS with a self-signed certificate, jobs of both kinds, malformed lines.
What a real server cannot do on cue (Retry-After: 5, a 503 of each kind, a fixed capacity) a
scripted one does (feed_fakes.py). And the server's side of the contract: POST /v1/run with the
notebook in the body, Kpool-Queued-Ms, and `stopped` for code a stop interrupted."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import nbformat
import pytest
import requests
from nbformat.v4 import new_code_cell, new_notebook

from conftest import free_port, self_signed_certificate, wait_until
from feed_fakes import ScriptedServe, ok
from serve_fixtures import JSON, KPOOL, POOLS, daemon, serve, serve_processes  # noqa: F401 (fixtures)


def feed(url, jobs, *args, env=None, timeout=180, cwd=None):
    """Runs `kpool feed` over `jobs` (dicts, or raw lines); returns (exit status, answers by line,
    the statistics, stderr)."""
    lines = "".join((j if isinstance(j, str) else json.dumps(j)) + "\n" for j in jobs)
    out = subprocess.run([KPOOL, "feed", "--url", url, "--no-progress", *args], input=lines, text=True,
                         capture_output=True, timeout=timeout, env=dict(os.environ, **(env or {})), cwd=cwd)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    stats = json.loads(out.stderr.strip().splitlines()[-1])
    return out.returncode, answers, stats, out.stderr


def feed_scripted(answer, n, *args):
    """kpool feed's n one-line jobs (ids 0..n-1) against a ScriptedServe answering `answer`:
    (exit status, answers, statistics, the server's record of requests)."""
    fake = ScriptedServe(answer)
    try:
        code, answers, stats, _ = feed(fake.url, [{"id": i, "code": "1"} for i in range(n)], *args)
    finally:
        fake.close()
    return code, answers, stats, fake.requests


def by_line(answers):
    lines = [a["line"] for a in answers]
    assert len(lines) == len(set(lines)), "a job was answered twice: %s" % answers
    return {a["line"]: a for a in answers}


def notebook_file(path, source):
    nb = new_notebook(cells=[new_code_cell("a = 1", metadata={"tags": ["parameters"]}), new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return str(path)


def test_jobs_of_both_kinds_and_malformed_lines_each_get_one_answer(serve, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    notebook_file(root / "served.ipynb", "print(a * 3)")
    local = notebook_file(tmp_path / "local.ipynb", "print(a * 2)")
    s = serve("--root", str(root))
    jobs = [
        {"id": "exec", "code": "print(6 * 7)"},
        {"id": "raises", "code": "1 / 0"},
        "this is no JSON",
        {"id": "local", "notebook": local, "parameters": {"a": 21}, "output": str(tmp_path / "out.ipynb")},
        {"id": "served", "root_notebook": "served.ipynb", "parameters": {"a": 5}},
        {"id": "typo", "code": "1", "kernal": "python3"},
        {"id": "missing", "notebook": str(tmp_path / "nowhere.ipynb")},
        [1, 2],
        {"id": "bad-timeout", "code": "1", "timeout": -1},
        {"id": "cwd", "code": "import os; print(os.getcwd())", "cwd": str(tmp_path)},
    ]
    code, answers, stats, _ = feed(s.url, jobs)
    got = by_line(answers)
    assert sorted(got) == list(range(1, len(jobs) + 1))
    assert code == 1  # some failed
    assert got[1]["status"] == 200 and got[1]["outcome"] == "ok"
    assert got[1]["result"]["outputs"][0]["text"] == ["42\n"]
    assert got[2]["status"] == 200 and got[2]["outcome"] == "error"
    assert got[2]["result"]["ename"] == "ZeroDivisionError"
    assert got[3]["error"]["error"] == "bad_job" and "line 3" in got[3]["error"]["message"]
    # The local notebook went in the request; the executed one is written here, with papermill's
    # paths those of the local files, as `kpool run local.ipynb out.ipynb -p a 21` writes them.
    assert got[4]["status"] == 200 and got[4]["output"] == str(tmp_path / "out.ipynb")
    out = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert out.metadata.papermill["input_path"] == local
    assert out.metadata.papermill["output_path"] == str(tmp_path / "out.ipynb")
    assert out.metadata.papermill["parameters"] == {"a": 21}
    assert out.cells[1].metadata.tags == ["injected-parameters"]
    assert out.cells[2].outputs[0]["text"] == "42\n"
    assert got[5]["status"] == 200 and got[5]["result"]["cells"][-1]["outputs"][0]["text"] == ["15\n"]
    assert got[6]["error"]["error"] == "bad_job" and "kernal" in got[6]["error"]["message"]
    assert got[6]["id"] == "typo"
    assert got[7]["error"]["error"] == "bad_job" and "nowhere.ipynb" in got[7]["error"]["message"]
    assert got[8]["error"]["error"] == "bad_job"
    assert got[9]["status"] == 400 and "timeout" in got[9]["error"]["message"]
    assert got[10]["result"]["outputs"][0]["text"] == [str(tmp_path) + "\n"]
    assert stats["jobs"] == {"total": 10, "ok": 4, "raised": 1, "failed": 5}
    # Six requests for the six jobs that went (one may have been refused once and sent again).
    assert stats["requests"] == 6 + stats["retries"]
    assert stats["responses"]["200"] == 5 and stats["responses"]["400"] == 1
    assert stats["latency_ms"]["p50"] > 0 and stats["rate"] > 0


def test_kpool_run_local_and_a_fed_notebook_write_the_same_file(serve, daemon, tmp_path):
    """The executed notebook of a feed job is the one `kpool run` writes, but for the times and
    the injected cell's id (random in both, as papermill's)."""
    local = notebook_file(tmp_path / "in.ipynb", "print(a * 2)")
    s = serve()
    fed, ran = tmp_path / "fed.ipynb", tmp_path / "ran.ipynb"
    code, answers, _, _ = feed(s.url, [{"id": 1, "notebook": local, "parameters": {"a": 4}, "output": str(fed)}])
    assert code == 0, answers
    subprocess.run([KPOOL, "--endpoint", daemon.endpoint, "run", local, str(ran), "-p", "a", "4",
                    "--no-progress-bar"], check=True, capture_output=True, timeout=120)
    a, b = json.loads(fed.read_text()), json.loads(ran.read_text())

    def timeless(nb):
        nb["metadata"]["papermill"].update(start_time=None, end_time=None, duration=None, output_path=None)
        for cell in nb["cells"]:
            cell["metadata"].get("papermill", {}).update(start_time=None, end_time=None, duration=None)
            cell["metadata"].pop("execution", None)
            if "injected-parameters" in cell["metadata"].get("tags", []):
                cell.pop("id")
        return nb

    assert timeless(a) == timeless(b)


def test_a_refused_token_stops_the_feed_at_once(serve, tmp_path):
    token = tmp_path / "token"
    token.write_text("the-right-one\n")
    s = serve("--token-file", str(token))
    jobs = [{"id": i, "code": "1"} for i in range(50)]
    code, answers, stats, err = feed(s.url, jobs, env={"KPOOL_SERVE_TOKEN": "a-wrong-one"})
    assert code == 1
    assert "refused the token (401)" in err
    # At once: the first requests in flight, nothing after; every job read is still answered.
    assert stats["requests"] <= 4 and stats["responses"] == {"401": stats["requests"]}
    assert len({a["line"] for a in answers}) == len(answers) == stats["jobs"]["total"]
    assert all(a["status"] == 401 or a["error"]["error"] == "not_sent" for a in answers)
    # The right token, from --token-file: all go.
    code, answers, stats, _ = feed(s.url, jobs[:5], "--token-file", str(token))
    assert code == 0 and stats["jobs"]["ok"] == 5


def test_the_token_a_local_kpool_serve_made_is_found(serve):
    s = serve(token_default=True)
    code, answers, _, _ = feed(s.url, [{"id": 1, "code": "1"}])
    assert code == 0, answers


def test_tls_with_a_self_signed_certificate_and_http2(serve, tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    s = serve("--cert", str(cert), "--key", str(key))
    url = "https://" + s.url[len("http://"):]
    jobs = [{"id": i, "code": "print(%d)" % i} for i in range(6)]
    for extra in ([], ["--http2"]):
        code, answers, stats, _ = feed(url, jobs, "--cacert", str(cert), *extra)
        assert code == 0 and stats["jobs"]["ok"] == 6, answers
    # Without the certificate: refused, said once, and nothing more is sent.
    code, answers, stats, err = feed(url, jobs)
    assert code == 1 and "no request can reach" in err and "certificate" in err.lower()
    assert stats["jobs"]["total"] == 6 and stats["responses"] == {}
    assert subprocess.run([KPOOL, "feed", "--url", s.url, "--http2"], input="", capture_output=True,
                          text=True).returncode == 2  # HTTP/2 needs TLS


def test_kpool_serve_killed_and_restarted_mid_feed(kpoold, tmp_path):
    """Every job is answered once; those refused while the server was down are sent again and
    run; those cut off mid-run are reported lost and never run twice (each job marks a file as
    its first act, so a second run would show)."""
    d = kpoold(POOLS.replace("size = 2", "size = 3", 1))
    d.wait_warm("python3", 3, timeout=90)
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    port = free_port()
    marks = tmp_path / "marks"

    def start_serve():
        p = subprocess.Popen([KPOOL, "--endpoint", d.endpoint, "serve", "--listen", "127.0.0.1:%d" % port,
                              "--token-file", str(token)], stderr=subprocess.PIPE, text=True)
        assert "listening" in p.stderr.readline()
        threading.Thread(target=p.stderr.read, daemon=True).start()
        return p

    first = start_serve()
    jobs = [{"id": i, "code": "open(%r, 'a').write('%d\\n'); import time; time.sleep(0.4)" % (str(marks), i)}
            for i in range(30)]
    f = subprocess.Popen([KPOOL, "feed", "--url", "http://127.0.0.1:%d" % port, "--token-file", str(token),
                          "--no-progress", "--patience", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    answers = []
    reader = threading.Thread(target=lambda: answers.extend(json.loads(line) for line in f.stdout), daemon=True)
    reader.start()
    f.stdin.write("".join(json.dumps(j) + "\n" for j in jobs))
    f.stdin.close()
    try:
        wait_until(lambda: len(answers) >= 5, timeout=60, what="five answers")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        time.sleep(2)  # down: the feed's requests are refused meanwhile
        second = start_serve()
        assert f.wait(timeout=120) == 1
        reader.join(timeout=10)
    finally:
        if f.poll() is None:
            f.kill()
        if "second" in locals():
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=30) == 0
    got = by_line(answers)
    assert sorted(got) == list(range(1, 31))
    runs = {}
    for line in marks.read_text().split():
        runs[int(line)] = runs.get(int(line), 0) + 1
    assert max(runs.values()) == 1, "a job ran twice: %s" % runs
    lost = [a for a in answers if a["status"] is None]
    assert lost and all(a["error"]["error"] == "lost" for a in lost), lost
    assert all(a["status"] == 200 and runs.get(a["id"]) == 1 for a in answers if a["status"] is not None)
    assert any(a["attempts"] > 1 and a["status"] == 200 for a in answers), "nothing was sent again"
    stats = json.loads(f.stderr.read().strip().splitlines()[-1])
    assert stats["jobs"]["ok"] == 30 - len(lost) and stats["no_answer"] >= len(lost)


def test_retry_after_five_is_waited_and_nothing_else_goes_meanwhile():
    def answer(job, attempt, in_flight):
        if job == "0" and attempt == 1:
            return 429, {"Retry-After": "5"}, {"error": "overloaded", "message": "busy"}, 0
        return ok(0.05)

    code, answers, stats, requests_seen = feed_scripted(answer, 3, "--max-in-flight", "1")
    assert code == 0 and stats["jobs"]["ok"] == 3
    assert stats["responses"] == {"200": 3, "429": 1} and stats["retries"] == 1
    times = {(job, attempt): t for t, job, attempt, _ in requests_seen}
    # Its second try not before the 5 s it was told; and with one request allowed in flight,
    # nothing else went while the server said wait (no answer came to say otherwise).
    assert times[("0", 2)] - times[("0", 1)] >= 5
    assert all(not (times[("0", 1)] < t < times[("0", 1)] + 4.9) for t, job, _, _ in requests_seen if job != "0")
    assert by_line(answers)[1]["attempts"] == 2


@pytest.mark.parametrize("status, error, resent", [
    (503, "unavailable", True),   # kpool serve stopping, or no kpoold: before any kernel
    (503, "stopped", False),      # code a stop interrupted
    (500, "internal", False),
    (502, "kernel_died", False),
    (504, "timeout", False),
])
def test_only_what_never_ran_is_sent_again(status, error, resent):
    def answer(job, attempt, in_flight):
        if attempt == 1:
            return status, {"Retry-After": "0"}, {"error": error, "message": "scripted"}, 0
        return ok()

    code, answers, stats, _ = feed_scripted(answer, 1)
    assert answers[0]["attempts"] == (2 if resent else 1)
    assert (code, answers[0]["status"]) == ((0, 200) if resent else (1, status))


def test_a_429_storm_is_ridden_out_near_the_servers_capacity():
    """A server that holds 3 requests and answers 429 (Retry-After: 1) to any more: the feed
    ends with every job answered 200, refused for a few of them, not for most (a client with
    all 60 in flight gets 57 429s at first, and again at every retry)."""
    def answer(job, attempt, in_flight):
        if in_flight > 3:
            return 429, {"Retry-After": "1"}, {"error": "overloaded", "message": "busy"}, 0
        return ok(0.1)

    code, answers, stats, _ = feed_scripted(answer, 60, "--max-in-flight", "32")
    assert code == 0 and stats["jobs"]["ok"] == 60
    assert stats["responses"].get("429", 0) <= 12, stats
    # Near the capacity: 60 jobs of 0.1 s, 3 at a time, take 2 s; allow for the probing.
    assert stats["seconds"] < 6, stats


def test_the_window_follows_the_servers_queue():
    """A server with 4 kernels whose requests beyond 4 wait for one (Kpool-Queued-Ms says how
    long): the feed keeps about 4 to 8 in flight, not its cap of 64."""
    def answer(job, attempt, in_flight):
        queued = max(0, in_flight - 4) * 50
        return ok(0.05 + queued / 1000, queued_ms=queued)

    code, answers, stats, requests_seen = feed_scripted(answer, 200)
    assert code == 0 and stats["jobs"]["ok"] == 200
    assert 3 <= stats["in_flight"]["window"] <= 12, stats  # (its cap: 64)
    late = [n for t, _, _, n in requests_seen[100:]]
    assert max(late) <= 14, late


def test_malformed_input_and_usage(serve):
    s = serve()
    out = subprocess.run([KPOOL, "feed"], input="", capture_output=True, text=True)
    assert out.returncode == 2 and "--url" in out.stderr
    out = subprocess.run([KPOOL, "feed", "--url", "ftp://x"], input="", capture_output=True, text=True)
    assert out.returncode == 2 and "http://" in out.stderr
    out = subprocess.run([KPOOL, "feed", "/nonexistent.jsonl", "--url", s.url], capture_output=True, text=True)
    assert out.returncode == 2 and "cannot read" in out.stderr
    out = subprocess.run([KPOOL, "feed", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage: kpool feed") and "--max-in-flight" in out.stdout
    out = subprocess.run([KPOOL, "feed", "--url", s.url, "--max-in-flight", "0"], capture_output=True, text=True)
    assert out.returncode == 2 and "--max-in-flight takes a number from 1 to 4096" in out.stderr
    out = subprocess.run([KPOOL, "exec", "--token-file", "/x", "1"], capture_output=True, text=True)
    assert out.returncode == 2 and "go with --url" in out.stderr
    code, answers, stats, _ = feed(s.url, ["", "{", '{"id": 1, "code": "1"}', "   "])
    assert [a["line"] for a in sorted(answers, key=lambda a: a["line"])] == [2, 3]
    assert code == 1 and stats["jobs"] == {"total": 2, "ok": 1, "raised": 0, "failed": 1}


# The server's side of the contract.

def test_post_v1_run_runs_the_notebook_in_the_body(serve, tmp_path):
    s = serve()  # no --root: an uploaded notebook needs none
    nb = json.loads(open(notebook_file(tmp_path / "n.ipynb", "print(a + 1)")).read())
    r = s.post("/v1/run?format=outputs", {"notebook": nb, "parameters": {"a": 41}})
    assert r.status_code == 200, r.text
    assert r.json()["cells"][-1]["outputs"][0]["text"] == ["42\n"]
    assert int(r.headers["kpool-queued-ms"]) >= 0
    assert s.post("/v1/run", {"parameters": {}}).status_code == 400  # no notebook
    assert s.post("/v1/run", {"notebook": [1]}).json()["error"] == "bad_request"
    assert s.post("/v1/run", {"notebook": {"cells": "no"}}).status_code == 400
    assert requests.get(s.url + "/v1/run", timeout=30).status_code == 405
    assert s.post("/v1/run/x.ipynb", {"notebook": nb}).status_code in (400, 404)  # not with a path


def test_code_a_stop_interrupts_is_503_stopped_not_unavailable(serve, tmp_path):
    s = serve("--stop-grace", "1")
    started = tmp_path / "started"
    result = {}
    code = "import time; open(%r, 'w').close(); time.sleep(60)" % str(started)
    t = threading.Thread(target=lambda: result.update(r=s.post("/v1/exec", {"code": code})))
    t.start()
    wait_until(started.exists, timeout=30, what="the code running")
    s.proc.send_signal(signal.SIGTERM)
    t.join(timeout=30)
    assert s.proc.wait(timeout=30) == 0, "".join(s.log)
    assert result["r"].status_code == 503 and result["r"].json()["error"] == "stopped"


def test_a_crowd_of_naive_clients_and_a_feed_on_a_real_kpool_serve(serve, daemon):
    """A real 429 storm: 10 naive clients with a job each send at once, and again 0.2 s after
    each 429 (not their Retry-After), at a kpool serve that keeps 2 requests waiting at most; a
    feed beside them gets every job of its own answered 200, and takes a small share of the 429s
    (it waits its turn; the crowd takes the refusals)."""
    s = serve("--max-queue", "2", "--queue-timeout", "2")
    crowd_429 = []
    code_ = "import time; time.sleep(0.1)"

    def naive():
        with requests.Session() as session:
            for _ in range(1):
                while session.post(s.url + "/v1/exec", data=json.dumps({"code": code_}), headers=JSON,
                                   timeout=60).status_code == 429:
                    crowd_429.append(1)
                    time.sleep(0.2)

    crowd = [threading.Thread(target=naive) for _ in range(10)]
    for t in crowd:
        t.start()
    try:
        code, answers, stats, _ = feed(s.url, [{"id": i, "code": code_} for i in range(20)], "--patience", "120")
    finally:
        for t in crowd:
            t.join()
    assert len(crowd_429) > 5, "no storm: %d 429s" % len(crowd_429)
    assert code == 0 and stats["jobs"]["ok"] == 20, stats
    assert len(by_line(answers)) == 20
    assert stats["responses"].get("429", 0) < len(crowd_429) / 2, (stats, len(crowd_429))


def test_ctrl_c_stops_sending_and_lets_the_jobs_in_flight_finish():
    def answer(job, attempt, in_flight):
        return ok(1.0)

    fake = ScriptedServe(answer)
    try:
        p = subprocess.Popen([KPOOL, "feed", "--url", fake.url, "--no-progress", "--max-in-flight", "2"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdin.write("".join(json.dumps({"id": i, "code": "1"}) + "\n" for i in range(10)))
        p.stdin.close()
        wait_until(lambda: len(fake.requests) >= 1, timeout=10, what="a request")
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=20) == 130
        answers = [json.loads(line) for line in p.stdout.read().splitlines()]
        err = p.stderr.read()
    finally:
        fake.close()
    assert "interrupted" in err
    sent = {str(job) for _, job, _, _ in fake.requests}
    done = [a for a in answers if a["status"] == 200]
    assert done and {str(a["id"]) for a in done} == sent  # those in flight finished and were answered
    assert len(by_line(answers)) == 10  # every job answered: the rest `not_sent`
    assert all(a["error"]["error"] == "not_sent" for a in answers if a["status"] != 200)


def test_a_progress_line_on_a_terminal_and_none_when_piped(tmp_path):
    import pty

    def answer(job, attempt, in_flight):
        return ok(0.4)

    fake = ScriptedServe(answer)
    master, slave = pty.openpty()
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"id": i, "code": "1"}) + "\n" for i in range(6)))
    try:
        # stdin a file (`< jobs.jsonl`): the total is known, as for a FILE argument.
        with open(jobs) as stdin:
            p = subprocess.Popen([KPOOL, "feed", "--url", fake.url, "--max-in-flight", "1"], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=slave, text=True)
            os.close(slave)
            out, _ = p.communicate(timeout=60)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other side is closed: all read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        fake.close()
    assert p.returncode == 0 and len(out.splitlines()) == 6  # stdout: the answers alone
    text = seen.decode()
    assert re.search(r"\r\x1b\[K\d+/6 done, \d+ in flight \(window \d+\), [\d.]+/s, 0 x 429, 0 retries", text), text
    assert json.loads(text.replace("\r\x1b[K", "\n").strip().splitlines()[-1])["jobs"]["ok"] == 6
    # Piped: the statistics alone.
    code, answers, stats, err = feed_scripted_stderr(answer)
    assert code == 0 and "\r" not in err and len(err.strip().splitlines()) == 1


def feed_scripted_stderr(answer):
    fake = ScriptedServe(answer)
    try:
        out = subprocess.run([KPOOL, "feed", "--url", fake.url], input=json.dumps({"id": 1, "code": "1"}) + "\n",
                             capture_output=True, text=True, timeout=60)
    finally:
        fake.close()
    return out.returncode, out.stdout, None, out.stderr
