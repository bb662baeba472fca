"""kpoold with real ipykernel kernels (Debian's python3 kernelspec): the promises of issue #2."""
import os
import signal
import stat
import time

from conftest import alive, run_code, wait_until

PYTHON3_POOL = """
[pools.python3]
kernelspec = "python3"
size = %d
ready_timeout_s = 60
"""


def test_acquire_then_run_code_with_blocking_kernel_client(kpoold):
    d = kpoold(PYTHON3_POOL % 2)
    d.wait_warm("python3", 2)
    r = d.acquire("python3", timeout_ms=5000, lease_s=600)
    conn = r["connection"]
    assert set(conn) == {"shell_port", "iopub_port", "stdin_port", "control_port", "hb_port",
                         "ip", "key", "transport", "signature_scheme", "kernel_name"}
    assert conn["ip"] == "127.0.0.1" and conn["transport"] == "tcp"
    assert conn["kernel_name"] == "python3" and conn["signature_scheme"] == "hmac-sha256"
    assert len(conn["key"]) == 64
    assert all(isinstance(conn[p], int) and conn[p] > 0 for p in conn if p.endswith("_port"))
    assert run_code(r["connection_file"], "import os; print(os.getpid(), 6 * 7)") == "%d 42\n" % r["pid"]
    # The file on disk says the same as the reply, and only its owner can read it.
    import json
    with open(r["connection_file"]) as f:
        assert json.load(f) == conn
    assert stat.S_IMODE(os.stat(r["connection_file"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(r["connection_file"])).st_mode) & 0o077 == 0
    st = d.status()
    assert [k["state"] for k in st["kernels"] if k["id"] == r["kernel_id"]] == ["leased"]
    assert d.pool("python3")["counters"]["served_warm"] == 1


def test_every_kernel_gets_its_own_key(kpoold):
    d = kpoold(PYTHON3_POOL % 2)
    d.wait_warm("python3", 2)
    a = d.acquire("python3")
    b = d.acquire("python3")
    assert a["kernel_id"] != b["kernel_id"]
    assert a["connection"]["key"] != b["connection"]["key"]
    assert a["connection"]["shell_port"] != b["connection"]["shell_port"]


def test_acquire_from_an_empty_pool_waits_then_succeeds(kpoold):
    d = kpoold(PYTHON3_POOL % 0)
    start = time.monotonic()
    r = d.acquire("python3", timeout_ms=60000)
    waited = time.monotonic() - start
    assert waited > 0.2  # a cold start happened while we waited
    assert run_code(r["connection_file"], "print('hello')") == "hello\n"
    counters = d.pool("python3")["counters"]
    assert counters["waited"] == 1 and counters["served_warm"] == 0


def test_release_kills_the_kernel_and_removes_its_files(kpoold):
    d = kpoold(PYTHON3_POOL % 1)
    d.wait_warm("python3", 1)
    r = d.acquire("python3")
    assert os.path.exists(r["connection_file"])
    assert d.rpc(op="release", kernel_id=r["kernel_id"], req_id="rel-1") == {"ok": True, "req_id": "rel-1"}
    wait_until(lambda: not alive(r["pid"]), timeout=10, what="the released kernel to exit")
    wait_until(lambda: not os.path.exists(r["connection_file"]), timeout=5, what="file removal")
    again = d.rpc(op="release", kernel_id=r["kernel_id"])
    assert again["error"]["code"] == "unknown_kernel"


def test_a_sigkilled_warm_kernel_is_replaced_and_never_handed_out(kpoold):
    d = kpoold(PYTHON3_POOL % 2)
    d.wait_warm("python3", 2)
    victim = d.status()["kernels"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_until(lambda: d.pool("python3")["counters"]["died_warm"] == 1, what="the death to be noticed")
    handed = {d.acquire("python3", timeout_ms=60000)["kernel_id"] for _ in range(2)}
    assert victim["id"] not in handed
    pool = d.pool("python3")
    assert pool["last_error"].startswith("warm kernel %s died: killed by signal 9" % victim["id"])
    assert not os.path.exists(os.path.join(d.runtime_dir, "kernels", "kernel-%s.json" % victim["id"]))


def test_sigterm_shuts_every_kernel_down_and_leaves_nothing(kpoold):
    d = kpoold(PYTHON3_POOL % 2)
    d.wait_warm("python3", 2)
    leased = d.acquire("python3")
    pids = {k["pid"] for k in d.status()["kernels"]} | {leased["pid"]}
    start = time.monotonic()
    assert d.stop(signal.SIGTERM) == 0
    assert time.monotonic() - start < 5
    assert not [p for p in pids if alive(p)]
    d.assert_no_leaks()
    assert "kpoold stopped" in d.log_text()
