"""`kpool run` (issue #11, part 1): notebooks run the way papermill runs them, on warm kernels.
Outputs are compared with nbclient's (Debian's python3-nbclient) for the same notebook on a
corpus that covers streams, images, display updates, clear_output(wait=True), errors, the
skip-execution and raises-exception tags, unicode, empty cells, magics and shell escapes, input()
with stdin disallowed, sys.exit variants and long outputs; parameters for python (ipykernel) and
R (IRkernel); papermill's metadata and error cells; a dying kernel, a timeout, Ctrl-C; bad
input; many notebooks at once."""
import json
import os
import re
import signal
import subprocess
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from conftest import HERE, coalesced, reference_kernel_manager, wait_until

KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")

POOLS = """
[pools.python3]
size = 2
[pools.ir]
size = 1
"""

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def python_nb(cells, **metadata):
    return new_notebook(cells=cells, metadata=dict({"kernelspec": {
        "name": "python3", "language": "python", "display_name": "Python 3"}}, **metadata))


def tagged(cell, *tags):
    cell.metadata["tags"] = list(tags)
    return cell


def corpus():
    return python_nb([
        new_markdown_cell("# Corpus \u00e9\u4e2d\U0001f600"),
        tagged(new_code_cell("alpha = 1\nname = 'n'"), "parameters"),
        new_code_cell("import sys\nprint('out'); print('err', file=sys.stderr); print('more')"),
        new_code_cell("from IPython.display import Image, display, HTML, clear_output\nimport base64\n"
                      "display(Image(data=base64.b64decode('%s')))\nHTML('<b>h</b>')" % PNG),
        new_code_cell("h = display(HTML('<i>1</i>'), display_id='d1')"),
        new_code_cell("h.update(HTML('<i>2</i>'))\ndisplay(HTML('<i>3</i>'), display_id='d1')"),
        new_code_cell("print('gone'); clear_output(wait=True); print('kept')"),
        new_code_cell(""),
        new_code_cell("   \n"),
        new_raw_cell("raw stays"),
        tagged(new_code_cell("print('skipped')"), "skip-execution"),
        tagged(new_code_cell("raise ValueError('allowed')"), "raises-exception"),
        tagged(new_code_cell("input('name? ')"), "raises-exception"),
        new_code_cell("print('caf\u00e9 \u4e2d \U0001f600')"),
        new_code_cell("%%capture\nprint('captured')"),
        new_code_cell("%env KPOOL_X=1\n!echo shell"),
        new_code_cell("for i in range(2000):\n    print(i, 'x' * 50)"),
        new_code_cell("{'k': [1, 2.5, None]}"),
        new_code_cell("alpha, name"),
    ])


def normalized(nb):
    """Cells' sources, outputs and execution counts: what must equal nbclient's."""
    out = []
    for cell in nb["cells"]:
        if "papermill-error-cell-tag" in cell["metadata"].get("tags", []):
            continue
        c = {"cell_type": cell["cell_type"], "source": cell["source"]}
        if cell["cell_type"] == "code":
            c["outputs"] = coalesced(cell["outputs"])
            c["execution_count"] = cell["execution_count"]
        out.append(c)
    return out


def kpool_run(d, *args, timeout=120, **kw):
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)  # a piped stdin would be a notebook to run
    return subprocess.run([KPOOL, "--endpoint", d.endpoint, "run"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, **kw)


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def shared_daemon(module_kpoold):
    return module_kpoold(POOLS)


@pytest.fixture
def daemon(shared_daemon):
    shared_daemon.wait_warm("python3", 2, timeout=60)
    return shared_daemon


def test_outputs_equal_nbclients_on_the_corpus(daemon, tmp_path):
    src = tmp_path / "corpus.ipynb"
    nbformat.write(corpus(), str(src))
    out = tmp_path / "out.ipynb"
    r = kpool_run(daemon, src, out, "-p", "alpha", "2", "-r", "name", "raw")
    assert r.returncode == 0, r.stderr
    ours = read(out)
    # nbclient on the same parameterized notebook (kpool's --prepare-only writes it).
    prepared = tmp_path / "prepared.ipynb"
    assert kpool_run(daemon, src, prepared, "-p", "alpha", "2", "-r", "name", "raw",
                     "--prepare-only").returncode == 0
    nb = nbformat.read(str(prepared), as_version=4)
    NotebookClient(nb, km=reference_kernel_manager("python3", tmp_path),
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    theirs = json.loads(nbformat.writes(nb))
    assert normalized(ours) == normalized(theirs)
    # What papermill adds.
    pm = ours["metadata"]["papermill"]
    assert pm["parameters"] == {"alpha": 2, "name": "raw"}
    assert pm["exception"] is None and pm["duration"] > 0
    assert pm["input_path"] == str(src) and pm["output_path"] == str(out)
    assert ours["metadata"]["language_info"]["name"] == "python"
    statuses = {c["metadata"]["papermill"]["status"] for c in ours["cells"]}
    assert statuses == {"completed"}
    timed = ours["cells"][3]["metadata"]["execution"]
    assert set(timed) == {"iopub.status.busy", "iopub.execute_input", "shell.execute_reply",
                          "iopub.status.idle"}
    # The file is exactly what nbformat writes.
    text = out.read_text(encoding="utf-8")
    assert text == nbformat.writes(nbformat.read(str(out), as_version=4)) + "\n"


def test_parameters_merge_in_papermills_order_and_type(daemon, tmp_path):
    src = tmp_path / "p.ipynb"
    nbformat.write(python_nb([tagged(new_code_cell("a = 0\nb = 0\nc = 0"), "parameters"),
                              new_code_cell("print(repr((a, b, c)))")]), str(src))
    (tmp_path / "p.yaml").write_text("a: from-file\nb: 1.5\nd: [1, yes]\n")
    out = tmp_path / "out.ipynb"
    r = kpool_run(daemon, "-r", "c", "raw", src, "-p", "a", "True", out, "-y", "b: {k: v}\nc: 3",
                  "-f", tmp_path / "p.yaml", "-p", "e", "None")
    assert r.returncode == 0, r.stderr
    nb = read(out)
    injected = nb["cells"][1]
    assert injected["metadata"]["tags"] == ["injected-parameters"]
    assert "".join(injected["source"]) == (
        '# Parameters\na = True\nb = {"k": "v"}\nd = [1, True]\nc = "raw"\ne = None\n')
    assert "".join(nb["cells"][2]["outputs"][0]["text"]) == "(True, {'k': 'v'}, 'raw')\n"
    assert "Passed unknown parameter: d" in r.stderr and "Passed unknown parameter: e" in r.stderr


def test_r_parameters_on_irkernel(daemon, tmp_path):
    daemon.wait_warm("ir", 1, timeout=90)
    nb = new_notebook(cells=[tagged(new_code_cell("n <- 1\nlabel <- 'a'"), "parameters"),
                             new_code_cell("cat(n * 2, label, is.null(missing_one))")],
                      metadata={"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    src = tmp_path / "r.ipynb"
    nbformat.write(nb, str(src))
    out = tmp_path / "out.ipynb"
    r = kpool_run(daemon, src, out, "-p", "n", "21", "-p", "label", 'x"y', "-p", "missing_one", "None")
    assert r.returncode == 0, r.stderr
    got = read(out)
    assert "".join(got["cells"][1]["source"]) == '# Parameters\nn = 21\nlabel = "x\\"y"\nmissing_one = NULL\n'
    assert "".join(got["cells"][2]["outputs"][0]["text"]) == '42 x"y TRUE'
    assert got["metadata"]["language_info"]["name"] == "R"


def test_a_failing_cell_is_reported_and_marked_as_papermill_marks_it(daemon, tmp_path):
    src = tmp_path / "f.ipynb"
    nbformat.write(python_nb([new_code_cell("x = 1"), new_code_cell("raise KeyError('gone')"),
                              new_code_cell("print('never')")]), str(src))
    out = tmp_path / "out.ipynb"
    r = kpool_run(daemon, src, out)
    assert r.returncode == 1
    assert "cell 1 (In [2]) raised KeyError: 'gone'" in r.stderr and "\x1b[" not in r.stderr
    nb = read(out)
    tags = [c["metadata"].get("tags") for c in nb["cells"]]
    # Every cell has tags, as papermill gives each one ([] when it had none).
    assert tags == [["papermill-error-cell-tag"], [], ["papermill-error-cell-tag"], [], []]
    assert "In [2]" in "".join(nb["cells"][0]["source"])
    assert [c["metadata"]["papermill"]["status"] for c in nb["cells"] if "papermill" in c["metadata"]] == [
        "completed", "failed", "pending"]
    assert nb["metadata"]["papermill"]["exception"] is True
    # --allow-errors runs on.
    r = kpool_run(daemon, src, out, "--allow-errors")
    assert r.returncode == 0, r.stderr
    assert "".join(read(out)["cells"][2]["outputs"][0]["text"]) == "never\n"


@pytest.mark.parametrize("code, status", [("import sys; sys.exit()", 0), ("import sys; sys.exit(0)", 0),
                                          ("raise SystemExit(0)", 0), ("import sys; sys.exit(3)", 1)])
def test_sys_exit_zero_ends_the_run_as_a_success(daemon, tmp_path, code, status):
    src = tmp_path / "e.ipynb"
    nbformat.write(python_nb([new_code_cell(code), new_code_cell("print('after')")]), str(src))
    r = kpool_run(daemon, src, tmp_path / "out.ipynb")
    assert r.returncode == status, r.stderr
    assert not read(tmp_path / "out.ipynb")["cells"][-1].get("outputs")


def test_a_dying_kernel_and_a_timeout(daemon, tmp_path):
    src = tmp_path / "d.ipynb"
    nbformat.write(python_nb([new_code_cell("print('before')"), new_code_cell("import os; os._exit(1)"),
                              new_code_cell("print('after')")]), str(src))
    out = tmp_path / "out.ipynb"
    r = kpool_run(daemon, src, out)
    assert r.returncode == 138 and "kernel died" in r.stderr
    nb = read(out)
    assert "".join(nb["cells"][0]["outputs"][0]["text"]) == "before\n"
    # As papermill records it (DeadKernelError): the cell "completed", no error cells.
    assert nb["cells"][1]["metadata"]["papermill"]["status"] == "completed"
    assert not [c for c in nb["cells"] if "papermill-error-cell-tag" in c["metadata"].get("tags", [])]
    nbformat.write(python_nb([new_code_cell("import time; time.sleep(60)"), new_code_cell("1")]), str(src))
    start = time.monotonic()
    r = kpool_run(daemon, src, out, "--execution-timeout", "1")
    assert r.returncode == 1 and "timed out" in r.stderr
    assert time.monotonic() - start < 20
    # As papermill records it (nbclient's CellTimeoutError escapes it): the interrupt's
    # KeyboardInterrupt kept, the cell "completed", no error cells; exit 1 all the same.
    cells = read(out)["cells"]
    errors = [o for o in cells[0]["outputs"] if o["output_type"] == "error"]
    assert errors[-1]["ename"] == "KeyboardInterrupt"
    assert cells[0]["metadata"]["papermill"]["status"] == "completed"
    assert not [c for c in cells if "papermill-error-cell-tag" in c["metadata"].get("tags", [])]
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, what="the kernels to be released")


def test_ctrl_c_writes_the_output_and_releases(daemon, tmp_path):
    src = tmp_path / "c.ipynb"
    nbformat.write(python_nb([new_code_cell("print('started', flush=True)\nimport time; time.sleep(60)")]), str(src))
    out = tmp_path / "out.ipynb"
    stdout = tmp_path / "stdout.txt"
    p = subprocess.Popen([KPOOL, "--endpoint", daemon.endpoint, "run", str(src), str(out), "--stdout-file", str(stdout)],
                         stderr=subprocess.PIPE, text=True)
    # The cell has printed (not merely started: an interrupt before its print leaves no output).
    wait_until(lambda: stdout.exists() and "started" in stdout.read_text(), timeout=30, what="the cell to print")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    # As papermill ends on Ctrl-C: "Aborted!", exit 1, the cell "completed", no error cells (its
    # output so far is kept, where papermill's is lost).
    assert p.returncode == 1 and "Aborted!" in err, err
    nb = read(out)
    assert nb["cells"][0]["metadata"]["papermill"]["status"] == "completed"
    assert "started" in "".join(nb["cells"][0]["outputs"][0]["text"])
    assert not [c for c in nb["cells"] if "papermill-error-cell-tag" in c["metadata"].get("tags", [])]
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, what="the kernel to be released")


def test_bad_input_fails_before_any_kernel_is_taken(daemon, tmp_path):
    before = daemon.pool("python3")["counters"]["acquired"]
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [\n  oops\n]}')
    r = kpool_run(daemon, bad, tmp_path / "o.ipynb")
    assert r.returncode == 2 and "%s:2:3: not valid JSON" % bad in r.stderr
    v2 = tmp_path / "v2.ipynb"  # version 3 is upgraded (test_papermill_parity); older is not
    v2.write_text('{"nbformat": 2, "nbformat_minor": 0, "worksheets": [], "metadata": {}}')
    r = kpool_run(daemon, v2, tmp_path / "o.ipynb")
    assert r.returncode == 2 and "not an nbformat 4 notebook (nbformat is 2)" in r.stderr
    good = tmp_path / "good.ipynb"
    nbformat.write(python_nb([new_code_cell("1")]), str(good))
    r = kpool_run(daemon, good, tmp_path / "no" / "such" / "dir" / "o.ipynb")
    assert r.returncode == 2 and "cannot write there" in r.stderr
    nb = python_nb([new_code_cell("1")])
    nb.metadata.kernelspec.name = "no-such-kernel"
    nbformat.write(nb, str(good))
    r = kpool_run(daemon, good, tmp_path / "o.ipynb")
    assert r.returncode == 2 and "no pool runs kernelspec 'no-such-kernel'" in r.stderr and "python3" in r.stderr
    assert kpool_run(daemon, good, tmp_path / "o.ipynb", "-k", "python3").returncode == 0
    assert daemon.pool("python3")["counters"]["acquired"] == before + 1  # only the last one took a kernel
    r = kpool_run(daemon, good, tmp_path / "o.ipynb")
    assert r.returncode == 2


def test_prepare_only_stdin_stdout_and_many_notebooks(daemon, tmp_path):
    src = tmp_path / "s.ipynb"
    nbformat.write(python_nb([tagged(new_code_cell("x = 1"), "parameters"), new_code_cell("print(x)")]), str(src))
    r = kpool_run(daemon, "-", "-", "-p", "x", "5", input=src.read_text())
    assert r.returncode == 0, r.stderr
    nb = json.loads(r.stdout)
    assert "".join(nb["cells"][2]["outputs"][0]["text"]) == "5\n"
    r = kpool_run(daemon, src, tmp_path / "prep.ipynb", "--prepare-only", "-p", "x", "7")
    assert r.returncode == 0
    assert read(tmp_path / "prep.ipynb")["cells"][2]["outputs"] == []
    failing = tmp_path / "failing.ipynb"
    nbformat.write(python_nb([new_code_cell("1/0")]), str(failing))
    inputs = [src] * 3 + [failing]
    copies = []
    for i, path in enumerate(inputs):
        copy = tmp_path / ("n%d.ipynb" % i)
        copy.write_text(path.read_text())
        copies.append(copy)
    r = kpool_run(daemon, *copies, "--output-dir", tmp_path / "outs", "-j", "2")
    assert r.returncode == 1
    *each, total = r.stdout.splitlines()
    lines = sorted(each)
    assert len(lines) == 4 and sum(": ok (" in l for l in lines) == 3 and "failed" in lines[3]
    # Issue #53: the total last.
    assert re.fullmatch(r"4 notebooks: 3 ok, 1 failed in \d+\.\d s", total), total
    assert all((tmp_path / "outs" / c.name).exists() for c in copies)
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, what="every kernel released")
