"""Nothing a sandboxed kernel starts outlives it (issue #48), whichever way the kernel ends: its
lease expires, it dies, kpool serve's gateway deletes, restarts (the new kernel then works) or
culls it, kpool serve stops, kpoold stops or is killed. Each way runs on an unsandboxed pool first, the control: a process
the kernel started in a session of its own survives there, so the test can fail. On the
sandboxed pool it dies with the kernel (its init, pid 1 of the kernel's pid namespace, goes with
the kernel, and the kernel of Linux kills what is left inside)."""
import os
import signal
import subprocess
import uuid

import pytest
import requests
from jupyter_client import BlockingKernelClient

from conftest import Daemon, alive, wait_until
from test_gateway import KernelSocket, start_kernel
from serve_fixtures import Serve

POOLS = """
[pools.open]
kernelspec = "python3"
launcher = "fork"
size = 1
[pools.box]
kernelspec = "python3"
launcher = "fork"
size = 1
isolation = "sandbox"
"""


def plant_code(tag):
    """A process in a session of its own, as code that wants to stay would start it."""
    return ('import subprocess\nsubprocess.Popen(["sleep", "%s"], start_new_session=True, stdin=subprocess.DEVNULL,'
            ' stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nprint("planted")' % tag)


def planted(tag):
    found = subprocess.run(["pgrep", "-f", "^sleep %s$" % tag], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found if alive(int(pid))]


def new_tag():
    return str(800000 + uuid.uuid4().int % 99999)


def run_in(kernel, code):
    kc = BlockingKernelClient()
    kc.load_connection_file(kernel["connection_file"])
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        reply = kc.execute_interactive(code, timeout=30, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()


def outlived(tag, pool):
    """The planted processes left once the kernel is gone, killed here so that none outlives
    the test either. On the sandboxed pool, up to 10 s for the kernel of Linux to finish the
    kill (what is left then outlived it); on the open pool (the control) at once."""
    if pool == "box":
        try:
            wait_until(lambda: not planted(tag), timeout=10, what="the sandbox's processes to die")
        except AssertionError:
            pass  # reported by check()
    left = planted(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def gone(d, kernel_id):
    return lambda: not any(k["id"] == kernel_id for k in d.status()["kernels"])


def leased(d, pool):
    return {k["id"] for k in d.status()["kernels"] if k["pool"] == pool and k["state"] == "leased"}


def wait_gone(d, ids, what):
    wait_until(lambda: not ids & {k["id"] for k in d.status()["kernels"]}, timeout=30, what=what)


def check(results):
    """results: pool -> processes left. The control's survived; the sandbox's did not."""
    assert results["open"], "the control: the process started on the open pool died too, so this test proves nothing"
    assert results["box"] == [], "a sandboxed kernel's process outlived it: %s" % results["box"]


def held_with_a_plant(d, pool, **acquire):
    """A kernel of `pool` acquired (with `acquire`'s fields) that has started a process of its own."""
    d.wait_warm(pool, 1, timeout=120)
    tag = new_tag()
    k = d.acquire(pool, **acquire)
    run_in(k, plant_code(tag))
    assert planted(tag)
    return k, tag


def test_a_lease_that_expires(kpoold):
    d = kpoold(POOLS)
    results = {}
    for pool in ("open", "box"):
        k, tag = held_with_a_plant(d, pool, lease_s=3)
        wait_until(gone(d, k["kernel_id"]), timeout=30, what="the kernel whose lease expired to go")
        results[pool] = outlived(tag, pool)
    check(results)
    assert d.pool("box")["counters"]["leases_expired"] == 1


def test_a_kernel_that_dies(kpoold):
    d = kpoold(POOLS)
    results = {}
    for pool in ("open", "box"):
        k, tag = held_with_a_plant(d, pool)
        kc = BlockingKernelClient()
        kc.load_connection_file(k["connection_file"])
        kc.start_channels()
        kc.execute("import os; os._exit(3)")
        wait_until(lambda: not d.rpc(op="poll", kernel_id=k["kernel_id"]).get("alive"), timeout=30,
                   what="the kernel to die")
        kc.stop_channels()
        results[pool] = outlived(tag, pool)
        d.rpc(op="release", kernel_id=k["kernel_id"])
    check(results)


def gateway_kernel_with_a_plant(s, pool, tag):
    kid = start_kernel(s, name=pool)["id"]
    ks = KernelSocket(s, kid)
    ks.wait_ready()
    iopub, reply = ks.execute(plant_code(tag))
    assert reply["status"] == "ok", reply
    assert planted(tag)
    return kid, ks


def test_the_gateway_deletes_restarts_and_culls_and_kpool_serve_stops(kpoold):
    d = kpoold(POOLS)
    for pool in ("open", "box"):
        d.wait_warm(pool, 1, timeout=120)
    s = Serve(d.endpoint, "--spares", "0")
    ways = {}
    try:
        for way in ("delete", "restart"):
            ways[way] = {}
            for pool in ("open", "box"):
                tag = new_tag()
                kid, ks = gateway_kernel_with_a_plant(s, pool, tag)
                before = leased(d, pool)
                if way == "delete":
                    ks.close()
                    assert requests.delete(s.url + "/api/kernels/" + kid, timeout=30).status_code == 204
                else:
                    assert requests.post(s.url + "/api/kernels/%s/restart" % kid, json={}, timeout=60).status_code == 200
                    # The same websocket goes on with the new kernel (in a sandbox of its own).
                    iopub, reply = ks.execute("print(1 + 1)")
                    assert reply["status"] == "ok" and "2" in "".join(m["content"].get("text", "") for m in iopub)
                    ks.close()
                    assert requests.delete(s.url + "/api/kernels/" + kid, timeout=30).status_code == 204
                wait_gone(d, before, "the gateway's kernel to go")
                ways[way][pool] = outlived(tag, pool)
                d.wait_warm(pool, 1, timeout=120)
        # kpool serve's stop gives its kernels back.
        ways["serve stops"] = {}
        for pool in ("open", "box"):
            tag = new_tag()
            kid, ks = gateway_kernel_with_a_plant(s, pool, tag)
            ks.close()
            before = leased(d, pool)
            assert s.stop() == 0, s.log_text()
            wait_gone(d, before, "kpool serve's kernel to go")
            ways["serve stops"][pool] = outlived(tag, pool)
            d.wait_warm(pool, 1, timeout=120)
            s = Serve(d.endpoint, "--spares", "0")
        s.stop()
        ways["culled"] = {}
        s = Serve(d.endpoint, "--spares", "0", "--cull-idle-timeout", "1", "--cull-interval", "1")
        for pool in ("open", "box"):
            tag = new_tag()
            kid, ks = gateway_kernel_with_a_plant(s, pool, tag)
            before = leased(d, pool)
            ks.close()
            wait_until(lambda: requests.get(s.url + "/api/kernels/" + kid, timeout=30).status_code == 404,
                       timeout=30, what="the idle kernel culled")
            wait_gone(d, before, "the culled kernel to go")
            ways["culled"][pool] = outlived(tag, pool)
            d.wait_warm(pool, 1, timeout=120)
    finally:
        s.stop()
    for way, results in ways.items():
        try:
            check(results)
        except AssertionError as e:
            raise AssertionError("%s: %s" % (way, e)) from None


def test_kpoold_stops_or_is_killed(tmp_path, kernelspec_path):
    for how in ("SIGTERM", "SIGKILL"):
        (tmp_path / how).mkdir()
        d = Daemon(str(tmp_path / how), POOLS, env={"JUPYTER_PATH": kernelspec_path})
        d.start()
        tags = {}
        try:
            for pool in ("open", "box"):
                d.wait_warm(pool, 1, timeout=120)
                tags[pool] = new_tag()
                run_in(d.acquire(pool), plant_code(tags[pool]))
            if how == "SIGTERM":
                assert d.stop() == 0, d.log_text()
            else:
                d.proc.kill()
                d.proc.wait(30)
            # Every kernel process gone (they die with kpoold even when it is killed).
            wait_until(lambda: not [pid for pid in d.seen_pids if alive(pid)], timeout=30,
                       what="the kernels to die with kpoold")
            check({pool: outlived(tag, pool) for pool, tag in tags.items()})
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
            for tag in tags.values():
                for pid in planted(tag):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="a kernel's memory limit is a cgroup of its own: kpoold as root")
def test_the_gateway_says_a_kernel_died_of_its_memory_limit(kpoold):
    """Issue #48: "out of memory (limit N MiB)", not "kernel died", in the gateway's kernel
    model and the status message its websockets get; the kernels beside it go on."""
    d = kpoold(POOLS + "[pools.box.limits]\nmemory_mb = 256\n")
    d.wait_warm("box", 1, timeout=120)
    s = Serve(d.endpoint, "--spares", "0")
    try:
        kid = start_kernel(s, name="box")["id"]
        ks = KernelSocket(s, kid)
        ks.wait_ready()
        ks.send("execute_request", {"code": "x = b'x' * (900 << 20)", "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        restarting = ks.until(lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "restarting")[-1]
        assert restarting["content"]["reason"] == "out of memory (limit 256 MiB)", restarting["content"]
        model = requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()
        assert model["last_exit"] == "out of memory (limit 256 MiB)", model
        wait_until(lambda: requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "idle",
                   timeout=60, what="the replacement kernel",
                   detail=lambda: s.log_text() + "\nkpoold's log, its end:\n" + d.log_text()[-4000:])
        assert ks.execute("print(1 + 1)")[1]["status"] == "ok"
        ks.close()
        assert any("died of out of memory (limit 256 MiB)" in line for line in s.log), "".join(s.log)
    finally:
        assert s.stop() == 0, s.log_text()
