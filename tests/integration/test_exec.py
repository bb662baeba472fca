"""`kpool exec` (issue #11, part 2): one snippet in a warm kernel, against real ipykernel and
IRkernel: live streams, results, errors and exit codes, --json outputs identical to nbclient's,
cwd/env, code from stdin, time limits, a dying kernel, Ctrl-C, and the kernel always released."""
import json
import os
import signal
import subprocess
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from conftest import HERE, coalesced, reference_kernel_manager, wait_until

KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")

POOLS = """
[pools.python3]
size = 1
[pools.ir]
size = 1
"""


@pytest.fixture(scope="module")
def daemon(module_kpoold):
    """One for the module: each test takes fresh kernels of it (a daemon per test started an R
    kernel for each, used by one)."""
    return module_kpoold(POOLS)


def kpool_exec(d, *args, stdin=None, timeout=60):
    return subprocess.run([KPOOL, "--endpoint", d.endpoint, "exec"] + list(args), input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def released(d, pool="python3"):
    wait_until(lambda: d.pool(pool)["leased"] == 0, what="the kernel to be released")


def test_streams_results_and_errors(daemon):
    d = daemon
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7")
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\n42\n", "err\n")
    r = kpool_exec(d, "1/0")
    assert r.returncode == 1 and r.stdout == ""
    assert "ZeroDivisionError" in r.stderr and "\x1b[" not in r.stderr  # plain text off a tty
    released(d)


def test_sys_exit_is_the_exit_status_quietly_and_dashes_are_code_after_double_dash(daemon):
    """Issue #53 item 6: as `python -c` does (IPython's "An exception has occurred" and its
    "To exit: use 'exit'" warning are not shown); `--` ends the options."""
    d = daemon
    for code, status, err in (("import sys; print('before'); sys.exit(3)", 3, ""),
                              ("import sys; sys.exit()", 0, ""), ("raise SystemExit(0)", 0, ""),
                              ("import sys; sys.exit('bye')", 1, "bye\n"), ("import sys; sys.exit(256 + 7)", 7, "")):
        d.wait_warm("python3", 1, timeout=60)
        r = kpool_exec(d, "-", stdin=code)
        assert (r.returncode, r.stderr) == (status, err), (code, r.returncode, r.stderr)
    assert r.stdout == ""
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "--json", "-", stdin="import sys; sys.exit(5)")
    assert r.returncode == 5 and json.loads(r.stdout)[0]["ename"] == "SystemExit"  # kept for machines
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "--", "-6 * 7")
    assert (r.returncode, r.stdout) == (0, "-42\n"), r.stderr
    released(d)


def test_cwd_env_and_stdin(daemon, tmp_path):
    d = daemon
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "--cwd", str(tmp_path), "--env", "K=v", "-",
                   stdin="import os\nprint(os.getcwd(), os.environ['K'])\n")
    assert (r.returncode, r.stdout) == (0, "%s v\n" % tmp_path)
    released(d)


def test_an_r_kernel(daemon, tmp_path):
    d = daemon
    d.wait_warm("ir", 1, timeout=90)
    r = kpool_exec(d, "--pool", "ir", "--cwd", str(tmp_path), 'cat(getwd(), "\\n"); 1 + 1')
    assert r.returncode == 0, r.stderr
    assert r.stdout == "%s \n[1] 2\n" % tmp_path
    r = kpool_exec(d, "--pool", "ir", 'stop("no")')
    assert r.returncode == 1 and "no" in r.stderr
    released(d, "ir")


def test_json_outputs_are_what_nbclient_records(daemon, tmp_path):
    code = ("import sys\nfrom IPython.display import display, HTML, update_display, clear_output\n"
            "print('a'); print('b', file=sys.stderr)\n"
            "h = display(HTML('<b>1</b>'), display_id=True)\n"
            "h.update(HTML('<b>2</b>'))\n"
            "print('gone'); clear_output(wait=True); print('kept')\n"
            "from IPython.display import JSON\ndisplay(JSON({'n': 2**70}))\n"  # a Python int, exact
            "{'x': [1, 2]}")
    d = daemon
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "--json", code)
    assert r.returncode == 0, r.stderr
    ours = json.loads(r.stdout)
    nb = new_notebook(cells=[new_code_cell(code)])
    NotebookClient(nb, km=reference_kernel_manager("python3", tmp_path)).execute()
    theirs = json.loads(nbformat.writes(nb))["cells"][0]["outputs"]
    assert coalesced(ours) == coalesced(theirs)
    released(d)


def test_a_time_limit_interrupts_and_a_dead_kernel_is_reported(daemon):
    d = daemon
    d.wait_warm("python3", 1, timeout=60)
    start = time.monotonic()
    r = kpool_exec(d, "--timeout", "1", "import time; time.sleep(30)")
    assert r.returncode == 1 and "did not finish within 1 s" in r.stderr
    assert "KeyboardInterrupt" in r.stderr
    assert time.monotonic() - start < 15
    released(d)
    d.wait_warm("python3", 1, timeout=60)
    r = kpool_exec(d, "import os; os._exit(3)")
    assert r.returncode == 138 and "died" in r.stderr
    released(d)


def test_ctrl_c_interrupts_the_kernel_and_releases_it(daemon):
    d = daemon
    d.wait_warm("python3", 1, timeout=60)
    p = subprocess.Popen([KPOOL, "--endpoint", d.endpoint, "exec", "import time; time.sleep(60)"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: d.pool("python3")["leased"] == 1, what="the kernel to be taken")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130, err
    assert "KeyboardInterrupt" in err
    released(d)


def test_no_daemon_and_no_pool(daemon, tmp_path):
    r = subprocess.run([KPOOL, "--endpoint", "ipc://%s/none" % tmp_path, "exec", "1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3
    d = daemon
    r = kpool_exec(d, "--pool", "nope", "1")
    assert r.returncode == 1 and "unknown_pool" in r.stderr
