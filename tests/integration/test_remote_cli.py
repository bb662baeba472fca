"""`kpool run --url` and `kpool exec --url` (issue #50): through a real kpool serve, the same
commands behave as they do against kpoold: the same OUTPUT notebook (papermill's metadata, its
paths the local ones), the same messages and exit statuses, many notebooks under the feed
policy; exec's outputs streamed as they come (POST /v1/exec's NDJSON), its exit statuses,
--json, sys.exit(N), Ctrl-C."""
import json
import os
import signal
import subprocess
import time

import requests

from conftest import wait_until
from test_feed import notebook_file
from serve_fixtures import JSON, KPOOL, daemon, serve, serve_processes  # noqa: F401 (fixtures)


def kpool(*args, url=None, endpoint=None, input=None, cwd=None, timeout=120):
    head = [KPOOL] + (["--url", url] if url else []) + (["--endpoint", endpoint] if endpoint else [])
    return subprocess.run(head + list(args), capture_output=True, text=True, input=input, cwd=cwd, timeout=timeout)


def timeless(path):
    nb = json.loads(open(path).read())
    nb["metadata"]["papermill"].update(start_time=None, end_time=None, duration=None)
    for cell in nb["cells"]:
        cell["metadata"].get("papermill", {}).update(start_time=None, end_time=None, duration=None)
        cell["metadata"].pop("execution", None)
        if set(cell["metadata"].get("tags", [])) & {"injected-parameters", "papermill-error-cell-tag"}:
            cell.pop("id")  # random in both, as papermill's
    return nb


def test_remote_run_writes_what_a_local_run_writes_and_says_the_same(serve, daemon, tmp_path):
    s = serve()
    ok_nb = notebook_file(tmp_path / "ok.ipynb", "print(a * 2)")
    bad_nb = notebook_file(tmp_path / "bad.ipynb", "print(a)\nraise ValueError('no %d' % a)")
    for nb, status in ((ok_nb, 0), (bad_nb, 1)):
        name = os.path.basename(nb)
        args = ["run", name, "out-" + name, "-p", "a", "3", "-y", "b: 2", "--inject-paths", "--report-mode",
                "--no-progress-bar"]
        local = kpool(*args, endpoint=daemon.endpoint, cwd=tmp_path)
        remote = kpool(*[a.replace("out-", "remote-") for a in args], url=s.url, cwd=tmp_path)
        assert (local.returncode, remote.returncode) == (status, status), (local.stderr, remote.stderr)
        a, b = timeless(tmp_path / ("out-" + name)), timeless(tmp_path / ("remote-" + name))
        b["metadata"]["papermill"]["output_path"] = a["metadata"]["papermill"]["output_path"]
        b["metadata"]["papermill"]["parameters"]["PAPERMILL_OUTPUT_PATH"] = "out-" + name
        for cell in b["cells"]:
            if "injected-parameters" in cell["metadata"].get("tags", []):
                cell["source"] = [line.replace("remote-", "out-") for line in cell["source"]]
        assert a == b
        # What it says on stderr is kpool run's own, word for word (the error report included),
        # but for where it runs and the output's name.
        def said(text):
            return [line for line in text.splitlines() if not line.startswith(("Executing notebook", "Output"))]
        assert said(local.stderr) == said(remote.stderr)
        assert ("raised ValueError: no 3" in remote.stderr) == bool(status)
    # To stdout, as papermill: the notebook once, nothing else on stdout.
    out = kpool("run", ok_nb, "-", "-p", "a", "5", url=s.url)
    assert out.returncode == 0 and json.loads(out.stdout)["cells"][-1]["outputs"][0]["text"] == ["10\n"]
    # What kpool serve cannot do is said, not ignored.
    out = kpool("run", ok_nb, "x.ipynb", "--log-output", url=s.url)
    assert out.returncode == 2 and "--log-output is not available with --url" in out.stderr
    # Bad input: said before anything is sent.
    (tmp_path / "broken.ipynb").write_text("{")
    out = kpool("run", str(tmp_path / "broken.ipynb"), "x.ipynb", url=s.url)
    assert out.returncode == 2 and "broken.ipynb" in out.stderr


def test_remote_run_of_many_notebooks_feeds_them(serve, tmp_path):
    s = serve()
    paths = [notebook_file(tmp_path / ("n%d.ipynb" % i), "print(a + %d)" % i) for i in range(8)]
    paths.append(notebook_file(tmp_path / "bad.ipynb", "1 / 0"))
    out = kpool("run", *paths, "--output-dir", str(tmp_path / "done"), "-j", "3", "-p", "a", "10", url=s.url)
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 10 and lines[-1].startswith("9 notebooks: 8 ok, 1 failed in ")
    assert sum(": ok (" in line for line in lines) == 8
    assert [line for line in lines if "bad.ipynb" in line][0].endswith("failed (exit 1: failed)")
    assert "raised ZeroDivisionError" in out.stderr
    for i in range(8):
        nb = json.loads((tmp_path / "done" / ("n%d.ipynb" % i)).read_text())
        assert nb["cells"][-1]["outputs"][0]["text"] == ["%d\n" % (10 + i)]
        assert nb["metadata"]["papermill"]["input_path"] == paths[i]


def test_exec_v1_streams_its_outputs_as_ndjson(serve):
    s = serve()
    started = time.monotonic()
    r = requests.post(s.url + "/v1/exec", data=json.dumps(
        {"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)\n1 / 0"}),
        headers=dict(JSON, Accept="application/x-ndjson"), stream=True, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
    assert int(r.headers["kpool-queued-ms"]) >= 0
    lines = []
    for line in r.iter_lines():
        lines.append((time.monotonic() - started, json.loads(line)))
    outputs = [l for t, l in lines if "output" in l]
    assert [o["output"]["text"] for o in outputs[:3]] == [["0\n"], ["1\n"], ["2\n"]]
    assert outputs[3]["output"]["ename"] == "ZeroDivisionError"
    # As they came: the first output 0.8 s before the last line.
    assert lines[-1][0] - lines[0][0] > 0.6
    answer = lines[-1][1]["answer"]
    assert answer["status"] == 200 and answer["outcome"] == "error" and answer["body"]["ename"] == "ZeroDivisionError"
    # Past its timeout: the 504 it would have been, in the last line.
    r = requests.post(s.url + "/v1/exec", data=json.dumps({"code": "import time; time.sleep(30)", "timeout": 1}),
                      headers=dict(JSON, Accept="application/x-ndjson"), timeout=60)
    assert r.status_code == 200 and json.loads(r.text.splitlines()[-1])["answer"]["status"] == 504
    # A refusal before any code ran is the plain answer.
    r = requests.post(s.url + "/v1/exec", data=json.dumps({"code": "1", "kernel": "nope"}),
                      headers=dict(JSON, Accept="application/x-ndjson"), timeout=60)
    assert r.status_code == 404 and r.json()["error"] == "unknown_kernel"


def test_remote_exec_streams_and_exits_as_a_local_exec(serve, daemon):
    s = serve()
    p = subprocess.Popen([KPOOL, "--url", s.url, "exec", "import time\nfor i in range(3):\n    print(i, flush=True)\n"
                          "    time.sleep(0.5)"], stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    seen_at = time.monotonic()
    rest = p.stdout.read()
    assert p.wait(timeout=30) == 0 and first == "0\n" and rest == "1\n2\n"
    assert time.monotonic() - seen_at > 0.7  # the first line came while the code still ran
    for code, status in (("6 * 7", 0), ("1 / 0", 1), ("import sys; sys.exit(7)", 7), ("import os; os._exit(1)", 138)):
        local = kpool("exec", code, endpoint=daemon.endpoint)
        remote = kpool("exec", code, url=s.url)
        assert (local.returncode, remote.returncode) == (status, status), (code, local.stderr, remote.stderr)
        assert local.stdout == remote.stdout
        if status == 1:
            assert remote.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    local = kpool("exec", "--json", "print(1); 2", endpoint=daemon.endpoint)
    remote = kpool("exec", "--json", "print(1); 2", url=s.url)
    assert json.loads(local.stdout) == json.loads(remote.stdout)
    remote = kpool("exec", "--timeout", "1", "import time; time.sleep(20)", url=s.url)
    assert remote.returncode == 1 and "did not finish within 1 s" in remote.stderr
    remote = kpool("exec", "--pool", "nope", "1", url=s.url)
    assert remote.returncode == 1 and "no pool named 'nope'" in remote.stderr
    remote = kpool("exec", "-", url=s.url, input="print('from stdin')")
    assert remote.stdout == "from stdin\n"


def test_ctrl_c_on_a_remote_exec_interrupts_and_releases_the_kernel(serve, daemon):
    s = serve()
    p = subprocess.Popen([KPOOL, "--url", s.url, "exec", "import time\nprint('go', flush=True)\ntime.sleep(60)"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "go\n"
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=10) == 130 and "interrupted" in p.stderr.read()
    # kpool serve saw the hang-up within its second's poll: the kernel interrupted and released
    # (the fixture then checks that no kernel is left leased once kpool serve stops).
    wait_until(lambda: any("/v1/exec 499" in line for line in s.log), timeout=10, what="the hang-up seen")
    wait_until(lambda: "kpool_serve_in_flight 0" in s.get("/metrics").text, timeout=10, what="no request in flight")
