"""Pools with launcher = "fork" (issue #7): kernels forked from a zygote that imported
ipykernel once behave like spawned ones, share no state with each other, die with the daemon,
and the pool keeps serving (by plain spawning) while a dead zygote is restarted. Also
startup_code, which preheats kernels of either launcher."""
import json
import os
import signal
import subprocess
import time

from jupyter_client import BlockingKernelClient

from conftest import PYTHON, alive, run_code, wait_until

FORK_POOL = """
[pools.py]
kernelspec = "python3"
launcher = "fork"
size = %d
max_starting = 4
"""


def parent_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def zygote_pid(d):
    wait_until(lambda: "zygote py ready" in d.log_text(), timeout=60, what="the zygote")
    line = [l for l in d.log_text().splitlines() if "zygote py ready" in l][-1]
    return int(line.split("pid=")[1].split()[0])


def fresh_forked_kernels(d, n):
    """Makes the pool fork n new kernels (the first ones may be spawned while the zygote
    imports) and acquires them."""
    zygote = zygote_pid(d)
    assert d.rpc(op="drain", pool="py")["ok"]
    assert d.rpc(op="resize", pool="py", size=n)["ok"]
    d.wait_warm("py", n, timeout=60)
    kernels = [d.acquire("py", cwd="/tmp") for _ in range(n)]
    assert all(parent_of(k["pid"]) == zygote for k in kernels)
    return kernels


def test_forked_kernels_run_code_and_share_nothing(kpoold):
    d = kpoold(FORK_POOL % 2)
    a, b = fresh_forked_kernels(d, 2)
    code = ("import os, random, sys; print(os.getpid(), os.getppid() != %d, os.getcwd(), "
            "random.random(), os.environ['KPOOL_INSTANCE'] != '', 'ipykernel' in sys.modules)"
            % d.proc.pid)
    out_a = run_code(a["connection_file"], code).split()
    out_b = run_code(b["connection_file"], code).split()
    assert out_a[0] == str(a["pid"]) and out_b[0] == str(b["pid"])
    assert out_a[1] == out_b[1] == "True"  # forked by the zygote, not by kpoold
    assert out_a[2] == out_b[2] == "/tmp"  # the acquire's cwd
    assert out_a[3] != out_b[3]  # random streams reseeded in each child
    assert out_a[4:] == out_b[4:] == ["True", "True"]
    assert a["connection"]["key"] != b["connection"]["key"]
    ports = lambda k: {k["connection"][p] for p in ("shell_port", "iopub_port", "stdin_port",
                                                     "control_port", "hb_port")}
    assert not ports(a) & ports(b)
    # Interrupt reaches the forked kernel's process group like a spawned one's.
    kc = BlockingKernelClient()
    kc.load_connection_file(a["connection_file"])
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        msg_id = kc.execute("import time; time.sleep(60)")
        time.sleep(1)
        assert d.rpc(op="signal", kernel_id=a["kernel_id"], signum=int(signal.SIGINT))["ok"]
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        kc.stop_channels()
    for k in (a, b):
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
        wait_until(lambda: not alive(k["pid"]), what="the released kernel to exit")
    # The zygote reaps its kernels and reports each exit over its socket: kpoold learns of it a
    # moment after the process is gone.
    wait_until(lambda: d.rpc(op="poll", kernel_id=a["kernel_id"])["alive"] is False,
               what="kpoold to learn that the released kernel exited")


# /proc/self/cmdline's arguments; a forked kernel's are padded with NULs to the end of the
# zygote's argument area, which only CAP_SYS_RESOURCE could shrink (PR_SET_MM_ARG_END).
ARGV_CODE = ("import json, sys\n"
             "args = open('/proc/self/cmdline').read().rstrip(chr(0)).split(chr(0))\n"
             "print(json.dumps([sys.argv, sys.orig_argv, args]))")


def test_a_forked_kernel_has_a_launched_ones_argv_and_ps_tells_the_zygote_and_its_pool(kpoold):
    """Issue #53 item 7 and #49 item 5: the zygote's command line was its whole source (tens of
    KB), and every forked kernel showed it too, while its sys.argv was not a launched kernel's.
    Now a forked kernel has a spawned one's sys.argv, sys.orig_argv and /proc/self/cmdline (the
    connection file aside), its parent the zygote; ps shows the zygote as `kpool-zygote pool=NAME`
    (named kpool-zygote in top)."""
    d = kpoold(FORK_POOL % 1 + '[pools.sp]\nkernelspec = "python3"\nlauncher = "spawn"\nsize = 1\n')
    (forked,) = fresh_forked_kernels(d, 1)
    d.wait_warm("sp", 1, timeout=60)
    spawned = d.acquire("sp")
    zygote = zygote_pid(d)

    def argvs(k):
        seen = json.loads(run_code(k["connection_file"], ARGV_CODE))
        return json.loads(json.dumps(seen).replace(k["connection_file"], "FILE"))

    assert argvs(forked) == argvs(spawned)
    assert argvs(forked)[2] == [PYTHON, "-m", "ipykernel_launcher", "-f", "FILE"]

    def name(pid):
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()

    with open("/proc/%d/cmdline" % zygote, "rb") as f:
        assert f.read().split(b"\0")[:2] == [b"kpool-zygote", b"pool=py"]
    assert name(zygote) == "kpool-zygote"
    assert name(forked["pid"]) == name(spawned["pid"])
    def ps(pid):
        return subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()

    assert ps(forked["pid"]).replace(forked["connection_file"], "FILE") == \
        ps(spawned["pid"]).replace(spawned["connection_file"], "FILE")
    assert ps(zygote).startswith("kpool-zygote pool=py (") and len(ps(zygote)) < 200, ps(zygote)[:300]
    for k in (forked, spawned):
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]


def test_a_dead_zygote_is_restarted_while_the_pool_spawns(kpoold):
    d = kpoold(FORK_POOL % 1)
    (k,) = fresh_forked_kernels(d, 1)
    first = zygote_pid(d)
    d.rpc(op="resize", pool="py", size=1)
    d.wait_warm("py", 1, timeout=60)
    os.kill(first, signal.SIGKILL)
    # Its kernels die with it (parent-death signal), the leased one included.
    wait_until(lambda: not alive(k["pid"]), timeout=5, what="the zygote's kernels to die")
    wait_until(lambda: d.rpc(op="poll", kernel_id=k["kernel_id"])["alive"] is False,
               what="kpoold to learn that the zygote's kernel died")
    # Meanwhile the pool refills by plain spawning: kpoold is the parent.
    spawned = d.acquire("py", timeout_ms=60000)
    wait_until(lambda: "zygote py ready" in d.log_text().split("zygote py exited")[-1],
               timeout=60, what="the zygote to be restarted")
    assert zygote_pid(d) != first
    assert "plain spawning meanwhile" in d.log_text()
    assert spawned["pid"] != k["pid"]


def test_a_sigkilled_daemon_takes_the_zygote_and_its_kernels(kpoold):
    d = kpoold(FORK_POOL % 1)
    (k,) = fresh_forked_kernels(d, 1)
    zygote = zygote_pid(d)
    d.proc.kill()
    d.proc.wait()
    d.expected_exit = -signal.SIGKILL
    wait_until(lambda: not alive(zygote) and not alive(k["pid"]), timeout=5,
               what="the zygote and its kernel to die with the daemon")


def test_startup_code_preheats_kernels_without_a_trace(kpoold):
    d = kpoold("""
        [pools.spawned]
        kernelspec = "python3"
        size = 1
        startup_code = "import json\\npreheated = 6 * 7"
        [pools.py]
        kernelspec = "python3"
        launcher = "fork"
        size = 1
        startup_code = "import json\\npreheated = 6 * 7"
    """)
    for pool in ("spawned", "py"):
        d.wait_warm(pool, 1, timeout=60)
        k = d.acquire(pool)
        kc = BlockingKernelClient()
        kc.load_connection_file(k["connection_file"])
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=30)
            out = []
            reply = kc.execute_interactive(
                "print(preheated, 'json' in dir(), len(get_ipython().history_manager.input_hist_raw))",
                timeout=30, output_hook=lambda m: out.append(m["content"].get("text", ""))
                if m["msg_type"] == "stream" else None)
            # The startup code ran (names defined) but left no history and no execution count.
            assert "".join(out).split() == ["42", "True", "2"], out  # [''] + this cell
            assert reply["content"]["execution_count"] == 1
        finally:
            kc.stop_channels()


def test_failing_startup_code_is_a_spawn_failure_with_its_traceback(kpoold):
    d = kpoold("""
        [pools.bad]
        kernelspec = "python3"
        size = 1
        startup_code = "import json\\nraise ValueError('no such dataset')"
        shutdown_grace_s = 0.5
    """)
    wait_until(lambda: d.pool("bad")["counters"]["spawn_failures"] >= 1, timeout=60,
               what="a failed start")
    pool = d.pool("bad")
    assert "startup_code raised ValueError: no such dataset" in pool["last_error"]
    assert pool["warm"] == 0
    log = d.log_text()
    assert "startup_code failed" in log and "ValueError: no such dataset" in log
    assert "Traceback" in log or "----" in log
