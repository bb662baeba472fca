"""JupyterLab's own client library (@jupyterlab/services 7.6, from npm; tests/js) against a real
kpool serve in front of a real kpoold (issue #37): sessions as JupyterLab opens, renames, moves,
re-kernels and closes a notebook; input() and getpass answered over the stdin channel; what
the editor sends as the user types (complete, inspect, history, is_complete, comm_info); and
the debugger (debugpy inside a pooled, forked ipykernel) stopping at a breakpoint and going on.
The Sessions API's own edges (bad bodies, kernels by id, deleted kernels) are checked with
plain HTTP here too."""
import json
import os
import shutil
import subprocess

import pytest
import requests

from conftest import module_daemon, wait_until
from serve_fixtures import JSON, serve_processes

JS = os.path.join(os.path.dirname(__file__), "..", "js")

POOLS = """
[pools.python3]
size = 2
"""


# Every scenario on a plain pool and on a sandboxed one (issue #48): a notebook's folder under
# --root (the tests' temporary directories) is then the kernel's working directory, bound into
# its sandbox.
SANDBOXED = """
isolation = "sandbox"
[pools.python3.sandbox]
roots = ["%s"]
"""


@pytest.fixture(scope="module", params=["none", "sandbox"])
def daemon(request, tmp_path_factory, kernelspec_path):
    pools = POOLS + (SANDBOXED % tmp_path_factory.getbasetemp() if request.param == "sandbox" else "")
    for d in module_daemon(tmp_path_factory, kernelspec_path, pools, "jupyterlab-daemon"):
        assert d.pool("python3")["isolation"] == request.param
        yield d


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "nb" / "reports").mkdir(parents=True)
    return tmp_path / "nb"


def jupyterlab(s, scenario):
    """What tests/js/jupyterlab_client.js found in `scenario` against kpool serve `s`, which
    runs with its token as users run it (the client library posts JSON as text/plain, which
    kpool serve takes only with a token: serve/front_door.hpp)."""
    if not os.path.isdir(os.path.join(JS, "node_modules", "@jupyterlab", "services")) or not shutil.which("node"):
        pytest.fail("these tests need node and tests/js's node modules (scripts/dev installs both)")
    env = dict(os.environ, KPOOL_URL=s.url, KPOOL_TOKEN=s.token or "")
    out = subprocess.run(["node", os.path.join(JS, "jupyterlab_client.js"), scenario], capture_output=True,
                         text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stdout + out.stderr + "".join(s.log)
    return json.loads(out.stdout.splitlines()[-1])  # the library may log on stdout before


def test_jupyterlab_opens_renames_rekernels_and_closes_a_notebook(serve, root):
    r = jupyterlab(serve("--root", str(root), token_default=True), "sessions")
    made = r["created"]
    assert made["path"] == "reports/q1.ipynb" and made["name"] == "q1.ipynb" and made["type"] == "notebook"
    assert made["kernel"]["name"] == "python3"
    # The kernel starts in the notebook's folder under --root, as in jupyter_server.
    assert r["cwd"] == str((root / "reports").resolve())
    # A second POST of the same path is the session that is there (JupyterLab reopening a tab).
    assert r["again"]["id"] == made["id"] and r["again"]["kernel"]["id"] == made["kernel"]["id"]
    assert r["listed"] == [made["id"]]
    renamed = r["renamed"]
    assert renamed["path"] == "archive/q1-final.ipynb" and renamed["name"] == "q1-final.ipynb"
    assert renamed["notebook"] == {"path": "archive/q1-final.ipynb", "name": "q1-final.ipynb"}
    # Another kernel by name: a fresh one, and the one it left is shut down.
    assert r["kernel_after"] != r["kernel_before"]
    assert r["after_change"] == "42"
    assert r["kernels_after_change"] == [r["kernel_after"]]
    assert r["get_after_shutdown"] == 404
    assert r["sessions_after_shutdown"] == [] and r["kernels_after_shutdown"] == []


def test_input_and_getpass_are_answered_through_the_stdin_channel(serve):
    r = jupyterlab(serve(token_default=True), "input")
    assert r["input"] == {"status": "ok", "stdout": "hello kpool\n"}
    assert r["getpass"] == {"status": "ok", "stdout": "6\n"}
    assert r["prompts"] == [{"prompt": "name? ", "password": False}, {"prompt": "pw? ", "password": True}]


def test_what_the_editor_sends_while_the_user_types(serve):
    r = jupyterlab(serve(token_default=True), "shell")
    assert r["complete"]["status"] == "ok" and "alpha_beta" in r["complete"]["matches"]
    assert r["inspect"]["status"] == "ok" and r["inspect"]["found"] is True
    assert "Return the number of items" in r["inspect"]["data"]["text/plain"]
    assert r["history"]["status"] == "ok"
    assert [h[2] for h in r["history"]["history"]] == ["import os\nalpha_beta = 1"]
    assert r["incomplete"] == {"status": "incomplete", "indent": "    "}
    assert r["complete_code"]["status"] == "complete"
    assert r["comm_info"]["status"] == "ok" and isinstance(r["comm_info"]["comms"], dict)
    assert r["info"]["implementation"] == "ipython"
    # JupyterLab shows its debugger for kernels whose kernelspec says so.
    assert r["spec"]["spec"]["metadata"]["debugger"] is True


def test_the_debugger_stops_at_a_breakpoint_and_goes_on(serve):
    r = jupyterlab(serve(token_default=True), "debugger")
    assert r["initialize"]["success"] is True, r["initialize"]
    assert r["attach"]["success"] is True, r["attach"]
    assert r["debug_info"]["body"]["isStarted"] is True
    assert r["breakpoints"]["body"]["breakpoints"][0]["verified"] is True
    assert r["stopped"]["reason"] == "breakpoint"
    top = r["stack"]["body"]["stackFrames"][0]
    assert top["name"] == "f" and top["line"] == 2
    assert r["continue"]["success"] is True
    assert r["result"] == {"status": "ok", "stdout": "42"}
    assert "stopped" in r["events"] and "continued" in r["events"]


def sessions_api(s, method, path="", body=None):
    r = requests.request(method, s.url + "/api/sessions" + path, data=None if body is None else json.dumps(body),
                         headers=JSON, timeout=60)
    return r.status_code, (r.json() if r.content else None), r


def test_the_sessions_api_edges(serve, daemon):
    s = serve()
    assert sessions_api(s, "GET")[:2] == (200, [])
    status, body, _ = sessions_api(s, "POST", body={"name": "no path"})
    assert status == 400 and body["error"] == "bad_request" and "path" in body["message"]
    status, body, _ = sessions_api(s, "POST", body={"path": "a.ipynb", "kernel": {"name": "no-such-kernel"}})
    assert status == 404 and body["error"] == "unknown_kernel"
    assert sessions_api(s, "GET")[1] == []
    # Without --root the kernel starts in the pool's own directory; type defaults to notebook.
    status, made, r = sessions_api(s, "POST", body={"path": "a.ipynb"})
    assert status == 201 and made["type"] == "notebook" and made["name"] == ""
    assert r.headers["location"] == "/api/sessions/" + made["id"]
    # A second session on the first one's kernel, by id; an unknown id starts a kernel instead.
    status, shared, _ = sessions_api(s, "POST", body={"path": "console-1", "type": "console",
                                                      "kernel": {"id": made["kernel"]["id"]}})
    assert status == 201 and shared["kernel"]["id"] == made["kernel"]["id"] and "notebook" not in shared
    status, other, _ = sessions_api(s, "POST", body={"path": "b.ipynb", "kernel": {"id": "nope"}})
    assert status == 201 and other["kernel"]["id"] not in (made["kernel"]["id"], "nope")
    assert [x["id"] for x in sessions_api(s, "GET")[1]] == [made["id"], shared["id"], other["id"]]
    # PATCH to a kernel id that is not there: 400, nothing changed.
    status, body, _ = sessions_api(s, "PATCH", "/" + other["id"], {"kernel": {"id": "nope"}})
    assert status == 400
    assert sessions_api(s, "GET", "/" + other["id"])[1]["kernel"]["id"] == other["kernel"]["id"]
    # PATCH onto another session's kernel by id: the kernel it left is shut down.
    status, moved, _ = sessions_api(s, "PATCH", "/" + other["id"], {"kernel": {"id": made["kernel"]["id"]}})
    assert status == 200 and moved["kernel"]["id"] == made["kernel"]["id"]
    kernels = [k["id"] for k in requests.get(s.url + "/api/kernels", timeout=60).json()]
    assert kernels == [made["kernel"]["id"]]
    # A kernel deleted under its sessions takes them with it (as jupyter_server drops them).
    assert requests.delete(s.url + "/api/kernels/" + made["kernel"]["id"], timeout=60).status_code == 204
    assert sessions_api(s, "GET")[1] == []
    assert sessions_api(s, "GET", "/" + made["id"])[0] == 404
    assert sessions_api(s, "DELETE", "/" + made["id"])[0] == 404
    assert sessions_api(s, "PATCH", "/" + made["id"], {"name": "x"})[0] == 404
    # DELETE shuts the session's kernel down; kpoold gets it back.
    status, last, _ = sessions_api(s, "POST", body={"path": "c.ipynb"})
    assert status == 201
    assert sessions_api(s, "DELETE", "/" + last["id"])[0] == 204
    assert requests.get(s.url + "/api/kernels", timeout=60).json() == []
    wait_until(lambda: all(p["leased"] == 0 for p in daemon.status()["pools"]), timeout=20, what="no kernel leased")
