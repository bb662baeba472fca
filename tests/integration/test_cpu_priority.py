"""Refill that never steals CPU from work (issue #12): a kernel runs at SCHED_IDLE while it starts
(all its threads) and at SCHED_OTHER from the moment it is warm, before anyone can have it; a
start that an acquire waits for runs at normal priority from the first moment, and an acquire
arriving during a background start hurries it. As an unprivileged user this needs RLIMIT_NICE
20 (LimitNICE=20 in the unit); without it kernels start at normal priority and status says why."""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import Daemon, alive, connected, run_code, wait_until

SCHED_OTHER, SCHED_IDLE = os.SCHED_OTHER, os.SCHED_IDLE

# Tests that watch a start at SCHED_IDLE turn the limit off: on a loaded machine (CI) finding the
# starting kernel can take longer than background_limit_s.
NO_LIMIT = "background_limit_s = 0"

SLOW_START = """
[pools.py]
kernelspec = "python3"
launcher = "%s"
size = %d
startup_code = "import time\\ntime.sleep(%s)"
"""


def policies(pid):
    """The scheduling policies of every thread of pid."""
    found = set()
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            found.add(os.sched_getscheduler(int(tid)))
        except OSError:
            pass  # the thread ended meanwhile
    return found


def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def starting_kernel(d, pool="py"):
    """The pid of a kernel of `pool` that is starting and has started its threads."""
    def find():
        for k in d.status()["kernels"]:
            if k["pool"] == pool and k["state"] == "starting" and k["pid"] and threads(k["pid"]) > 3:
                return k["pid"]
        return None
    return wait_until(find, timeout=60, what="a starting kernel with its threads")


def fresh_start(d, launcher, size):
    """Makes the pool start `size` kernels now (forked ones for a fork pool)."""
    if launcher == "fork":
        wait_until(lambda: d.pool("py").get("zygote_ready"), timeout=60, what="the zygote")
    assert d.rpc(op="drain", pool="py")["ok"]
    assert d.rpc(op="resize", pool="py", size=size)["ok"]


@pytest.mark.parametrize("launcher", ["spawn", "fork"])
def test_a_kernel_starts_at_idle_priority_and_is_normal_once_warm(kpoold, launcher):
    d = kpoold(SLOW_START % (launcher, 0, 3), NO_LIMIT)
    assert d.status()["background_priority"] == {"on": True, "why_not": None, "limit_s": 0,
                                                  "starved_starts": 0}
    fresh_start(d, launcher, 1)
    pid = starting_kernel(d)
    assert policies(pid) == {SCHED_IDLE}
    d.wait_warm("py", 1, timeout=60)
    assert policies(pid) == {SCHED_OTHER}
    if launcher == "fork":
        # The zygote dropped to SCHED_IDLE for that background fork only, and is back.
        zygote = d.pool("py")["zygote"]
        assert zygote["forked_at_idle"] == 1 and policies(zygote["pid"]) == {SCHED_OTHER}, zygote
    k = d.acquire("py")
    assert k["pid"] == pid and policies(pid) == {SCHED_OTHER}
    d.rpc(op="release", kernel_id=k["kernel_id"])


@pytest.mark.parametrize("launcher", ["spawn", "fork"])
def test_a_start_an_acquire_waits_for_runs_at_normal_priority(kpoold, launcher):
    d = kpoold(SLOW_START % (launcher, 0, 3), NO_LIMIT)
    fresh_start(d, launcher, 0)
    got = []
    waiter = threading.Thread(target=lambda: got.append(d.rpc(op="acquire", pool="py", timeout_ms=60000)))
    waiter.start()
    pid = starting_kernel(d)
    assert policies(pid) == {SCHED_OTHER}
    waiter.join()
    assert got[0]["ok"] and got[0]["pid"] == pid
    if launcher == "fork":
        assert d.pool("py")["zygote"]["forked_at_idle"] == 0  # the fork was awaited
    d.rpc(op="release", kernel_id=got[0]["kernel_id"])


def test_an_acquire_hurries_a_background_start(kpoold):
    d = kpoold(SLOW_START % ("spawn", 1, 4), NO_LIMIT)
    pid = starting_kernel(d)
    assert policies(pid) == {SCHED_IDLE}
    got = []
    waiter = threading.Thread(target=lambda: got.append(d.rpc(op="acquire", pool="py", timeout_ms=60000)))
    waiter.start()
    wait_until(lambda: policies(pid) == {SCHED_OTHER}, timeout=10, what="the start to be hurried")
    assert any(k["pid"] == pid and k["state"] == "starting" for k in d.status()["kernels"])
    waiter.join()
    assert got[0]["ok"] and got[0]["pid"] == pid
    d.rpc(op="release", kernel_id=got[0]["kernel_id"])


def test_a_start_still_going_after_background_limit_gets_normal_priority(kpoold):
    d = kpoold(SLOW_START % ("spawn", 1, 6), "background_limit_s = 1")
    pid = starting_kernel(d)  # at SCHED_IDLE for its first second (a loaded host may take longer)
    wait_until(lambda: policies(pid) == {SCHED_OTHER}, timeout=10, what="the limit to pass")
    assert any(k["pid"] == pid and k["state"] == "starting" for k in d.status()["kernels"])
    assert d.status()["background_priority"]["starved_starts"] == 1


def test_without_a_limit_a_start_stays_at_idle_priority(kpoold):
    d = kpoold(SLOW_START % ("spawn", 1, 6), NO_LIMIT)
    pid = starting_kernel(d)
    time.sleep(2)  # nothing to wait for: the check is that nothing changes over a while
    assert policies(pid) == {SCHED_IDLE}
    assert d.status()["background_priority"]["starved_starts"] == 0


@contextlib.contextmanager
def no_idle_cpu():
    """Busy loops at normal priority on every CPU (and one more), for at most 60 s."""
    spin = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() + 1)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


@pytest.mark.parametrize("launcher", ["spawn", "fork"])
def test_a_host_that_is_never_idle_still_refills(kpoold, launcher):
    """A refill at SCHED_IDLE alone would never finish; after background_limit_s it goes on at
    normal priority."""
    d = kpoold('[pools.py]\nkernelspec = "python3"\nlauncher = "%s"\nsize = 0\n' % launcher,
               "background_limit_s = 1")
    if launcher == "fork":
        wait_until(lambda: d.pool("py").get("zygote_ready"), timeout=60, what="the zygote")
    with no_idle_cpu():
        assert d.rpc(op="resize", pool="py", size=1)["ok"]
        d.wait_warm("py", 1, timeout=40)
    assert d.status()["background_priority"]["starved_starts"] >= 1


@pytest.mark.parametrize("launcher", ["spawn", "fork"])
def test_a_released_kernel_on_a_host_that_is_never_idle_still_exits_cleanly(kpoold, tmp_path,
                                                                             launcher):
    """A released kernel's teardown is background work (SCHED_IDLE), which a host with no idle
    CPU leaves no time for: when the shutdown grace ends it gets normal priority and one more
    grace, so its atexit functions run instead of a SIGTERM cutting them off."""
    d = kpoold('[pools.py]\nkernelspec = "python3"\nlauncher = "%s"\nsize = 1\n' % launcher)
    d.wait_warm("py", 1, timeout=60)
    k = d.acquire("py")
    marker = tmp_path / "atexit-ran"
    run_code(k["connection_file"],
             "import atexit; atexit.register(lambda: open(%r, 'w').write('yes'))" % str(marker))
    with no_idle_cpu():
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
        wait_until(lambda: not alive(k["pid"]), timeout=30, what="the released kernel to exit")
    assert marker.read_text() == "yes"
    assert "pid=%d: still shutting down after 2.0 s at idle CPU priority" % k["pid"] in d.log_text()


def test_a_released_kernel_starved_at_exit_finishes_and_a_hung_or_runaway_one_does_not_wait(kpoold, tmp_path):
    """Issue #53 item 7: at release a kernel may still run its atexit work (a history flush, a
    file written, a connection closed). On a busy host that work is kept waiting for a CPU: it
    gets grace after grace while it is (up to 30 s). One that hangs (sleeps) gets SIGTERM on
    schedule, and so does a runaway loop on a host with CPU to spare: it ran, it was not starved."""
    d = kpoold('[pools.py]\nkernelspec = "python3"\nlauncher = "spawn"\nsize = 3\n')
    d.wait_warm("py", 3, timeout=60)
    runaway = d.acquire("py")
    msg = start_code(runaway["connection_file"], "while True: pass")
    started = time.monotonic()
    assert d.rpc(op="release", kernel_id=runaway["kernel_id"])["ok"]
    wait_until(lambda: not alive(runaway["pid"]), timeout=30, what="the runaway kernel to be stopped")
    assert time.monotonic() - started < 10  # two graces of 2 s, then SIGTERM (slack for a busy host)
    assert msg

    d.wait_warm("py", 2, timeout=60)
    working, hung = d.acquire("py"), d.acquire("py")
    marker = tmp_path / "atexit-done"
    # About 3 s of CPU: more than the two graces (4 s) give it on a host with no idle CPU.
    run_code(working["connection_file"],
             "import atexit, time\n"
             "def work():\n"
             "    spent = time.process_time() + 3\n"
             "    while time.process_time() < spent: pass\n"
             "    open(%r, 'w').write('yes')\n"
             "atexit.register(work)" % str(marker))
    run_code(hung["connection_file"], "import atexit, time; atexit.register(lambda: time.sleep(600))")
    with no_idle_cpu():
        started = time.monotonic()
        assert d.rpc(op="release", kernel_id=hung["kernel_id"])["ok"]
        assert d.rpc(op="release", kernel_id=working["kernel_id"])["ok"]
        wait_until(lambda: not alive(hung["pid"]), timeout=30, what="the hung kernel to be stopped")
        hung_took = time.monotonic() - started
        wait_until(lambda: not alive(working["pid"]), timeout=40, what="the working kernel to exit")
    assert marker.read_text() == "yes"
    assert hung_took < 12, hung_took  # two graces of 2 s, then SIGTERM (slack for a busy host)
    # The pid is gone once the kernel exits; the daemon logs the exit when its loop reaps it, a
    # moment later.
    wait_until(lambda: "pid=%d exit code 0" % working["pid"] in d.log_text(), timeout=10,
               what="the daemon to log the working kernel's exit")
    log = d.log_text()
    assert "pid=%d: still shutting down and kept waiting for a CPU" % working["pid"] in log
    assert "pid=%d killed by signal 15" % hung["pid"] in log, log[-3000:]
    assert "pid=%d killed by signal 15" % runaway["pid"] in log, log[-3000:]


def start_code(connection_file, code):
    """Sends `code` to the kernel without waiting for it to finish; its msg_id."""
    with connected(connection_file) as kc:
        msg_id = kc.execute(code)
        while True:  # it runs once the kernel has published its input
            msg = kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
                return msg_id


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to run kpoold as another user")
@pytest.mark.parametrize("nice_limit", [0, 20])
def test_as_an_unprivileged_user_background_priority_needs_rlimit_nice(nice_limit):
    """kpoold as uid 65534: with RLIMIT_NICE 20 (LimitNICE=20) starts are background work and
    warm kernels get normal priority back; with 0 (the default) kernels start at normal
    priority, never stuck at idle, and status says why."""
    if subprocess.run(["prlimit", "--nice=%d:%d" % (nice_limit, nice_limit), "true"]).returncode != 0:
        pytest.skip("this machine does not let root raise RLIMIT_NICE to %d (no CAP_SYS_RESOURCE)"
                    % nice_limit)
    work = tempfile.mkdtemp(prefix="kpool-nobody-")
    os.chmod(work, 0o755)
    os.chown(work, 65534, 65534)
    env = {"HOME": work, "IPYTHONDIR": os.path.join(work, "ipython"), "JUPYTER_PATH": "",
           "JUPYTER_RUNTIME_DIR": os.path.join(work, "jupyter-runtime")}
    wrapper = ["prlimit", "--nice=%d:%d" % (nice_limit, nice_limit), "setpriv", "--reuid=65534",
               "--regid=65534", "--clear-groups", "--"]
    d = Daemon(work, SLOW_START % ("spawn", 0, 2), daemon_toml="allowed_uids = [0]\n" + NO_LIMIT, env=env,
               wrapper=wrapper)
    try:
        d.start()
        priority = d.status()["background_priority"]
        fresh_start(d, "spawn", 1)
        pid = starting_kernel(d)
        assert os.stat("/proc/%d" % pid).st_uid == 65534
        if nice_limit == 20:
            assert priority == {"on": True, "why_not": None, "limit_s": 0, "starved_starts": 0}
            assert policies(pid) == {SCHED_IDLE}
        else:
            assert priority["on"] is False
            assert "RLIMIT_NICE is 0" in priority["why_not"] and "LimitNICE=20" in priority["why_not"]
            assert policies(pid) == {SCHED_OTHER}
        d.wait_warm("py", 1, timeout=60)
        assert policies(pid) == {SCHED_OTHER}
        assert d.pool("py")["counters"]["spawn_failures"] == 0
        assert d.stop() == 0, d.log_text()
        d.assert_no_leaks()
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
        subprocess.run(["rm", "-rf", work])
