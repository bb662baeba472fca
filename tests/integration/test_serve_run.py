"""kpool serve's /v1/run/{path}: notebooks under --root, run as `kpool run` runs them (the
response cell's output in its own type, parameters typed as -p types them, the executed
notebook, errors and time limits, --save-dir), and what it refuses."""
import json
import os
import re
import subprocess
import time

import nbformat
import pytest
import requests

from serve_fixtures import KPOOL, PNG, daemon, root, serve  # noqa: F401 (fixtures)


def test_run_answers_with_the_response_cells_output_in_its_own_type(serve, root):
    s = serve("--root", str(root))
    r = s.post("/v1/run/json.ipynb", {"parameters": {"a": 41, "b": "y"}})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json" and r.json() == {"sum": 42, "b": "y"}
    r = s.post("/v1/run/json.ipynb", {"parameters": {"a": 2**70, "b": "y"}})  # Python's ints, exact
    assert r.status_code == 200 and r.json() == {"sum": 2**70 + 1, "b": "y"}, r.text
    r = s.get("/v1/run/png.ipynb")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content == PNG
    r = s.get("/v1/run/cwd.ipynb")
    assert r.text == str(root) + "\n"  # the notebook's folder unless the request says otherwise


def test_run_by_get_types_query_parameters_as_dash_p_does(serve, root):
    r = serve("--root", str(root)).get("/v1/run/plain.ipynb?a=21&b=True&format=outputs")
    assert r.status_code == 200, r.text
    printed = [c["outputs"] for c in r.json()["cells"] if c["outputs"]]
    assert printed == [[{"name": "stdout", "output_type": "stream", "text": ["42 True\n"]}]]


def test_run_gives_the_notebook_kpool_run_writes(serve, root, daemon, tmp_path):
    r = serve("--root", str(root)).post("/v1/run/plain.ipynb", {"parameters": {"a": 5}})
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ipynb+json"
    served = json.loads(r.text)
    out = tmp_path / "out.ipynb"
    subprocess.run([KPOOL, "--endpoint", daemon.endpoint, "run", str(root / "plain.ipynb"), str(out),
                    "-p", "a", "5", "--cwd", str(root)], check=True, capture_output=True, timeout=120)
    written = json.loads(out.read_text())

    def shape(nb):
        return [(c["cell_type"], c["source"], c["metadata"].get("tags"), c.get("outputs"),
                 c["metadata"].get("papermill", {}).get("status")) for c in nb["cells"]]

    assert shape(served) == shape(written)
    assert served["metadata"]["papermill"]["parameters"] == {"a": 5}
    assert served["cells"][2]["metadata"]["tags"] == ["injected-parameters"]


def test_a_cell_that_raises_is_the_codes_outcome_not_a_server_error(serve, root):
    """The status is about the request, `Kpool-Outcome` about the code: a cell that raises is a
    200 with the notebook as `kpool run` writes it, the outputs with the error, or, for a
    notebook that answers with a tagged cell (which never ran), the error itself."""
    s = serve("--root", str(root))
    r = s.get("/v1/run/fail.ipynb")
    assert r.status_code == 200 and r.headers["kpool-outcome"] == "error"
    nb = nbformat.reads(r.text, as_version=4)
    assert nb.metadata.papermill.exception is True
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert [(e.ename, e.evalue) for e in errors] == [("ValueError", "bad")]
    assert nb.cells[-1].execution_count is None  # the cell after it never ran

    r = s.get("/v1/run/fail.ipynb?format=outputs")
    assert r.status_code == 200 and r.headers["kpool-outcome"] == "error"
    body = r.json()
    assert body["error"]["ename"] == "ValueError" and body["error"]["evalue"] == "bad"
    assert "ValueError: bad" in body["error"]["traceback_text"] and "\x1b[" not in body["error"]["traceback_text"]
    outputs = {c["cell"]: c["outputs"] for c in body["cells"]}  # `cell`: the index in the notebook
    assert outputs[body["error"]["cell"]][-1]["ename"] == "ValueError"
    assert len(outputs) == 3

    r = s.get("/v1/run/fail_api.ipynb")
    assert r.status_code == 200 and r.headers["kpool-outcome"] == "error"
    body = r.json()
    assert body["error"] == "cell_error" and body["ename"] == "ValueError" and body["traceback"]
    assert s.get("/v1/run/plain.ipynb").headers["kpool-outcome"] == "ok"


def test_a_cell_over_the_time_limit_is_504_with_what_ran_before(serve, root):
    s = serve("--root", str(root))
    started = time.monotonic()
    r = s.post("/v1/run/slow.ipynb", {"timeout": 1})
    assert r.status_code == 504 and time.monotonic() - started < 20
    body = r.json()
    assert "timed out" in body["message"] and "kpool-outcome" not in r.headers
    cells = [c for c in body["notebook"]["cells"] if c["cell_type"] == "code"]
    assert "".join(cells[0]["outputs"][0]["text"]) == "made\n"
    r = s.post("/v1/run/slow.ipynb?format=outputs", {"timeout": 1})
    assert r.status_code == 504 and "".join(r.json()["cells"][0]["outputs"][0]["text"]) == "made\n"


@pytest.mark.parametrize("path, status", [
    ("/v1/run/missing.ipynb", 404), ("/v1/run/../../etc/passwd", 404), ("/v1/run/escape.ipynb", 404),
    ("/v1/run/broken.ipynb", 500), ("/v1/run/plain.ipynb?format=xml", 400)])
def test_run_refuses_what_is_not_a_notebook_under_the_root(serve, root, path, status):
    r = requests.get(serve("--root", str(root)).url + path, timeout=30)
    assert r.status_code == status, r.text
    assert r.json()["error"]


def test_run_without_a_root_runs_nothing(serve):
    r = serve().get("/v1/run/plain.ipynb")
    assert r.status_code == 404 and "--root" in r.json()["message"]


def test_save_dir_keeps_each_executed_notebook_under_its_request_id(serve, root, tmp_path):
    s = serve("--root", str(root), "--save-dir", str(tmp_path))
    r = s.get("/v1/run/plain.ipynb?a=3", headers={"X-Request-Id": "nightly-7"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "nightly-7"
    saved = nbformat.read(str(tmp_path / "nightly-7.ipynb"), as_version=4)
    assert saved.metadata.papermill.parameters == {"a": 3}
    # A failed run is kept too; an id that is not a plain name is replaced, never used as a path.
    r = s.get("/v1/run/fail.ipynb", headers={"X-Request-Id": "../../escape"})
    assert r.status_code == 200 and re.fullmatch(r"[0-9a-f]{16}", r.headers["x-request-id"])
    assert (tmp_path / (r.headers["x-request-id"] + ".ipynb")).exists()
    assert sorted(os.listdir(tmp_path)) == sorted(["nightly-7.ipynb", r.headers["x-request-id"] + ".ipynb"])


def test_run_refuses_parameters_that_are_not_an_object(serve, root):
    r = serve("--root", str(root)).post("/v1/run/plain.ipynb", {"parameters": [1]})
    assert r.status_code == 400 and r.json()["message"] == "field 'parameters' must be an object"
