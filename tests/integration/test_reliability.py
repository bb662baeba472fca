"""Faults kpoold must survive (issue #5): hung warm kernels, pools that keep failing, a
SIGKILLed daemon and the run after it, running out of file descriptors, per-pool rlimits."""
import json
import os
import re
import signal
import sys
import time

import pytest

from conftest import SOURCE_DIR, alive, run_code, wait_until

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import loadgen  # noqa: E402


def kernel_pids(d, pool, state="warm"):
    return [k["pid"] for k in d.status()["kernels"] if k["pool"] == pool and k["state"] == state]


def test_a_warm_ipykernel_that_hangs_is_found_by_the_heartbeat_and_replaced(kpoold):
    d = kpoold("""
        [pools.python3]
        kernelspec = "python3"
        size = 1
        heartbeat_s = 0.5
        heartbeat_timeout_s = 1
        shutdown_grace_s = 0.5
    """)
    d.wait_warm("python3", 1, timeout=60)
    (hung,) = kernel_pids(d, "python3")
    time.sleep(1.5)  # a few beats answered: a healthy kernel is left alone
    assert kernel_pids(d, "python3") == [hung]
    os.kill(hung, signal.SIGSTOP)  # alive, but answers nothing
    wait_until(lambda: d.pool("python3")["counters"]["hung_warm"] == 1, timeout=10,
               what="the heartbeat to notice")
    r = d.acquire("python3", timeout_ms=60000)
    assert r["pid"] != hung  # never handed out
    wait_until(lambda: not alive(hung), timeout=10, what="the hung kernel to be killed")
    pool = d.pool("python3")
    assert "stopped answering: no kernel_info_reply to a heartbeat within 1.0 s" in pool["last_error"]
    assert pool["counters"]["died_warm"] == 0  # counted once, as hung


def kernel_ports(d, pool):
    """The tcp ports of the pool's warm kernels, from their connection files."""
    ports = set()
    for k in d.status()["kernels"]:
        if k["pool"] == pool and k["state"] == "warm":
            with open(connection_file_of(d, k["id"])) as f:
                info = json.load(f)
            ports.update(info[name + "_port"] for name in ("shell", "iopub", "stdin", "control", "hb"))
    return ports


def connection_file_of(d, kernel_id):
    for root, _, names in os.walk(os.path.join(d.runtime_dir, "kernels")):
        if "kernel-%s.json" % kernel_id in names:
            return os.path.join(root, "kernel-%s.json" % kernel_id)
    raise AssertionError("no connection file for kernel %s" % kernel_id)


def test_heartbeats_leave_no_connection_to_an_idle_kernel_open(kpoold):
    # Issue #16: a beaten kernel used to keep its shell connection (a socket and an eventfd),
    # so the daemon's fd count depended on which kernels had been beaten yet.
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 2
        heartbeat_s = 0.2
    """)
    d.wait_warm("fake", 2)
    ports = kernel_ports(d, "fake")
    time.sleep(1.0)  # four beats each, all answered
    assert d.pool("fake")["counters"]["hung_warm"] == 0

    def connections_to_kernels():
        return [what for what in loadgen.fd_targets(d.proc.pid).values()
                if " tcp " in what and int(what.rsplit(":", 1)[1]) in ports]
    # A beat in flight holds a connection for a millisecond or two: wait for none.
    wait_until(lambda: not connections_to_kernels(), timeout=5,
               what="no connection to idle kernels (have %s)" % connections_to_kernels())


@pytest.mark.parametrize("spec, last_error", [
    ("fake-crash", "exited while starting: exit code 3"),
    ("no-such-binary", "cannot start /nonexistent/kernel: no such file or directory"),
])
def test_a_pool_that_keeps_failing_fails_acquires_fast_with_the_last_error(kpoold, spec, last_error):
    d = kpoold("""
        [pools.broken]
        kernelspec = "%s"
        size = 1
    """ % spec)
    # A waiter queued before the pool is known to be failing is told as soon as it is.
    start = time.monotonic()
    r = d.rpc(op="acquire", pool="broken", timeout_ms=30000, req_id="w")
    assert r["ok"] is False and r["error"]["code"] == "unavailable", r
    assert time.monotonic() - start < 10  # three failures with 0.5 s and 1 s of backoff between
    pool = d.pool("broken")
    assert pool["failing"] is True and pool["consecutive_failures"] >= 3
    start = time.monotonic()
    r = d.rpc(op="acquire", pool="broken", timeout_ms=30000)
    assert time.monotonic() - start < 0.5
    assert r["error"]["code"] == "unavailable"
    assert "pool 'broken' cannot start kernels" in r["error"]["message"]
    assert last_error in r["error"]["message"]
    spawned = d.pool("broken")["counters"]["spawn_failures"]
    time.sleep(2)  # backoff: no fork storm
    assert d.pool("broken")["counters"]["spawn_failures"] <= spawned + 1
    assert d.rpc(op="ping")["ok"]


def test_a_sigkilled_daemon_takes_its_kernels_along_and_the_next_run_cleans_up(kpoold, tmp_path):
    runtime = str(tmp_path / "shared")
    pools = """
        [pools.fake]
        kernelspec = "fake"
        size = 2
        transport = "ipc"
        [pools.python3]
        kernelspec = "python3"
        size = 1
    """
    doomed = kpoold(pools, runtime_dir=runtime)
    # A second daemon on the same runtime directory (its own control socket) must survive it all.
    bystander = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """, runtime_dir=runtime, control="ipc://%s/other" % runtime)
    doomed.wait_warm("fake", 2)
    doomed.wait_warm("python3", 1, timeout=60)
    bystander.wait_warm("fake", 1)
    leased = doomed.acquire("python3")
    # User code in the kernel starts a process of its own.
    grandchild = int(run_code(leased["connection_file"],
                              "import subprocess; print(subprocess.Popen(['sleep', '1000']).pid)"))
    kernels = [k["pid"] for k in doomed.status()["kernels"]]
    bystander_kernels = [k["pid"] for k in bystander.status()["kernels"]]
    kernels_dir = os.path.join(runtime, "kernels")
    before = set(os.listdir(kernels_dir))

    doomed.proc.kill()
    doomed.proc.wait()
    doomed.expected_exit = -signal.SIGKILL
    # The parent-death signal takes every kernel down with the daemon.
    wait_until(lambda: not any(alive(p) for p in kernels), timeout=5,
               what="the dead daemon's kernels to die")
    assert alive(grandchild)  # started by a kernel: reached only by the next run's sweep
    left = set(os.listdir(kernels_dir))
    assert left == before  # a SIGKILLed daemon cleans nothing up itself
    # Its ipc sockets live in a short directory elsewhere (the run directory is too long here).
    (doomed_sockets,) = re.findall(r"ipc sockets go to (\S+):", doomed.log_text())
    assert os.path.isdir(doomed_sockets)

    successor = kpoold(pools, runtime_dir=runtime)  # the same control endpoint, restarted
    wait_until(lambda: not alive(grandchild), timeout=5, what="the leftover process to be killed")
    assert "cleaned up after an earlier run" in successor.log_text()
    # Only the bystander's run and the successor's remain; the bystander's kernels are untouched.
    runs = [n for n in os.listdir(kernels_dir) if not n.endswith(".ipc")]  # (+ socket lists)
    assert len(runs) == 4  # two runs: a directory and a lock file each
    assert not os.path.exists(doomed_sockets)  # found through the dead run's list, and removed
    assert all(alive(p) for p in bystander_kernels)
    assert bystander.pool("fake")["warm"] == 1
    assert bystander.rpc(op="ping")["ok"]
    successor.wait_warm("fake", 2)
    assert successor.acquire("fake")["ok"]


def test_out_of_file_descriptors_gives_capacity_and_service_resumes(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 6
        max_starting = 6
    """, wrapper=["prlimit", "--nofile=72:72", "--"])
    wait_until(lambda: "out of file descriptors" in d.log_text(), timeout=20,
               what="the daemon to run short of file descriptors")
    warm = d.wait_warm("fake", 1)
    time.sleep(1)
    pool = d.pool("fake")
    assert 1 <= pool["warm"] < 6 and pool["counters"]["spawn_failures"] == 0
    # Take kernels until none can start: leased kernels hold fewer of the daemon's descriptors
    # than warm ones (no heartbeat), so a refill may still fit one or two more first.
    held = []
    for _ in range(20):
        start = time.monotonic()
        r = d.rpc(op="acquire", pool="fake", timeout_ms=20000)
        if not r["ok"]:
            break
        held.append(r)
    assert r["ok"] is False and r["error"]["code"] == "capacity", r
    assert "out of file descriptors" in r["error"]["message"]
    assert time.monotonic() - start < 3
    assert d.rpc(op="ping")["ok"] and d.status()["ok"]
    for k in held:
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    d.wait_warm("fake", 1)
    assert d.acquire("fake", timeout_ms=5000)["ok"]
    assert warm


def test_resource_limits_are_applied_to_each_kernel(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
        [pools.fake.limits]
        address_space_mb = 4096
        cpu_seconds = 3600
        open_files = 200
    """)
    d.wait_warm("fake", 1)
    (pid,) = kernel_pids(d, "fake")
    with open("/proc/%d/limits" % pid) as f:
        limits = {line[:26].strip(): line[26:].split()[:2] for line in f.readlines()[1:]}
    assert limits["Max open files"] == ["200", "200"]
    assert limits["Max cpu time"] == ["3600", "3600"]
    assert limits["Max address space"] == [str(4096 << 20)] * 2
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = f.read().split(b"\0")
    assert any(e.startswith(b"KPOOL_INSTANCE=") for e in env)
