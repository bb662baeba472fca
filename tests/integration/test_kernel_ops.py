"""Ops for clients that hold a kernel: signal and poll, and acquire's cwd/env applied inside the
kernel before it is handed over (real ipykernel, so the snippet is proven in the real thing)."""
import os
import re
import signal
import time

import kpool
import pytest
from jupyter_client import BlockingKernelClient

from conftest import alive, wait_until
from test_ipykernel import PYTHON3_POOL

FAKE_POOL = """
[pools.fake]
kernelspec = "fake"
size = 1
"""


def test_signal_and_poll(kpoold):
    d = kpoold(FAKE_POOL)
    d.wait_warm("fake", 1)
    warm_id = d.status()["kernels"][0]["id"]
    # A warm kernel belongs to nobody: it cannot be signalled or polled.
    assert d.rpc(op="signal", kernel_id=warm_id, signum=9)["error"]["code"] == "unknown_kernel"
    assert d.rpc(op="poll", kernel_id=warm_id)["error"]["code"] == "unknown_kernel"
    r = d.acquire("fake")
    assert d.rpc(op="poll", kernel_id=r["kernel_id"]) == {"ok": True, "alive": True}
    assert d.rpc(op="signal", kernel_id=r["kernel_id"], signum=signal.SIGTERM)["ok"]
    wait_until(lambda: not alive(r["pid"]), what="SIGTERM to work")
    polled = wait_until(lambda: (lambda p: p if not p["alive"] else None)(
        d.rpc(op="poll", kernel_id=r["kernel_id"])), what="poll to see the exit")
    assert polled["exit_code"] == -signal.SIGTERM
    assert d.rpc(op="signal", kernel_id=r["kernel_id"], signum=9)["error"]["code"] == "unknown_kernel"
    assert d.rpc(op="signal", kernel_id=r["kernel_id"], signum=0)["error"]["code"] == "bad_request"


def test_a_kernel_is_one_line_at_info_in_the_log(kpoold):
    """Issue #53 item 7: a kernel's start, warmth, lease, release and stop are at debug; its
    exit, with how long it lived, is its one line at info (the log is read at debug here)."""
    d = kpoold(FAKE_POOL)
    d.wait_warm("fake", 1)
    r = d.acquire("fake")
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    wait_until(lambda: "kernel exited id=%s" % r["kernel_id"] in d.log_text(), what="the kernel's exit")
    lines = [line for line in d.log_text().splitlines() if r["kernel_id"] in line]
    assert len(lines) >= 5, lines  # each step still there, at debug
    at_info = [line for line in lines if " info " in line]
    assert len(at_info) == 1 and "kernel exited id=%s pool=fake" % r["kernel_id"] in at_info[0], at_info


# A kernel forked pre-built from the zygote takes cwd/env as a kpool_context_request on its
# control channel; a spawned one, and any kernel of a pool with its own context_snippet, runs the
# snippet as a silent cell. Each way must give the user the same kernel.
CONTEXT_WAYS = {
    "fork": ('launcher = "fork"', "message"),
    "spawn": ('launcher = "spawn"', "code"),
    "fork with a context_snippet": (
        'launcher = "fork"\ncontext_snippet = "import json as _j, os as _o; _c = _j.loads({context}); '
        '_c[\'cwd\'] and _o.chdir(_c[\'cwd\']); _o.environ.update(_c[\'env\']); del _j, _o, _c"', "code"),
}


def context_ways_used(d):
    return re.findall(r"kernel leased .* context=(\w+)", d.log_text())


def one_warm_kernel(kpoold, way):
    """A daemon whose pool python3 holds one warm kernel started the way `way` says (a fork
    pool's kernels spawn until its zygote is ready: only then is the pool filled)."""
    d = kpoold(PYTHON3_POOL % 0 + CONTEXT_WAYS[way][0] + "\n")
    if "fork" in way:
        wait_until(lambda: d.pool("python3").get("zygote_ready"), timeout=60, what="the zygote")
    assert d.rpc(op="resize", pool="python3", size=1)["ok"]
    d.wait_warm("python3", 1, timeout=60)
    return d


def assert_context_applied_without_a_trace(connection_file, work):
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        reply = kc.execute_interactive(
            "import os", user_expressions={
                "cwd": "os.getcwd()", "env": "(os.environ['JPY_SESSION_NAME'], os.environ['K'])",
                "count": "get_ipython().execution_count", "history": "len(In)"}, timeout=30)
        ue = reply["content"]["user_expressions"]
        assert ue["cwd"]["data"]["text/plain"] == repr(str(work))
        assert ue["env"]["data"]["text/plain"] == repr(("nb.ipynb", 'v "q"'))
        # Our snippet ran silently: this is the user's first cell.
        assert reply["content"]["execution_count"] == 1
        assert ue["history"]["data"]["text/plain"] == "2"  # In[0] == '' and this cell
    finally:
        kc.stop_channels()


CONTEXT_ENV = {"JPY_SESSION_NAME": "nb.ipynb", "K": "v \"q\""}


@pytest.mark.parametrize("way", CONTEXT_WAYS)
def test_acquire_applies_cwd_and_env_without_a_trace(kpoold, tmp_path, way):
    d = one_warm_kernel(kpoold, way)
    work = tmp_path / "work dir é"
    work.mkdir()
    r = d.acquire("python3", cwd=str(work), env=CONTEXT_ENV)
    assert_context_applied_without_a_trace(r["connection_file"], work)
    assert context_ways_used(d) == [CONTEXT_WAYS[way][1]]


@pytest.mark.parametrize("way", CONTEXT_WAYS)
def test_the_context_op_applies_cwd_and_env_to_a_held_kernel(kpoold, tmp_path, way):
    """What kpool serve does with a kernel it took before the request's cwd/env were known."""
    d = one_warm_kernel(kpoold, way)
    work = tmp_path / "work dir é"
    work.mkdir()
    client = kpool.Client(d.endpoint)
    k = client.acquire("python3")
    client.context(k.kernel_id, cwd=str(work), env=CONTEXT_ENV)  # the Python client's way to say it
    assert_context_applied_without_a_trace(k.connection_file, work)
    assert re.findall(r"context applied id=\S+ context=(\w+)", d.log_text()) == [CONTEXT_WAYS[way][1]]


@pytest.mark.parametrize("way", ["fork", "spawn"])
def test_the_context_op_asks_the_kernel_only_for_what_it_lacks(kpoold, tmp_path, way):
    """Issue #49: kpool serve's spares are acquired with the cwd and history their requests keep
    asking for; the request's context op then finds them there and costs the kernel nothing. The
    cwd is left out only when the kernel is in that very directory now, whatever moved it."""
    d = one_warm_kernel(kpoold, way)
    work = tmp_path / "work"
    work.mkdir()
    r = d.rpc(op="acquire", pool="python3", cwd=str(work), history="memory", timeout_ms=60000)
    assert r["ok"], r

    def applied():
        return len(re.findall(r"context applied id=%s " % r["kernel_id"], d.log_text()))

    kc = BlockingKernelClient()
    kc.load_connection_file(r["connection_file"])
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)

        def run(code, expression):
            reply = kc.execute_interactive(code, user_expressions={"x": expression}, timeout=30)
            assert reply["content"]["status"] == "ok", reply["content"]
            return reply["content"]["user_expressions"]["x"]["data"]["text/plain"]

        # All there already: nothing goes to the kernel.
        assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd=str(work), history="memory") == {"ok": True}
        assert d.rpc(op="context", kernel_id=r["kernel_id"], history="memory") == {"ok": True}
        assert applied() == 0
        # The env always goes (a kernel's environment cannot be read from outside).
        assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd=str(work), env={"K": "1"}) == {"ok": True}
        assert applied() == 1
        assert run("import os", "(os.getcwd(), os.environ['K'])") == repr((str(work), "1"))
        # Code moved the kernel elsewhere: the same cwd is applied again.
        run("os.chdir('/')", "os.getcwd()")
        assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd=str(work)) == {"ok": True}
        assert applied() == 2
        assert run("pass", "os.getcwd()") == repr(str(work))
        # The directory removed and made again under the same path: applied again, so the kernel
        # works in the new one, not in the removed one it still had open.
        work.rmdir()
        work.mkdir()
        assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd=str(work)) == {"ok": True}
        assert applied() == 3
        run("open('probe', 'w').close()", "os.getcwd()")
        assert (work / "probe").exists()
    finally:
        kc.stop_channels()


@pytest.mark.parametrize("way", ["fork", "spawn"])
def test_the_context_op_refuses_clearly_and_leaves_the_kernel_to_its_holder(kpoold, way):
    d = one_warm_kernel(kpoold, way)
    warm_id = d.status()["kernels"][0]["id"]
    # Only a kernel handed out: a warm one is nobody's to change.
    assert d.rpc(op="context", kernel_id=warm_id, cwd="/tmp")["error"]["code"] == "unknown_kernel"
    r = d.acquire("python3")
    assert d.rpc(op="context", kernel_id=r["kernel_id"])["error"]["message"] == "give 'cwd', 'env' or 'history'"
    assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd="rel")["error"]["code"] == "bad_request"
    bad = d.rpc(op="context", kernel_id=r["kernel_id"], cwd="/nonexistent/dir")
    assert bad["error"]["code"] == "bad_request" and "FileNotFoundError" in bad["error"]["message"]
    # Still the holder's kernel, and still usable, until the holder releases it.
    assert d.rpc(op="poll", kernel_id=r["kernel_id"]) == {"ok": True, "alive": True}
    assert d.rpc(op="context", kernel_id=r["kernel_id"], env={"K": "1"}) == {"ok": True}
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    assert d.rpc(op="context", kernel_id=r["kernel_id"], cwd="/tmp")["error"]["code"] == "unknown_kernel"


@pytest.mark.parametrize("way", ["fork", "spawn"])
def test_a_bad_cwd_fails_the_acquire_and_the_touched_kernel_is_not_reused(kpoold, way):
    d = one_warm_kernel(kpoold, way)
    first = d.status()["kernels"][0]
    r = d.rpc(op="acquire", pool="python3", cwd="/nonexistent/dir")
    assert r["ok"] is False and r["error"]["code"] == "bad_request"
    assert "FileNotFoundError" in r["error"]["message"]
    wait_until(lambda: not alive(first["pid"]), what="the touched kernel to be stopped")
    # Its record goes when kpoold learns of the exit (a forked kernel's from the zygote, which
    # may report it a moment after the process is gone); the pool refills with another.
    wait_until(lambda: first["id"] not in {k["id"] for k in d.status()["kernels"]}, timeout=30,
               what="the touched kernel's record to go")
    d.wait_warm("python3", 1, timeout=60)
    assert first["id"] not in {k["id"] for k in d.status()["kernels"]}


def test_cwd_on_a_language_without_a_snippet_is_a_clear_error(kpoold):
    d = kpoold(FAKE_POOL)
    d.wait_warm("fake", 1)
    r = d.rpc(op="acquire", pool="fake", cwd="/tmp")
    assert r["error"]["code"] == "bad_request"
    assert "language 'fake'" in r["error"]["message"] and "context_snippet" in r["error"]["message"]
    assert d.pool("fake")["warm"] == 1  # untouched, still warm
