"""`kpool run` against papermill 2.6.0 itself (../shared/anchors/papermill, run with Debian's
python3 and packages): the same notebooks and arguments through both, the executed notebooks
compared (times, ids and the kernel's own addresses left out) and the exit codes too, so that a
difference cannot come back unnoticed. papermill starts its kernel cold from the same python3
kernelspec that the pool runs."""
import base64
import json
import os
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from conftest import SOURCE_DIR

KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(SOURCE_DIR, "build", "kpool")
PAPERMILL = os.path.join(os.path.dirname(SOURCE_DIR), "shared", "anchors", "papermill")
PAPERMILL_NOTEBOOKS = os.path.join(PAPERMILL, "papermill", "tests", "notebooks")

if not os.path.isdir(PAPERMILL):
    if os.environ.get("CI"):
        raise RuntimeError("papermill's source is missing at %s: the parity suite needs it" % PAPERMILL)
    pytest.skip("papermill's source is not beside this checkout", allow_module_level=True)

POOLS = """
[pools.python3]
kernelspec = "python3"
size = 2
"""

# Left out of the comparison: what differs run to run (times, cell ids, the kernel's session),
# and what kpool records of itself (metadata.papermill.version).
TIME_KEYS = {"start_time", "end_time", "duration"}


def normalized(nb):
    nb = json.loads(json.dumps(nb))
    pm = nb["metadata"].get("papermill", {})
    for k in TIME_KEYS | {"version"}:
        pm.pop(k, None)
    pm.pop("input_path", None)
    pm.pop("output_path", None)
    nb["metadata"].pop("language_info", None)
    nb.pop("nbformat_minor", None)
    for cell in nb["cells"]:
        cell.pop("id", None)
        md = cell.get("metadata", {})
        md.pop("execution", None)
        if not md.get("tags"):
            md.pop("tags", None)
        for k in TIME_KEYS:
            md.get("papermill", {}).pop(k, None)
        if cell["cell_type"] == "code":
            outputs = []
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and outputs and \
                        outputs[-1].get("output_type") == "stream" and outputs[-1]["name"] == out["name"]:
                    outputs[-1]["text"] += out["text"]  # the kernel batches writes by timing
                    continue
                if out.get("output_type") == "error":
                    out.pop("traceback", None)  # file paths and colours of two processes
                outputs.append(out)
            cell["outputs"] = outputs
    return nb


def env_for(tmp_path, extra=None):
    jdirs = {name: str(tmp_path / "jupyter" / name) for name in ("cfg", "runtime", "ipython")}
    for d in jdirs.values():
        os.makedirs(d, exist_ok=True)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=jdirs["cfg"], JUPYTER_RUNTIME_DIR=jdirs["runtime"],
               IPYTHONDIR=jdirs["ipython"], PYTHONPATH=PAPERMILL)
    env.update(extra or {})
    return env


def run_tool(argv, tmp_path, env, cwd, piped, timeout):
    """`piped`: text sent through a pipe on stdin (papermill reads a notebook from a pipe only)."""
    kw = {"input": piped} if piped is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env_for(tmp_path, env), **kw)


def papermill(tmp_path, *args, env=None, cwd=None, piped=None, timeout=180):
    return run_tool(["/usr/bin/python3", "-m", "papermill", *args], tmp_path, env, cwd, piped, timeout)


def kpool_run(d, tmp_path, *args, env=None, cwd=None, piped=None, timeout=180):
    return run_tool([KPOOL, "--endpoint", d.endpoint, "run", *args], tmp_path, env, cwd, piped, timeout)


def both(d, tmp_path, src, *args, env=None, cwd=None, name="out"):
    """Runs src through both with the same arguments; returns (papermill's, kpool's) results and
    output notebooks (None where none was written)."""
    results = []
    for who, run in (("papermill", papermill), ("kpool", None)):
        out = tmp_path / ("%s-%s.ipynb" % (name, who))
        if run is None:
            r = kpool_run(d, tmp_path, src, out, *args, env=env, cwd=cwd)
        else:
            r = run(tmp_path, src, out, *args, env=env, cwd=cwd)
        nb = json.loads(out.read_text()) if out.exists() else None
        results.append((r, nb))
    return results


def assert_same(results):
    (pr, pnb), (kr, knb) = results
    assert kr.returncode == pr.returncode, (pr.stderr[-2000:], kr.stderr[-2000:])
    assert (pnb is None) == (knb is None)
    if pnb is not None:
        assert normalized(knb) == normalized(pnb)


def write_nb(path, cells, kernel="python3"):
    nb = new_notebook(cells=cells)
    nb.metadata.kernelspec = {"name": kernel, "display_name": "Python 3", "language": "python"}
    nb.metadata.language_info = {"name": "python"}
    nbformat.write(nb, str(path))
    return path


def params_nb(tmp_path):
    params = new_code_cell("alpha = 0.1  # the rate\nname: str = 'x'\nitems = [1, 2]")
    params.metadata["tags"] = ["parameters"]
    return write_nb(tmp_path / "params.ipynb", [
        new_markdown_cell("# A report"), params,
        new_code_cell("print(alpha, name, items)"),
        new_code_cell("{'alpha': alpha, 'name': name}")])


@pytest.fixture(scope="module")
def shared_daemon(module_kpoold):
    # One for the module: its pool refills while papermill starts its cold kernel (a daemon per
    # test was about 150 s of the suite's 240).
    return module_kpoold(POOLS)


@pytest.fixture
def daemon(shared_daemon):
    shared_daemon.wait_warm("python3", 2, timeout=60)
    return shared_daemon


def acquired(d):
    return d.pool("python3")["counters"]["acquired"]


@pytest.mark.parametrize("args", [
    [],
    ["-p", "alpha", "0.5", "-p", "name", "y", "-r", "items", "raw"],
    ["-y", "alpha: 2\nitems: [3, 4]", "-p", "alpha", "True"],
    ["-b", base64.b64encode(b"name: from base64\nalpha: 1e3").decode()],
    ["--inject-paths"],
    ["--inject-input-path", "-p", "name", "z"],
    ["--report-mode", "-p", "alpha", "7"],
    ["--prepare-only", "-p", "alpha", "3"],
    ["--prepare-only", "--prepare-execute"],
    ["--engine", "nbclient", "--no-progress-bar", "--no-log-output"],
    ["--no-request-save-on-cell-execute", "--autosave-cell-every", "0"],
    ["--start_timeout", "60", "--log-level", "WARNING"],
    ["-k", "python3", "-l", "python", "-p", "alpha", "1"],
], ids=lambda a: " ".join(a)[:60] or "plain")
def test_options_give_the_same_notebook(daemon, tmp_path, args):
    src = params_nb(tmp_path)
    if "--inject-paths" in args or "--inject-input-path" in args:
        # The injected paths are each run's own OUTPUT: compare the parameter's presence.
        results = both(daemon, tmp_path, src, *args)
        (pr, pnb), (kr, knb) = results
        assert kr.returncode == pr.returncode == 0, kr.stderr
        for nb in (pnb, knb):
            assert "PAPERMILL_INPUT_PATH" in nb["metadata"]["papermill"]["parameters"]
        return
    assert_same(both(daemon, tmp_path, src, *args))


def test_a_parameters_file(daemon, tmp_path):
    src = params_nb(tmp_path)
    f = tmp_path / "p.yaml"
    f.write_text("alpha: 0.25\nname: from a file\n")
    assert_same(both(daemon, tmp_path, src, "-f", f, "-p", "name", "cli wins"))


def test_error_cells_of_an_earlier_run_are_removed(daemon, tmp_path):
    # papermill's own test notebook: a failed run's output, re-run.
    src = os.path.join(PAPERMILL_NOTEBOOKS, "broken1.ipynb")
    results = both(daemon, tmp_path, src)
    assert_same(results)
    (pr, pnb), (kr, knb) = results
    tagged = [c for c in knb["cells"] if "papermill-error-cell-tag" in c["metadata"].get("tags", [])]
    assert len(tagged) == 2  # this run's two, none of the input's


def test_the_kernel_sees_the_callers_environment_and_directory(daemon, tmp_path):
    src = write_nb(tmp_path / "env.ipynb", [
        new_code_cell("import os\nprint(os.environ.get('MYVAR'), os.getcwd())")])
    here = tmp_path / "here"
    here.mkdir()
    results = both(daemon, tmp_path, src, env={"MYVAR": "x"}, cwd=here)
    assert_same(results)
    assert "".join(results[1][1]["cells"][0]["outputs"][0]["text"]) == "x %s\n" % here
    # A relative --cwd is relative to the caller's directory, as papermill takes it.
    (here / "sub").mkdir()
    results = both(daemon, tmp_path, src, "--cwd", "sub", env={"MYVAR": "y"}, cwd=here, name="rel")
    assert_same(results)
    assert "".join(results[1][1]["cells"][0]["outputs"][0]["text"]) == "y %s\n" % (here / "sub")


def test_stream_files_and_log_output(daemon, tmp_path):
    src = write_nb(tmp_path / "streams.ipynb", [
        new_code_cell("import sys\nprint('out 1'); print('err 1', file=sys.stderr)"),
        new_code_cell("print('out 2')")])
    got = {}
    for who in ("papermill", "kpool"):
        files = [tmp_path / ("%s.stdout" % who), tmp_path / ("%s.stderr" % who)]
        args = [src, tmp_path / ("%s.ipynb" % who), "--stdout-file", files[0], "--stderr-file", files[1],
                "--log-output"]
        r = papermill(tmp_path, *args) if who == "papermill" else kpool_run(daemon, tmp_path, *args)
        assert r.returncode == 0, r.stderr
        got[who] = (files[0].read_text(), files[1].read_text(), r.stderr)
    assert got["kpool"][:2] == got["papermill"][:2] == ("out 1\nout 2\n", "err 1\n")
    for who in got:
        log = got[who][2]
        assert "Executing Cell 1---------------------------------------" in log
        assert "Ending Cell 2------------------------------------------" in log
        assert "out 2" in log and "Input Notebook:" in log and "Output Notebook:" in log


def test_a_piped_notebook_without_paths(daemon, tmp_path):
    src = params_nb(tmp_path)
    outs = {}
    text = src.read_text()
    for who in ("papermill", "kpool"):
        r = (papermill(tmp_path, "-p", "alpha", "9", piped=text) if who == "papermill"
             else kpool_run(daemon, tmp_path, "-p", "alpha", "9", piped=text))
        assert r.returncode == 0, r.stderr
        outs[who] = json.loads(r.stdout)
    assert normalized(outs["kpool"]) == normalized(outs["papermill"])


def test_help_notebook_lists_the_parameters_as_papermill_does(daemon, tmp_path):
    src = params_nb(tmp_path)
    p = papermill(tmp_path, "--help-notebook", src)
    k = kpool_run(daemon, tmp_path, "--help-notebook", src)
    assert k.returncode == p.returncode == 0, (p.stderr, k.stderr)
    assert k.stdout.split("\n", 1)[1] == p.stdout.split("\n", 1)[1]  # after each tool's usage line
    assert "alpha: Unknown type (default 0.1)" in k.stdout and "the rate" in k.stdout
    none = write_nb(tmp_path / "none.ipynb", [new_code_cell("1")])
    assert kpool_run(daemon, tmp_path, "--help-notebook", none).returncode == \
        papermill(tmp_path, "--help-notebook", none).returncode == 1


def test_an_output_symlink_is_written_through_and_keeps_its_mode(daemon, tmp_path):
    src = params_nb(tmp_path)
    for who in ("papermill", "kpool"):
        real = tmp_path / ("%s-real.ipynb" % who)
        real.write_text("{}")
        os.chmod(real, 0o640)
        link = tmp_path / ("%s-link.ipynb" % who)
        link.symlink_to(real)
        r = papermill(tmp_path, src, link) if who == "papermill" else kpool_run(daemon, tmp_path, src, link)
        assert r.returncode == 0, r.stderr
        assert link.is_symlink() and os.stat(real).st_mode & 0o777 == 0o640
        assert json.loads(real.read_text())["cells"]


def test_unsupported_engines_and_remote_paths_are_refused_clearly(daemon, tmp_path):
    before = acquired(daemon)
    src = params_nb(tmp_path)
    r = kpool_run(daemon, tmp_path, src, tmp_path / "o.ipynb", "--engine", "other")
    assert r.returncode == 2 and "nbclient" in r.stderr
    assert papermill(tmp_path, src, tmp_path / "o.ipynb", "--engine", "other").returncode != 0
    r = kpool_run(daemon, tmp_path, "s3://bucket/in.ipynb", tmp_path / "o.ipynb")
    assert r.returncode == 2 and "not supported yet" in r.stderr and "local path" in r.stderr
    assert acquired(daemon) == before


def test_prepare_only_needs_no_daemon(tmp_path):
    src = params_nb(tmp_path)
    out = tmp_path / "prepared.ipynb"
    r = subprocess.run([KPOOL, "--endpoint", "ipc://%s/nobody" % tmp_path, "run", src, out,
                        "--prepare-only", "-p", "alpha", "2"], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    p = papermill(tmp_path, src, tmp_path / "p.ipynb", "--prepare-only", "-p", "alpha", "2")
    assert p.returncode == 0
    assert normalized(json.loads(out.read_text())) == normalized(json.loads((tmp_path / "p.ipynb").read_text()))


# Every name in papermill's translator registry (papermill/translators.py), each a kernel kpool's
# languages/ table must answer as papermill does.
PAPERMILL_TRANSLATORS = ["python", "R", "scala", "julia", "matlab", ".net-csharp", ".net-fsharp",
                         ".net-powershell", "pysparkkernel", "sparkkernel", "sparkrkernel", "bash"]


@pytest.mark.parametrize("kernel", PAPERMILL_TRANSLATORS)
def test_every_papermill_translator_injects_the_same_cell(tmp_path, kernel):
    """--prepare-only starts no kernel, so each language's injected parameters cell is compared
    with papermill's for a kernel this machine does not have; values a language has no literal
    for (None in C#, a dict in bash) must fail in both."""
    nb = new_notebook(cells=[new_code_cell("x")])
    nb.metadata.kernelspec = {"name": kernel, "display_name": kernel, "language": kernel}
    nb.metadata.language_info = {"name": kernel}
    src = tmp_path / "in.ipynb"
    nbformat.write(nb, str(src))
    plain = ["-p", "n", "3", "-p", "big", "3000000000", "-p", "f", "-0.5", "-p", "ok", "True",
             "-r", "s", "a \"q\" 'b' \\ \u00e9 \U0001f600 $x", "-y", "l: [1, two, 2.5]"]
    for args in (plain, ["-y", "d: {k: v, q: 1}"], ["-p", "none", "None"]):
        p = papermill(tmp_path, src, tmp_path / "p.ipynb", "--prepare-only", *args)
        k = subprocess.run([KPOOL, "--endpoint", "ipc://%s/nobody" % tmp_path, "run", src, tmp_path / "k.ipynb",
                            "--prepare-only", *args], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL, env=env_for(tmp_path))
        # papermill's NotImplementedError exits 1; kpool's is its bad-input status, 2, with the
        # reason on one line (as for every bad input of kpool run).
        assert (k.returncode, p.returncode) in ((0, 0), (2, 1)), (args, p.stderr[-1500:], k.stderr[-1500:])
        if p.returncode != 0:
            assert "cannot be written in" in k.stderr
        else:
            pnb = json.loads((tmp_path / "p.ipynb").read_text())
            knb = json.loads((tmp_path / "k.ipynb").read_text())
            assert knb["cells"][0]["source"] == pnb["cells"][0]["source"], args
            assert normalized(knb) == normalized(pnb)
        for out in ("p.ipynb", "k.ipynb"):
            (tmp_path / out).unlink(missing_ok=True)


def test_a_kernelspec_without_a_pool_runs_on_a_kernel_of_its_own(daemon, tmp_path):
    # No pool runs xpython: kpool run starts one for the run, as papermill would, and says so.
    before = acquired(daemon)
    src = write_nb(tmp_path / "x.ipynb", [new_code_cell("print(6 * 7)"), new_code_cell("1 + 1")],
                   kernel="xpython")
    results = both(daemon, tmp_path, src, "-k", "xpython")
    assert_same(results)
    kr = results[1][0]
    assert "no pool runs kernelspec 'xpython'" in kr.stderr and "(cold)" in kr.stderr
    assert "".join(results[1][1]["cells"][0]["outputs"][0]["text"]).startswith("42")
    assert acquired(daemon) == before
    assert not [d for d in os.listdir("/tmp") if d.startswith("kpool-run-")
                and os.stat(os.path.join("/tmp", d)).st_uid == os.getuid()
                and os.path.exists(os.path.join("/tmp", d, "kernel-%s.json" % d))]


def test_without_any_daemon_the_notebook_still_runs_unless_one_was_named(tmp_path):
    """No kpoold at the default endpoint: papermill's drop-in starts the kernel here, cold, and
    says so (without debugpy's start-up warnings). A daemon named by --endpoint or
    $KPOOL_ENDPOINT that does not answer is exit 3, nothing run on this host (issue #53)."""
    src = params_nb(tmp_path)
    out = tmp_path / "alone.ipynb"
    (tmp_path / "xdg").mkdir(mode=0o700)
    env = {k: v for k, v in env_for(tmp_path, {"XDG_RUNTIME_DIR": str(tmp_path / "xdg")}).items()
           if k != "KPOOL_ENDPOINT"}
    r = subprocess.run([KPOOL, "run", src, out, "-p", "alpha", "4"], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, env=env)
    assert r.returncode == 0, r.stderr
    assert "no kpoold answered" in r.stderr and "(cold)" in r.stderr
    assert "frozen modules" not in r.stderr, r.stderr
    p = papermill(tmp_path, src, tmp_path / "p.ipynb", "-p", "alpha", "4")
    assert p.returncode == 0
    assert normalized(json.loads(out.read_text())) == normalized(json.loads((tmp_path / "p.ipynb").read_text()))
    named = tmp_path / "named.ipynb"
    for how in (["--endpoint", "ipc://%s/nobody" % tmp_path], []):
        r = subprocess.run([KPOOL] + how + ["run", src, named], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL,
                           env=dict(env, **({} if how else {"KPOOL_ENDPOINT": "ipc://%s/nobody" % tmp_path})))
        assert r.returncode == 3, (how, r.returncode, r.stderr)
        assert "(cold)" not in r.stderr and not named.exists(), r.stderr


def test_an_nbformat_3_notebook_is_upgraded_and_run(daemon, tmp_path):
    v3 = {
        "nbformat": 3, "nbformat_minor": 0,
        "metadata": {"name": "old", "kernelspec": {"name": "python3", "display_name": "Python 3",
                                                   "language": "python"}},
        "worksheets": [{"cells": [
            {"cell_type": "heading", "level": 2, "metadata": {}, "source": ["An old\n", "notebook"]},
            {"cell_type": "markdown", "metadata": {}, "source": ["some *text*"]},
            {"cell_type": "code", "language": "python", "collapsed": False, "metadata": {},
             "input": ["x = 20\n", "x + 1"], "prompt_number": 3,
             "outputs": [{"output_type": "pyout", "prompt_number": 3, "metadata": {}, "text": ["21"]}]},
            {"cell_type": "code", "language": "python", "collapsed": True, "metadata": {},
             "input": "print(x * 2)", "prompt_number": 4,
             "outputs": [{"output_type": "stream", "stream": "stdout", "text": "40\n"}]},
        ], "metadata": {}}],
    }
    src = tmp_path / "v3.ipynb"
    src.write_text(json.dumps(v3))
    results = both(daemon, tmp_path, src)
    assert_same(results)
    knb = results[1][1]
    assert knb["nbformat"] == 4 and "worksheets" not in knb  # orig_nbformat is transient: not written
    assert "".join(knb["cells"][0]["source"]) == "## An old notebook"
    assert "".join(knb["cells"][2]["outputs"][0]["data"]["text/plain"]) == "21"


@pytest.mark.parametrize("code, args", [
    ("import time; time.sleep(30)", ["--execution-timeout", "1"]),  # CellTimeoutError
    ("import sys; sys.exit(0)", []),                                 # a success, cell "failed"
    ("import sys; sys.exit()", []),
    ("import os; os._exit(0)", []),                                  # the kernel dies: exit 138
    ("raise ValueError('bad')", []),                                 # error cells, exit 1
], ids=["timeout", "sys.exit(0)", "sys.exit()", "os._exit", "raise"])
def test_how_a_run_ends_is_recorded_as_papermill_records_it(daemon, tmp_path, code, args):
    src = write_nb(tmp_path / "end.ipynb", [new_code_cell("x = 1"), new_code_cell(code),
                                            new_code_cell("print('after')")])
    results = both(daemon, tmp_path, src, *args)
    if "_exit" in code:
        # Whether the execute_input (and so the cell's execution_count) left the kernel before it
        # died is a race, for papermill as for kpool.
        for _, nb in results:
            nb["cells"][1]["execution_count"] = None
    assert_same(results)
    # The kernel's language_info only for a run not cut off, the input's otherwise (issue #38).
    (_, pnb), (_, knb) = results
    assert knb["metadata"]["language_info"] == pnb["metadata"]["language_info"]


def test_parameters_are_typed_and_recorded_as_papermill_does(daemon, tmp_path):
    # YAML 1.1's base 60 and tags, NaN and infinities recorded in metadata as Python writes them.
    src = params_nb(tmp_path)
    assert_same(both(daemon, tmp_path, src, "--prepare-only",
                     "-y", "a: !!str 5\nb: 1:30\nc: 0o17\nd: 0x1F\ne: .inf\nf: -.nan\ng: 1_000\n"
                           "h: ~\ni: yes\nj: 012\nk: 1e3\nl: 2001-12-14",
                     "-p", "nan", "nan", "-p", "inf", "-inf"))
    text = (tmp_path / "out-kpool.ipynb").read_text()
    assert '"nan": NaN' in text and '"inf": -Infinity' in text and '"e": Infinity' in text


def test_integers_beyond_64_bits_stay_exact(daemon, tmp_path):
    """Python's ints have no size: papermill injects and records them digit for digit."""
    src = params_nb(tmp_path)
    assert_same(both(daemon, tmp_path, src, "--prepare-only",
                     "-p", "a", "-123_456789012345678901234567890",
                     "-y", "h: 0x1ffffffffffffffffffff\ns: 99999999999999999999:30\n"
                           "i: !!int 1234567890123456789012345"))
    text = (tmp_path / "out-kpool.ipynb").read_text()
    assert '"a": -123456789012345678901234567890' in text and "h = 2417851639229258349412351" in text


def test_a_rerun_reads_back_what_python_wrote_into_the_metadata(daemon, tmp_path):
    """papermill's output, recorded with NaN, an infinity and an integer beyond 64 bits, run again
    without -p: both keep the recorded parameters exactly (Python's json reads NaN and any int)."""
    src = params_nb(tmp_path)
    first = tmp_path / "first.ipynb"
    r = papermill(tmp_path, src, first, "--prepare-only", "-p", "nan", "nan", "-p", "inf", "-inf",
                  "-p", "big", "123456789012345678901234567890")
    assert r.returncode == 0, r.stderr
    assert '"big": 123456789012345678901234567890' in first.read_text()
    assert_same(both(daemon, tmp_path, first, "--prepare-only"))
    text = (tmp_path / "out-kpool.ipynb").read_text()
    assert '"big": 123456789012345678901234567890' in text
    assert '"nan": NaN' in text and '"inf": -Infinity' in text


def test_outputs_keep_integers_beyond_64_bits(daemon, tmp_path):
    src = write_nb(tmp_path / "bigint.ipynb", [new_code_cell(
        "from IPython.display import JSON, display\ndisplay(JSON({'n': 2**70, 'm': [-2**80]}))")])
    assert_same(both(daemon, tmp_path, src))
    assert '"n": 1180591620717411303424' in (tmp_path / "out-kpool.ipynb").read_text()


def test_the_history_is_kept_in_memory_as_papermills(daemon, tmp_path):
    """Issue #38: papermill starts its kernels with --HistoryManager.hist_file=:memory:; kpool
    run's pooled kernels had the user's history.sqlite, shared by every pooled kernel."""
    src = write_nb(tmp_path / "history.ipynb", [
        new_code_cell("x = 1"),
        new_code_cell("hm = get_ipython().history_manager\nprint(hm.hist_file, hm.session_number)"),
        new_code_cell("print(len(_ih), _ih[-1] == In[-1], [line for _, _, line in hm.get_range()])"),
        new_code_cell("print(len(list(hm.search('*'))))")])
    assert_same(both(daemon, tmp_path, src))
