"""Cells sent ahead (issue #49, item 1): a notebook's next execute_requests wait at the kernel while
one runs, through `kpool run` and kpool serve's /v1/run, so that the kernel goes from one cell to
the next without waiting for us; only where the kernel aborts what queued behind an error
(ipykernel), never behind a cell that may raise without stopping it, and the notebook written is
the one a cell-at-a-time run writes. Each check runs beside its control, `--cells-ahead 1`
(nbclient's way). Timing-free: the kernel itself reports what waits in its queue."""
import json
import os
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from conftest import module_daemon
from test_run import corpus, normalized
from serve_fixtures import serve_processes

HERE = os.path.dirname(os.path.abspath(__file__))
KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")

POOLS = """
[pools.python3]
size = 2
"""

# ipykernel 6's queue of shell requests it has received and not yet handled, read while the
# first cell sleeps (the next requests, if sent, have arrived by then); the flush moves what its
# socket holds into the queue, as ipykernel does itself before it aborts after an error.
QUEUED = ("import time\ntime.sleep(0.5)\nk = get_ipython().kernel\nk.shell_stream.flush()\n"
          "print('queued', k.msg_queue.qsize(), 'abort window', k.stop_on_error_timeout)")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "ahead-daemon")


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)


def python_nb(path, *cells):
    nb = new_notebook(cells=list(cells), metadata={"kernelspec": {
        "name": "python3", "language": "python", "display_name": "Python 3"}})
    nbformat.write(nb, str(path))
    return path


def tagged(cell, *tags):
    cell.metadata["tags"] = list(tags)
    return cell


def kpool_run(daemon, src, out, *args, cwd=None):
    return subprocess.run([KPOOL, "--endpoint", daemon.endpoint, "run", str(src), str(out), *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd)


def texts(nb):
    """Each code cell's stream text (a file has it as a list of lines)."""
    def text(o):
        t = o.get("text", "")
        return "".join(t) if isinstance(t, list) else t
    return ["".join(text(o) for o in c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code"]


def test_the_next_cells_wait_at_the_kernel_and_with_one_at_a_time_none_do(daemon, serve, tmp_path):
    # The first cell goes alone (its reply confirms the kernel's abort window is widened); the
    # second one is measured.
    src = python_nb(tmp_path / "queue.ipynb", new_code_cell("first = 1"), new_code_cell(QUEUED),
                    new_markdown_cell("between"), *[new_code_cell("x%d = %d" % (i, i)) for i in range(5)])
    seen = {}
    for ahead in ("4", "2", "1"):
        r = kpool_run(daemon, src, tmp_path / ("out%s.ipynb" % ahead), "--cells-ahead", ahead)
        assert r.returncode == 0, r.stderr
        seen[ahead] = texts(json.load(open(tmp_path / ("out%s.ipynb" % ahead))))[1]
    # Four at the kernel at once: the running cell and three behind it; the abort window widened
    # by the first cell. One at a time: nothing behind it, the kernel as papermill leaves it.
    assert seen == {"4": "queued 3 abort window 5.0\n", "2": "queued 1 abort window 5.0\n",
                    "1": "queued 0 abort window 0.0\n"}

    for ahead, expected in (("4", "queued 3 abort window 5.0\n"), ("1", "queued 0 abort window 0.0\n")):
        s = serve("--root", str(tmp_path), "--cells-ahead", ahead)
        r = s.get("/v1/run/queue.ipynb?format=outputs")
        assert r.status_code == 200, r.text
        assert "".join(r.json()["cells"][1]["outputs"][0]["text"]) == expected


def test_nothing_runs_after_a_cell_that_stops_the_run(daemon, serve, tmp_path):
    """ran_N files are written by the cells that run: the cell tagged raises-exception may raise
    and the run goes on; the first cell that raises untagged stops it, and with the cells behind
    it already at the kernel, none of them runs."""
    def write(n):
        return new_code_cell("open('ran_%d', 'w').close()" % n)
    python_nb(tmp_path / "stops.ipynb", write(0), tagged(new_code_cell("raise KeyError('allowed')"), "raises-exception"),
              write(2), new_code_cell("raise ValueError('stop')"), write(4), write(5), write(6))
    for ahead in ("4", "1"):
        work = tmp_path / ("run" + ahead)
        work.mkdir()
        r = kpool_run(daemon, tmp_path / "stops.ipynb", work / "out.ipynb", "--cells-ahead", ahead, cwd=str(work))
        assert r.returncode == 1, r.stderr
        assert sorted(os.listdir(work)) == ["out.ipynb", "ran_0", "ran_2"], ahead
        out = json.load(open(work / "out.ipynb"))
        code = [c for c in out["cells"] if c["cell_type"] == "code"]
        assert [c["execution_count"] for c in code] == [1, 2, 3, 4, None, None, None], ahead
    for name in ("ran_0", "ran_2"):
        os.unlink(tmp_path / name) if os.path.exists(tmp_path / name) else None
    s = serve("--root", str(tmp_path))  # the notebook's folder is its kernel's cwd
    r = s.get("/v1/run/stops.ipynb?format=outputs")
    assert r.status_code == 200 and r.headers["Kpool-Outcome"] == "error", r.text
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("ran_")) == ["ran_0", "ran_2"]


def test_a_cell_that_may_raise_has_nothing_behind_it_when_its_time_runs_out(daemon, tmp_path):
    """An interrupt ends a raises-exception cell without the kernel aborting what waits behind it
    (stop_on_error is off for it), so nothing may wait there: after the time limit, no cell runs."""
    python_nb(tmp_path / "limit.ipynb", tagged(new_code_cell("import time\ntime.sleep(30)"), "raises-exception"),
              new_code_cell("open('ran_1', 'w').close()"))
    r = kpool_run(daemon, tmp_path / "limit.ipynb", tmp_path / "out.ipynb", "--execution-timeout", "2",
                  cwd=str(tmp_path))
    assert r.returncode == 1 and "timed out" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "ran_1")


def test_a_cell_sent_ahead_gets_its_whole_time_limit_from_when_it_begins(daemon, tmp_path):
    """Two cells of 1.5 s under a 2.5 s limit each: the second was sent with the first, 3 s
    before it ends, and still has its 2.5 s."""
    src = python_nb(tmp_path / "slow.ipynb", new_code_cell("import time\ntime.sleep(1.5)"),
                    new_code_cell("time.sleep(1.5)\nprint('done')"))
    r = kpool_run(daemon, src, tmp_path / "out.ipynb", "--execution-timeout", "2.5")
    assert r.returncode == 0, r.stderr
    assert texts(json.load(open(tmp_path / "out.ipynb")))[1] == "done\n"


def test_the_notebook_is_the_one_a_cell_at_a_time_run_writes(daemon, tmp_path):
    nbformat.write(corpus(), str(tmp_path / "corpus.ipynb"))
    outs = {}
    for ahead in ("4", "1"):
        r = kpool_run(daemon, tmp_path / "corpus.ipynb", tmp_path / ("out%s.ipynb" % ahead), "--cells-ahead", ahead,
                      "-p", "alpha", "2")
        assert r.returncode == 0, r.stderr
        outs[ahead] = normalized(json.load(open(tmp_path / ("out%s.ipynb" % ahead))))
    assert outs["4"] == outs["1"]


def test_cells_ahead_is_checked(daemon, tmp_path):
    src = python_nb(tmp_path / "one.ipynb", new_code_cell("1"))
    for bad in ("0", "65", "x", "1.5"):
        r = kpool_run(daemon, src, tmp_path / "out.ipynb", "--cells-ahead", bad)
        assert r.returncode == 2 and "--cells-ahead" in r.stderr, (bad, r.stderr)
