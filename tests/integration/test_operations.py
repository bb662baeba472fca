"""Running kpoold as a service (issue #6): SIGHUP reloads, resize and drain, the systemd
notification protocol against a socket the test reads, Prometheus metrics checked by promtool,
and the systemd unit checked by systemd-analyze."""
import os
import shutil
import signal
import socket
import subprocess
import textwrap
import time
import urllib.request

import pytest

from conftest import alive, free_port, HERE, KPOOLD, run_code, wait_until

KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))


def rewrite_config(d, pools_toml, daemon_toml=""):
    with open(d.config_path, "w") as f:
        f.write('[daemon]\nruntime_dir = "%s"\nlog_level = "debug"\n%s\n%s\n' % (
            d.runtime_dir, textwrap.dedent(daemon_toml), textwrap.dedent(pools_toml)))


def pools_by_name(d):
    return {p["name"]: p for p in d.status()["pools"]}


def warm_pids(d, pool):
    return {k["pid"] for k in d.status()["kernels"] if k["pool"] == pool and k["state"] == "warm"}


PORT_NAMES = ("shell", "iopub", "stdin", "control", "hb")


def test_kernel_ports_come_from_above_the_ephemeral_range_and_follow_a_reload(kpoold):
    """jupyter_client (a notebook server's kernels, a papermill run's) and outgoing connections
    take their ports from the OS's ephemeral range, so by default kpoold's kernels get theirs from
    above it: neither side can take a port the other chose before its kernel binds it. A range of
    the config's own and the OS's choice apply from a reload on, to kernels started after it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first, last = map(int, f.read().split())
    pools = """
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """
    d = kpoold(pools)
    d.wait_warm("fake", 1)
    ports = d.status()["kernel_ports"]
    if 65535 - last >= 1000:
        assert ports["range"] == "%d-65535" % (last + 1)
        assert "above the OS's ephemeral range %d-%d" % (first, last) in ports["why"]
        r = d.acquire("fake")
        assert all(last < r["connection"][n + "_port"] <= 65535 for n in PORT_NAMES)
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    else:  # a host whose ephemeral range leaves too little above it: the OS's choice
        assert ports["range"] is None and ports["why"].startswith("auto: the OS's choice")

    rewrite_config(d, pools, 'kernel_ports = "29200-29239"')
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: d.status()["kernel_ports"]["range"] == "29200-29239", what="the new range")
    assert d.status()["kernel_ports"]["why"] == 'kernel_ports = "29200-29239"'
    d.wait_warm("fake", 1)
    held = [d.acquire("fake") for _ in range(3)]  # the first may have started before the reload
    for r in held[1:]:
        assert all(29200 <= r["connection"][n + "_port"] <= 29239 for n in PORT_NAMES), r
    assert len({r["connection"][n + "_port"] for r in held[1:] for n in PORT_NAMES}) == 10
    for r in held:
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]

    rewrite_config(d, pools, 'kernel_ports = "ephemeral"')
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: d.status()["kernel_ports"]["range"] is None, what="the OS's choice")
    assert d.status()["kernel_ports"]["why"].startswith('kernel_ports = "ephemeral"')
    d.wait_warm("fake", 1)
    held = [d.acquire("fake") for _ in range(2)]
    assert all(first <= held[1]["connection"][n + "_port"] <= last for n in PORT_NAMES)
    for r in held:
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    assert "tcp kernels' ports: 29200-29239" in d.log_text()


def test_sighup_applies_a_new_config_without_dropping_kernels(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
        [pools.going]
        kernelspec = "fake"
        size = 1
    """)
    d.wait_warm("fake", 1)
    d.wait_warm("going", 1)
    (kept,) = warm_pids(d, "fake")
    leased = d.acquire("going")
    rewrite_config(d, """
        [pools.fake]
        kernelspec = "fake"
        size = 3
        [pools.new]
        kernelspec = "fake"
        size = 1
    """)
    d.proc.send_signal(signal.SIGHUP)
    d.wait_warm("fake", 3)
    d.wait_warm("new", 1)
    assert kept in warm_pids(d, "fake")  # the warm kernel was not dropped
    going = pools_by_name(d)["going"]
    assert going["removed"] is True and going["leased"] == 1 and going["warm"] == 0
    assert alive(leased["pid"])  # a leased kernel runs on
    r = d.rpc(op="acquire", pool="going", timeout_ms=0)
    assert r["error"]["code"] == "unknown_pool"
    assert d.rpc(op="release", kernel_id=leased["kernel_id"])["ok"]
    wait_until(lambda: "going" not in pools_by_name(d), what="the removed pool to go")
    assert "config reloaded" in d.log_text()

    # A broken file changes nothing: the diagnostic goes to the log.
    with open(d.config_path, "a") as f:
        f.write("[pools.fake]\nsise = 2\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "config not reloaded" in d.log_text(), what="the refusal")
    assert "kpool.toml:" in d.log_text().split("config not reloaded")[1].splitlines()[0]
    assert pools_by_name(d)["fake"]["size"] == 3 and d.rpc(op="ping")["ok"]
    # Nor does a change that takes a restart.
    rewrite_config(d, "[pools.fake]\nkernelspec = \"fake\"\nsize = 1\n",
                   'control = "ipc://%s/elsewhere"' % d.runtime_dir)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "[daemon] control changed" in d.log_text(), what="the restart refusal")
    assert pools_by_name(d)["fake"]["size"] == 3


def test_a_resize_by_reload_keeps_a_default_pools_warm_kernels_and_zygote(kpoold):
    """Issue #38: a pool that sets no launcher (auto: forked ipykernels) and leaves every key at
    its default kept nothing over a SIGHUP that only resized it. Only a change to what kernels
    are started with replaces them (and the zygote)."""
    d = kpoold("""
        [pools.py]
        kernelspec = "python3"
        size = 1
    """)
    d.wait_warm("py", 1, timeout=90)
    wait_until(lambda: pools_by_name(d)["py"].get("zygote", {}).get("ready"), timeout=60, what="the zygote")
    (kept,) = warm_pids(d, "py")
    zygote = pools_by_name(d)["py"]["zygote"]["pid"]
    rewrite_config(d, """
        [pools.py]
        kernelspec = "python3"
        size = 3
    """)
    d.proc.send_signal(signal.SIGHUP)
    d.wait_warm("py", 3, timeout=90)
    assert kept in warm_pids(d, "py")
    assert pools_by_name(d)["py"]["zygote"]["pid"] == zygote
    resized = [line for line in d.log_text().splitlines() if "pool py reconfigured: size 1 -> 3" in line]
    assert resized and not any("replaced" in line for line in resized), resized
    # A change to what kernels are started with: a fresh zygote and fresh kernels.
    rewrite_config(d, """
        [pools.py]
        kernelspec = "python3"
        size = 3
        startup_code = "import json"
    """)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: len(warm_pids(d, "py")) == 3 and kept not in warm_pids(d, "py"), timeout=90,
               what="the warm kernels replaced")
    wait_until(lambda: (pools_by_name(d)["py"].get("zygote") or {}).get("pid") not in (None, zygote), timeout=60,
               what="a fresh zygote")
    assert "pool py reconfigured: size 3 -> 3; warm kernels replaced" in d.log_text()


def test_a_reload_that_changes_the_kernelspec_replaces_warm_kernels(kpoold):
    d = kpoold("""
        [pools.p]
        kernelspec = "fake"
        size = 1
    """)
    d.wait_warm("p", 1)
    (old,) = warm_pids(d, "p")
    rewrite_config(d, """
        [pools.p]
        kernelspec = "fake"
        size = 1
        transport = "ipc"
    """)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: warm_pids(d, "p") and old not in warm_pids(d, "p"),
               what="the warm kernel to be replaced")
    assert d.acquire("p")["connection"]["transport"] == "ipc"


def test_a_reload_that_makes_a_pool_a_sandbox_replaces_its_unsandboxed_warm_kernels(kpoold):
    """Issue #51: which keys replace warm kernels on a reload is their rows' reload column
    (config/config_keys.hpp). isolation and [sandbox] were missing from the hand-kept list, so a
    pool made a sandbox by SIGHUP went on handing out the warm kernels it had: unsandboxed."""
    pool = """
        [pools.py]
        kernelspec = "python3"
        launcher = "spawn"
        size = 1
    """
    d = kpoold(pool)
    d.wait_warm("py", 1)
    # A sandboxed kernel has mount and pid namespaces of its own (as root it runs as nobody in
    # them; as a user, in a user namespace too: docs/security.md).
    ours = os.readlink("/proc/self/ns/mnt")
    which_ns = "import os; print(os.readlink('/proc/self/ns/mnt'))"
    # Unprotected, as configured: the kernel shares our mount namespace.
    k = d.acquire("py")
    assert run_code(k["connection_file"], which_ns).strip() == ours
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    d.wait_warm("py", 1)
    old = warm_pids(d, "py")
    rewrite_config(d, pool + 'isolation = "sandbox"\n')
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: warm_pids(d, "py") and not (old & warm_pids(d, "py")), timeout=60,
               what="the unsandboxed warm kernel to be replaced")
    k = d.acquire("py")
    assert run_code(k["connection_file"], which_ns).strip() != ours
    assert "pool py: 'isolation' changed, so its warm kernels are replaced" in d.log_text()


def test_resize_and_drain_over_the_control_socket_and_the_cli(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """, daemon_toml="max_kernels = 8")
    d.wait_warm("fake", 1)
    r = d.rpc(op="resize", pool="fake", size=3)
    assert r["ok"] and r["size"] == 3 and r["previous_size"] == 1
    d.wait_warm("fake", 3)
    held = d.acquire("fake")
    out = subprocess.run([KPOOL, "--endpoint", d.endpoint, "resize", "fake", "1"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "fake: size 1 (was 3)\n"
    wait_until(lambda: pools_by_name(d)["fake"]["warm"] == 1 and
               pools_by_name(d)["fake"]["stopping"] == 0, what="the surplus to stop")
    assert d.rpc(op="resize", pool="fake", size=9)["error"]["message"] == \
        "pool sizes would add up to 9, more than max_kernels = 8"
    assert d.rpc(op="resize", pool="nope", size=1)["error"]["code"] == "unknown_pool"

    out = subprocess.run([KPOOL, "--endpoint", d.endpoint, "drain", "fake"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout == "fake: drained (size was 1)\n"
    wait_until(lambda: pools_by_name(d)["fake"]["warm"] == 0, what="the drain")
    p = pools_by_name(d)["fake"]
    assert p["drained"] is True and p["leased"] == 1 and alive(held["pid"])
    r = d.rpc(op="acquire", pool="fake", timeout_ms=5000)
    assert r["error"]["code"] == "unavailable" and "drained" in r["error"]["message"]
    assert d.rpc(op="resize", pool="fake", size=1)["ok"]
    assert d.acquire("fake", timeout_ms=10000)["ok"]
    status = subprocess.run([KPOOL, "--endpoint", d.endpoint, "status", "--wide"], capture_output=True,
                            text=True)
    assert "ACQUIRE_P50_MS" in status.stdout and "TO_WARM_P50_S" in status.stdout


class NotifySocket:
    """Plays systemd's side of sd_notify: a datagram socket the daemon writes to."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []

    def wait_for(self, text, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in m for m in self.messages):
                return [m for m in self.messages if text in m]
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        raise AssertionError("no %r from the daemon; got %r" % (text, self.messages))

    def collect(self, seconds):
        """Every message that arrives within `seconds`."""
        got = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                got.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        self.messages += got
        return got


def test_a_refill_after_an_acquire_waits_refill_delay_unless_the_pool_is_empty(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 3
    """, daemon_toml="refill_delay_s = 1.5")
    d.wait_warm("fake", 3)
    first = d.acquire("fake")
    started = time.monotonic()
    second = d.acquire("fake")  # a burst: refilled with the first
    pool = d.pool("fake")
    assert pool["warm"] == 1 and pool["starting"] == 0, pool  # deferred: nothing started yet
    wait_until(lambda: d.pool("fake")["warm"] == 3, timeout=10, what="the deferred refill")
    assert time.monotonic() - started > 1.2
    # An acquire that leaves the pool empty refills at once.
    rest = [d.acquire("fake") for _ in range(3)]
    pool = d.pool("fake")
    assert pool["warm"] == 0 and pool["starting"] > 0, pool
    for r in [first, second] + rest:
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]


def test_a_spawned_pool_refills_a_second_after_an_acquire_unless_it_sets_its_own_delay(kpoold):
    d = kpoold("""
        [pools.default]
        kernelspec = "fake"
        size = 2
        [pools.now]
        kernelspec = "fake"
        size = 2
        refill_delay_s = 0
    """)
    d.wait_warm("default", 2)
    d.wait_warm("now", 2)
    assert d.pool("default")["refill_delay_s"] == 1 and d.pool("now")["refill_delay_s"] == 0
    now = d.acquire("now")
    pool = d.pool("now")
    assert pool["starting"] + pool["warm"] == 2, pool  # at once
    taken = d.acquire("default")
    started = time.monotonic()
    pool = d.pool("default")
    assert pool["warm"] == 1 and pool["starting"] == 0, pool
    wait_until(lambda: d.pool("default")["warm"] == 2, timeout=10, what="the deferred refill")
    assert time.monotonic() - started > 0.8
    for r in (now, taken):
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]


def test_an_acquire_while_the_pool_is_refilling_refills_at_once(kpoold):
    d = kpoold("""
        [pools.slow]
        kernelspec = "fake-slow"
        size = 4
        max_starting = 4
    """)  # spawned: refill 1 s after an acquire to an idle pool; fake-slow warms in 0.7 s
    d.wait_warm("slow", 4)
    first = d.acquire("slow")
    wait_until(lambda: d.pool("slow")["starting"] == 1, timeout=10, what="the deferred refill")
    second = d.acquire("slow")  # the refill is under way: no reason to wait
    pool = d.pool("slow")
    assert pool["starting"] == 2 and pool["warm"] == 2, pool
    d.wait_warm("slow", 4)
    for r in (first, second):
        assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]


def test_systemd_notifications_ready_status_watchdog_reload_stopping(kpoold, tmp_path):
    notify = NotifySocket(str(tmp_path / "notify"))
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """, env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"})
    ready = notify.wait_for("READY=1")
    assert "MAINPID=%d" % d.proc.pid in ready[0]
    notify.wait_for("STATUS=fake: 1 warm, 0 starting, 0 leased")
    pings = notify.collect(1.0).count("WATCHDOG=1")
    assert 5 <= pings <= 15  # every 100 ms: half of WATCHDOG_USEC
    d.acquire("fake")
    notify.wait_for("STATUS=fake: 1 warm, 0 starting, 1 leased", timeout=15)
    notify.messages.clear()
    d.proc.send_signal(signal.SIGHUP)
    notify.wait_for("RELOADING=1")
    notify.wait_for("READY=1")  # after the reload (the first one was cleared)
    d.stop()
    notify.wait_for("STOPPING=1")


def test_prometheus_metrics_pass_promtool(kpoold):
    port = free_port()
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """, daemon_toml='metrics = "127.0.0.1:%d"' % port)
    d.wait_warm("fake", 1)
    d.acquire("fake", lease_s=0.3)
    assert d.rpc(op="acquire", pool="fake", timeout_ms=0)["error"]["code"] == "timeout"
    wait_until(lambda: d.pool("fake")["counters"]["leases_expired"] == 1, what="the lease to expire")
    d.wait_warm("fake", 1)
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    # Every counter status shows is a series, with the same value.
    for name, value in d.pool("fake")["counters"].items():
        assert 'kpool_%s_total{pool="fake"} %d' % (name, value) in text, (name, value, text)
    for series in ('kpool_pool_target_kernels{pool="fake"} 1', 'kpool_pool_warm_kernels{pool="fake"} 1',
                   'kpool_pool_leased_kernels{pool="fake"} 0', 'kpool_pool_starting_kernels{pool="fake"} 0',
                   'kpool_leases_expired_total{pool="fake"} 1',
                   'kpool_acquired_total{pool="fake"} 1', 'kpool_served_warm_total{pool="fake"} 1',
                   'kpool_timed_out_total{pool="fake"} 1', 'kpool_spawn_failures_total{pool="fake"} 0',
                   'kpool_acquire_duration_seconds_count{pool="fake"} 1',
                   'kpool_kernel_time_to_warm_seconds_count{pool="fake"} 2'):
        assert series in text, (series, text)
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is needed"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_metrics_port_in_use_stops_the_daemon_with_a_message(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = tmp_path / "kpool.toml"
        config.write_text('[daemon]\nruntime_dir = "%s"\nmetrics = "127.0.0.1:%d"\n[pools.p]\nsize = 0\n'
                          % (tmp_path / "run", taken.getsockname()[1]))
        out = subprocess.run([KPOOLD, "--config", str(config)], capture_output=True, text=True,
                             timeout=30)
    assert out.returncode == 1 and "cannot serve metrics at 127.0.0.1:" in out.stderr


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze (Debian's systemd package) is needed"
    with open(os.path.join(SOURCE_DIR, "systemd", "kpoold.service")) as f:
        unit = f.read()
    assert "ExecStart=/usr/bin/kpoold --config /etc/kpool/kpool.toml" in unit
    # Verified against the kpoold just built: verify checks that ExecStart exists.
    (tmp_path / "kpoold.service").write_text(unit.replace("/usr/bin/kpoold", os.path.abspath(KPOOLD)))
    out = subprocess.run([analyze, "verify", str(tmp_path / "kpoold.service")],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "kpoold.service" not in out.stderr, out.stderr
    # kpool serve's unit, beside it (it requires kpoold.service, found in the same folder).
    with open(os.path.join(SOURCE_DIR, "systemd", "kpool-serve.service")) as f:
        serve_unit = f.read()
    assert "ExecStart=/usr/bin/kpool serve --config /etc/kpool/kpool.toml" in serve_unit
    kpool_cli = os.environ.get("KPOOL_CLI") or os.path.join(os.path.dirname(KPOOLD), "kpool")
    (tmp_path / "kpool-serve.service").write_text(serve_unit.replace("/usr/bin/kpool", os.path.abspath(kpool_cli)))
    out = subprocess.run([analyze, "verify", str(tmp_path / "kpool-serve.service")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and "kpool-serve.service" not in out.stderr, out.stderr


def test_an_auto_sized_pool_grows_under_a_burst(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = "auto"
        min = 1
        max = 6
        max_starting = 6
    """)
    d.wait_warm("fake", 1)
    assert pools_by_name(d)["fake"]["auto"]["target"] == 1
    for _ in range(40):  # a burst: 40 acquires, each released at once
        r = d.acquire("fake", timeout_ms=20000)
        d.rpc(op="release", kernel_id=r["kernel_id"])
    auto = pools_by_name(d)["fake"]["auto"]
    assert auto["target"] > 1 and auto["rate_per_s"] > 1 and auto["time_to_warm_s"] > 0, auto
    assert pools_by_name(d)["fake"]["size"] == auto["target"]
    assert "pool fake auto size 1 -> " in d.log_text()
    d.wait_warm("fake", auto["target"])
