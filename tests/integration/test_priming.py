"""Priming (issue #23): kpoold runs each language's priming executes (languages/<name>.cpp)
before a kernel counts as warm, and a fork zygote primes its pre-built shell before it forks, so
that a user's first cell costs what the second does. It must leave no trace: what a user sees in
the first cells of a pooled kernel (execution counts, In/Out, `_`, history, the names defined, every
iopub message of each cell) is what a kernel that jupyter_client starts cold shows. Timing is
measured in bench/ (scenario 14), not here."""
import pytest
from jupyter_client import BlockingKernelClient, KernelManager

from conftest import wait_until

# Per kernelspec: cells that show what a user could see of an earlier execute.
CELLS = {
    "python3": [
        "print(get_ipython().execution_count, In, Out, repr(_), repr(__), repr(_i), repr(_ii),"
        " [(n, s) for _, n, s in get_ipython().history_manager.get_range()],"
        " sorted(k for k in globals() if not k.startswith('__')))",
        "6 * 7",
        "print(Out, _, _i, [(n, s) for _, n, s in get_ipython().history_manager.get_range()])",
    ],
    "xpython": [
        "print(sorted(k for k in globals() if not k.startswith('__')))",
        "6 * 7",
        "print(sorted(k for k in globals() if not k.startswith('__')))",
    ],
    "ir": [
        'cat(ls(all.names = TRUE), sep = ",")',
        "6 * 7",
        'cat(ls(all.names = TRUE), sep = ",")',
    ],
}


def seen(msg):
    """What a client shows of an iopub message."""
    content = msg["content"]
    kept = {k: content[k] for k in ("name", "text", "data", "execution_count", "execution_state",
                                    "ename", "evalue") if k in content}
    return msg["msg_type"], kept


def session(kc, cells):
    """Per cell: the reply's status and execution_count, and the iopub messages it caused."""
    kc.wait_for_ready(timeout=60)
    views = []
    for code in cells:
        messages = []
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda m: messages.append(seen(m)))
        views.append((reply["content"]["status"], reply["content"].get("execution_count"), messages))
    return views


def pooled_session(connection_file, cells):
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels()
    try:
        return session(kc, cells)
    finally:
        kc.stop_channels()


def cold_session(kernelspec, cells):
    km = KernelManager(kernel_name=kernelspec)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        return session(kc, cells)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("spec,launcher", [("python3", "spawn"), ("python3", "fork"),
                                           ("xpython", "auto"), ("ir", "auto")])
def test_a_primed_kernel_shows_what_a_cold_kernel_shows(kpoold, spec, launcher):
    d = kpoold("""
        [pools.k]
        kernelspec = "%s"
        launcher = "%s"
        size = 1
    """ % (spec, launcher))
    if launcher == "fork":  # a kernel forked by the ready zygote, not one spawned meanwhile
        wait_until(lambda: d.pool("k").get("zygote_ready"), timeout=60, what="the zygote")
        assert d.rpc(op="drain", pool="k")["ok"] and d.rpc(op="resize", pool="k", size=1)["ok"]
    d.wait_warm("k", 1, timeout=90)
    k = d.acquire("k")
    pooled = pooled_session(k["connection_file"], CELLS[spec])
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    cold = cold_session(spec, CELLS[spec])
    assert pooled == cold
    assert [count for _, count, _ in pooled][:2] == [1, 2]
    assert all(status == "ok" for status, _, _ in pooled)
    assert "priming execute" not in d.log_text()
    if launcher == "fork":
        zygote = d.pool("k")["zygote"]
        assert zygote["prebuilt"] and zygote["kernels_prebuilt"] >= 1, zygote


def test_prime_false_sends_nothing_before_the_kernel_is_warm(kpoold):
    """A kernel that answers kernel_info but never an execute_request (the fake) is warm at once
    with prime = false; with priming its language ("fake") has no priming requests either, so both
    pools fill."""
    d = kpoold("""
        [pools.off]
        kernelspec = "fake"
        prime = false
        size = 1
        [pools.on]
        kernelspec = "fake"
        size = 1
    """)
    d.wait_warm("off", 1)
    d.wait_warm("on", 1)


def test_launcher_auto_forks_ipykernel_and_spawns_the_rest_and_says_why(kpoold):
    d = kpoold("""
        [pools.py]
        kernelspec = "python3"
        size = 0
        [pools.r]
        kernelspec = "ir"
        size = 0
        [pools.spawned]
        kernelspec = "python3"
        launcher = "spawn"
        size = 0
        [pools.own]
        kernelspec = "ir"
        size = 0
        refill_delay_s = 0.3
    """)
    py, r, spawned, own = d.pool("py"), d.pool("r"), d.pool("spawned"), d.pool("own")
    # The refill after an acquire waits by launcher: a fork is cheap, a spawn's start-up is not.
    assert py["refill_delay_s"] == 0.05 and "forked" in py["refill_delay_why"], py
    for p in (r, spawned):
        assert p["refill_delay_s"] == 1 and "spawned" in p["refill_delay_why"], p
    assert own["refill_delay_s"] == 0.3 and own["refill_delay_why"] == "[pools.own] refill_delay_s"
    assert py["launcher"] == "fork" and "ipykernel_launcher" in py["launcher_why"], py
    assert r["launcher"] == "spawn" and py["launcher_why"].startswith("auto"), r
    assert "can be forked" in r["launcher_why"], r
    assert spawned["launcher"] == "spawn" and spawned["launcher_why"] == 'configured: launcher = "spawn"'
