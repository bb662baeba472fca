"""Sandboxed kernels (issue #48), as a request's code would attack them: the escape suite.

Every attack in sandbox_attacks.py runs through `kpool exec` on an unsandboxed pool of the same
daemon first (the control: the attempt works there, so the test can fail) and then on a
sandboxed one, while another client holds a kernel of each pool (the victim). Run with kpoold as
root (kernels become `nobody`, limits by cgroup) and as an unprivileged user (a user namespace
per kernel, limits by rlimits), for a forked ipykernel pool and a spawned IRkernel pool."""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import textwrap
import uuid

import pytest
import requests

from conftest import KPOOL, KPOOLD, Daemon, alive, wait_until
import sandbox_attacks

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--"]

# The two pools every test here compares: the same kernelspec and launcher, one sandboxed.
OPEN_AND_BOX = """
[pools.open]
kernelspec = "python3"
launcher = "fork"
size = 2
[pools.box]
kernelspec = "python3"
launcher = "fork"
size = 2
isolation = "sandbox"
[pools.box.sandbox]
roots = ["{roots}"]
"""
POOLS = OPEN_AND_BOX + """
[pools.box.limits]
memory_mb = 512
processes = 100
[pools.nonet]
kernelspec = "python3"
launcher = "fork"
size = 1
isolation = "sandbox"
[pools.nonet.sandbox]
network = false
roots = ["{roots}"]
[pools.ir-open]
kernelspec = "ir"
size = 1
[pools.ir-box]
kernelspec = "ir"
size = 1
isolation = "sandbox"
[pools.ir-box.sandbox]
roots = ["{roots}"]
"""

# Attacks whose control cannot succeed for an unprivileged kpoold (no sandbox needed to stop
# them there): joining another process's namespaces needs CAP_SYS_ADMIN over them.
ROOT_ONLY_CONTROLS = {"setns_into_another_kernel"}
# What the sandbox keeps on purpose: the network (notebooks fetch data); `network = false`
# takes it away (the nonet pool).
KEPT_BY_DEFAULT = {"connect_to_host_loopback"}


class Suite:
    """One kpoold (as root or as nobody), its pools warm, a victim kernel held in each."""

    def __init__(self, as_user):
        self.as_user = as_user
        self.wrapper = AS_NOBODY if as_user and os.geteuid() == 0 else []
        self.work = tempfile.mkdtemp(prefix="kpool-sandbox-", dir="/tmp")
        os.chmod(self.work, 0o755)
        self.roots = os.path.join(self.work, "roots")
        self.job = os.path.join(self.roots, "job")
        self.sibling = os.path.join(self.roots, "other-job")  # another request's folder
        os.makedirs(self.job)
        os.makedirs(self.sibling)
        with open(os.path.join(self.sibling, "secret"), "w") as f:
            f.write("secret of another request\n")
        for d in (self.roots, self.job, self.sibling):
            os.chmod(d, 0o1777)
        if self.wrapper:
            os.chown(self.work, NOBODY, NOBODY)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.daemon = Daemon(self.work, POOLS.replace("{roots}", self.roots), wrapper=self.wrapper,
                             env={"HOME": os.path.join(self.work, "home")})
        self.victims = {}
        self.daemon.start()
        try:
            for pool, size in (("open", 2), ("box", 2), ("nonet", 1), ("ir-open", 1), ("ir-box", 1)):
                self.daemon.wait_warm(pool, size, timeout=120)
            self.victims = {pool: self.daemon.acquire(pool) for pool in ("open", "box", "ir-open", "ir-box")}
        except BaseException:
            self.close()
            raise

    def close(self):
        try:
            for v in self.victims.values():
                self.daemon.rpc(op="release", kernel_id=v["kernel_id"])
            assert self.daemon.stop() == 0, self.daemon.log_text()
            self.daemon.assert_no_leaks()
        finally:
            if self.daemon.proc.poll() is None:
                self.daemon.proc.kill()
            self.listener.close()
            shutil.rmtree(self.work, ignore_errors=True)

    def attack(self, pool, code, victim_pool, tag):
        victim = self.victims[victim_pool]
        for key, value in {"{victim_file}": victim["connection_file"], "{victim_pid}": str(victim["pid"]),
                           "{daemon_pid}": str(self.daemon.proc.pid),
                           "{marker}": os.path.join(self.work, "marker-" + tag),
                           "{port}": str(self.listener.getsockname()[1]), "{tag}": tag,
                           "{sibling}": self.sibling}.items():
            code = code.replace(key, value)
        out = subprocess.run(self.wrapper + [KPOOL, "--endpoint", self.daemon.endpoint, "exec", "--pool", pool,
                                             "--cwd", self.job, "--timeout", "60s", code],
                             capture_output=True, text=True, timeout=120)
        lines = [line for line in out.stdout.splitlines() if line.startswith('{"done"')]
        assert lines, "pool %s: no verdict (exit %d)\n%s\n%s\nkpoold: %s" % (
            pool, out.returncode, out.stdout, out.stderr, self.daemon.log_text()[-3000:])
        return json.loads(lines[-1])

    def wait_stopped(self, pool):
        """Until the pool's released kernels are gone (what they started then dies or not)."""
        wait_until(lambda: not [k for k in self.daemon.status()["kernels"]
                                if k["pool"] == pool and k["state"] == "stopping"],
                   timeout=30, what="pool %s's released kernels to exit" % pool)

    def sleeps_left(self, tag):
        found = subprocess.run(["pgrep", "-f", "^sleep %s$" % tag], capture_output=True, text=True).stdout.split()
        return [int(pid) for pid in found if alive(int(pid))]


def python_attack(suite, name, pool, victim_pool):
    tag = str(900000 + uuid.uuid4().int % 99999)
    code = sandbox_attacks.PRELUDE + textwrap.dedent(sandbox_attacks.PYTHON_ATTACKS[name][1])
    if name == "read_what_the_last_request_left":  # the request before it left them
        suite.attack(pool, sandbox_attacks.PRELUDE + sandbox_attacks.PYTHON_ATTACKS["write_for_the_next_request"][1],
                     victim_pool, tag)
    result = suite.attack(pool, code, victim_pool, tag)
    if name == "leave_a_process_behind":
        try:
            suite.wait_stopped(pool)
            left = suite.sleeps_left(tag)
            result = {"done": bool(left), "detail": "left: %s" % left}
        finally:
            for pid in suite.sleeps_left(tag):
                os.kill(pid, 9)
    return result


def run_escape_suite(as_user):
    suite = Suite(as_user)
    table = []
    try:
        for name in sandbox_attacks.PYTHON_ATTACKS:
            if name == "write_for_the_next_request":
                continue  # the first half of read_what_the_last_request_left
            if as_user and name in ROOT_ONLY_CONTROLS:
                continue
            control = python_attack(suite, name, "open", "open")
            sandboxed = python_attack(suite, name, "box", "box")
            table.append((name, "open", control, "box", sandboxed))
            if name in KEPT_BY_DEFAULT:
                table.append((name, "open", control, "nonet", python_attack(suite, name, "nonet", "box")))
        for name, code in sandbox_attacks.R_ATTACKS.items():
            if name == "write_for_the_next_request":
                continue
            results = []
            for pool in ("ir-open", "ir-box"):
                tag = str(900000 + uuid.uuid4().int % 99999)
                if name == "read_what_the_last_request_left":
                    suite.attack(pool, sandbox_attacks.R_ATTACKS["write_for_the_next_request"], pool, tag)
                r = suite.attack(pool, code, pool, tag)
                if name == "leave_a_process_behind":
                    suite.wait_stopped(pool)
                    left = suite.sleeps_left(tag)
                    for pid in left:
                        os.kill(pid, 9)
                    r = {"done": bool(left), "detail": "left: %s" % left}
                results.append(r)
            table.append(("R " + name, "ir-open", results[0], "ir-box", results[1]))
        box_status = suite.daemon.pool("box")
        # The kernel itself over its memory limit: killed, and said so (not "kernel died").
        hog = subprocess.run(suite.wrapper + [KPOOL, "--endpoint", suite.daemon.endpoint, "exec", "--pool", "box",
                                              "x = bytearray(900 << 20)"], capture_output=True, text=True, timeout=120)
        box_status["hog"] = {"exit": hog.returncode, "stderr": hog.stderr}
    finally:
        suite.close()
    report = "\n".join("%-36s %-8s %-5s %-8s %-5s %s" % (name, cp, c["done"], sp, s["done"], s["detail"][:80])
                       for name, cp, c, sp, s in table)
    print(report)
    failures = []
    for name, control_pool, control, sandbox_pool, sandboxed in table:
        if not control["done"]:
            failures.append("%s: the control on %s did not work (%s), so the test proves nothing"
                            % (name, control_pool, control["detail"]))
        expected = name in KEPT_BY_DEFAULT and sandbox_pool == "box"
        if sandboxed["done"] != expected:
            failures.append("%s on %s: %s (%s)" % (name, sandbox_pool, "got through" if sandboxed["done"] else
                                                   "was stopped", sandboxed["detail"]))
    assert not failures, "\n".join(failures) + "\n\n" + report
    return box_status


@pytest.mark.skipif(os.geteuid() != 0, reason="kpoold as root: run the suite as root")
def test_escape_suite_kpoold_as_root():
    status = run_escape_suite(as_user=False)
    assert status["isolation"] == "sandbox"
    assert status["sandbox"]["uid"] == NOBODY and "user" not in status["sandbox"]["namespaces"]
    assert "cgroup" in status["sandbox"]["limits"]["memory_by"]
    assert status["hog"]["exit"] == 138, status["hog"]
    assert "died while running the code: out of memory (limit 512 MiB)" in status["hog"]["stderr"], status["hog"]


def test_escape_suite_kpoold_as_an_unprivileged_user():
    status = run_escape_suite(as_user=True)
    assert "user" in status["sandbox"]["namespaces"]
    # No cgroup of its own: the kernel's RLIMIT_AS stops the allocation instead.
    assert "RLIMIT_AS" in status["sandbox"]["limits"]["memory_by"]
    assert status["hog"]["exit"] == 1 and "MemoryError" in status["hog"]["stderr"], status["hog"]


SERVE_POOLS = """
[pools.open]
kernelspec = "fake"
size = 0
[pools.box]
kernelspec = "fake"
size = 0
isolation = "sandbox"
"""


def test_kpool_serve_says_when_it_runs_code_without_a_sandbox(kpoold, tmp_path):
    d = kpoold(SERVE_POOLS)
    serve = subprocess.Popen([KPOOL, "--endpoint", d.endpoint, "serve", "--no-token", "--listen", "127.0.0.1:0"],
                             stderr=subprocess.PIPE, text=True)
    try:
        url = "http://" + re.search(r"listening on http://(127\.0\.0\.1:\d+)/", serve.stderr.readline()).group(1)
        health = requests.get(url + "/v1/health", timeout=30).json()
        assert health["isolation"] == "none"
        assert health["pools"]["open"]["isolation"] == "none" and health["pools"]["box"]["isolation"] == "sandbox"
    finally:
        serve.terminate()
        serve.wait(30)
    # Beyond loopback (in a network namespace of the test's own, which has nothing but its
    # loopback: no address of the host is ever listened on), a warning at start.
    token = tmp_path / "token"
    token.write_text("t0ken-for-the-test\n")
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    serve = subprocess.Popen(unshare + [KPOOL, "--endpoint", d.endpoint, "serve", "--token-file", str(token),
                                        "--listen", "0.0.0.0:0"], stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on http://0.0.0.0:" in serve.stderr.readline()
        warning = serve.stderr.readline()
        assert "warning: /v1 runs code on pools without a sandbox (open)" in warning, warning
    finally:
        serve.terminate()
        serve.wait(30)


REPORT = [
    "import os, pandas as pd, matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt",
    "df = pd.read_csv('sales.csv')\ndf.groupby('region').sum()",
    "fig, ax = plt.subplots()\ndf.plot(ax=ax)\nfig.savefig('plot.png')\nprint(os.path.getsize('plot.png') > 0)",
    "df.to_csv('out.csv')\nprint(open('out.csv').read().splitlines()[0], os.environ.get('KPOOL_TEST_VAR'))",
]


def test_a_sandboxed_kernel_still_does_what_a_kernel_does(kpoold, tmp_path):
    """cwd and env, a notebook that reads and writes its folder (kpool run, same output as on an
    unsandboxed pool, which test_papermill_parity.py holds to papermill's), pandas and
    matplotlib, input(), an interrupt, the debugger, history in memory."""
    import nbformat
    from jupyter_client import BlockingKernelClient
    from nbformat.v4 import new_code_cell, new_notebook
    # The roots exist before kpoold starts, as an operator's do: a sandboxed kernel stages its
    # roots as it starts, and one started before its root existed cannot bind a cwd there (its
    # acquire is refused: "does it exist on the host?").
    roots = tmp_path / "roots"
    for pool in ("open", "box"):
        (roots / pool).mkdir(parents=True)
        os.chmod(roots / pool, 0o1777)
    os.chmod(roots, 0o1777)
    d = kpoold(OPEN_AND_BOX.replace("{roots}", str(roots)))
    outputs = {}
    for pool in ("open", "box"):
        job = roots / pool
        (job / "sales.csv").write_text("region,sales\nnorth,3\nsouth,5\nnorth,4\n")
        nb = new_notebook(cells=[new_code_cell(c) for c in REPORT])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, str(job / "report.ipynb"))
        d.wait_warm(pool, 2, timeout=120)
        r = subprocess.run([KPOOL, "--endpoint", d.endpoint, "run", "report.ipynb", "out.ipynb", "-k", pool],
                           cwd=str(job), capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, KPOOL_TEST_VAR="reached"))
        assert r.returncode == 0, r.stderr
        assert (job / "out.csv").exists() and (job / "plot.png").stat().st_size > 0
        executed = nbformat.read(str(job / "out.ipynb"), as_version=4)
        outputs[pool] = [[{k: v for k, v in o.items() if k != "execution_count"} for o in c.outputs]
                         for c in executed.cells]
    assert outputs["box"] == outputs["open"]
    assert "reached" in json.dumps(outputs["box"])
    # A kernel held by a client: input(), an interrupt, the debugger, history kept in memory.
    k = d.acquire("box", cwd=str(roots / "box"), history="memory")
    kc = BlockingKernelClient()
    kc.load_connection_file(k["connection_file"])
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        got = []
        reply = kc.execute_interactive("print('you said', input('say: '))", allow_stdin=True, timeout=30,
                                       stdin_hook=lambda msg: kc.input("hello"),
                                       output_hook=lambda msg: got.append(msg["content"].get("text", "")))
        assert reply["content"]["status"] == "ok" and "you said hello" in "".join(got)
        debug = kc.session.msg("debug_request", {"type": "request", "seq": 1, "command": "initialize",
                                                 "arguments": {"adapterID": "kpool-test", "clientID": "test"}})
        kc.control_channel.send(debug)
        answer = kc.get_control_msg(timeout=30)
        assert answer["content"].get("success") is True, answer["content"]
        reply = kc.execute_interactive("import os; print(os.getcwd(), get_ipython().history_manager.hist_file)",
                                       timeout=30, output_hook=lambda msg: got.append(msg["content"].get("text", "")))
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "%s :memory:" % (roots / "box") in "".join(got)
        # Interrupted once its code runs: the cell says so. execute_input alone is not that: a
        # SIGINT between it and the code's first line ends the request inside ipykernel with no
        # reply (1 run in 10 here, 2 in 4 under ASan). Short sleeps: CPython raises
        # KeyboardInterrupt at the main thread's next bytecode whichever thread took the signal.
        msg_id = kc.execute("import time\nprint('looping', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)")
        while True:
            msg = kc.get_iopub_msg(timeout=30)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream"
                    and "looping" in msg["content"]["text"]):
                break
        assert d.rpc(op="signal", kernel_id=k["kernel_id"], signum=2)["ok"]  # SIGINT, to the group through the outer process
        reply = kc.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        kc.stop_channels()
        d.rpc(op="release", kernel_id=k["kernel_id"])


FOLDER_PROBE = """import errno, json, os
r = {"cwd": os.getcwd(), "roots": sorted(os.listdir("ROOTS"))}
open("mine.txt", "w").write("written by the request")
try:
    r["other"] = open("ROOTS/other/secret").read()
except OSError as e:
    r["other"] = errno.errorcode[e.errno]
try:
    open("ROOTS/planted", "w").close()
    r["root_write"] = "written"
except OSError as e:
    r["root_write"] = errno.errorcode[e.errno]
print(json.dumps(r))
"""


def test_a_request_sees_and_writes_its_own_folder_alone(kpoold, tmp_path):
    """A sandboxed pool's roots are unseen until an acquire's cwd under them is bound into the
    kernel, writable, alone: another request's folder beside it stays out of reach (the open
    pool, the control, reaches it). A link on the way, a missing folder or one outside the roots
    is bad_request; a kernel's working directory is chosen once."""
    roots = tmp_path / "roots"
    mine = roots / "mine" / "deep"
    mine.mkdir(parents=True)
    (roots / "other").mkdir()
    (roots / "other" / "secret").write_text("secret of another request")
    os.symlink("/etc", roots / "mine" / "etc")
    for d in (roots, roots / "mine", mine, roots / "other"):
        os.chmod(d, 0o1777)  # kpoold as root: kernels write as nobody
    d = kpoold(OPEN_AND_BOX.replace("{roots}", str(roots)))
    seen = {}
    for pool in ("open", "box"):
        d.wait_warm(pool, 2, timeout=120)
        r = subprocess.run([KPOOL, "--endpoint", d.endpoint, "exec", "--pool", pool, "--cwd", str(mine),
                            FOLDER_PROBE.replace("ROOTS", str(roots))], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        seen[pool] = json.loads(r.stdout.strip().splitlines()[-1])
        assert (mine / "mine.txt").read_text() == "written by the request"
        (mine / "mine.txt").unlink()
    assert seen["open"]["other"] == "secret of another request" and seen["open"]["root_write"] == "written"
    assert seen["box"] == {"cwd": str(mine), "roots": ["mine"], "other": "ENOENT", "root_write": "EROFS"}, seen
    assert sorted(os.listdir(mine.parent)) == ["deep", "etc"]

    d.wait_warm("box", 2, timeout=120)
    acquired = d.pool("box")["counters"]["acquired"]
    for cwd, why in ((roots / "mine" / "etc", "a symbolic link on the way"),
                     (roots / "missing", "No such file or directory"),
                     (tmp_path / "elsewhere", "outside pool 'box''s sandbox roots")):
        reply = d.rpc(op="acquire", pool="box", cwd=str(cwd))
        assert not reply["ok"] and reply["error"]["code"] == "bad_request", reply
        assert why in reply["error"]["message"], reply
    assert d.pool("box")["counters"]["acquired"] == acquired  # refused before a kernel was taken
    # The helper checks again as it binds (a link made after kpoold's check): run it by hand.
    k = d.acquire("box")
    spec = json.dumps({"roots": [str(roots)], "user_namespace": os.geteuid() != 0})
    helper = os.path.join(os.path.dirname(KPOOLD), "kpool-sandbox")
    for cwd, code, why in ((roots / "mine" / "etc", 3, "a symbolic link on the way"),
                           (roots / ".." / "elsewhere", 3, "not within the sandbox's roots"),
                           ("/etc", 3, "not within the sandbox's roots")):
        r = subprocess.run([helper, "workdir", str(k["pid"]), spec, str(cwd)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == code and why in r.stderr, (cwd, r.returncode, r.stderr)
    d.rpc(op="release", kernel_id=k["kernel_id"])
    # Chosen once: the same folder again is fine, another is refused, and the kernel goes on.
    k = d.acquire("box", cwd=str(mine))
    try:
        assert d.rpc(op="context", kernel_id=k["kernel_id"], cwd=str(mine) + "/")["ok"]
        refused = d.rpc(op="context", kernel_id=k["kernel_id"], cwd=str(roots / "other"))
        assert not refused["ok"] and refused["error"]["code"] == "bad_request", refused
        assert "chosen once" in refused["error"]["message"], refused
        assert d.rpc(op="poll", kernel_id=k["kernel_id"])["alive"]
    finally:
        d.rpc(op="release", kernel_id=k["kernel_id"])
