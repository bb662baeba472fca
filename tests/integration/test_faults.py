"""kpoold's behaviour when kernels misbehave, with the fake kernel doing the misbehaving."""
import os
import signal
import time

import zmq

from conftest import alive, wait_until


def test_a_kernel_that_never_answers_is_killed_after_the_ready_timeout(kpoold):
    d = kpoold("""
        [pools.hang]
        kernelspec = "fake-hang"
        size = 1
        ready_timeout_s = 0.5
        shutdown_grace_s = 0.2
    """)
    wait_until(lambda: d.pool("hang")["counters"]["spawn_failures"] >= 1, what="a spawn failure")
    pool = d.pool("hang")
    assert "no kernel_info_reply within 0.5 s" in pool["last_error"]
    assert pool["consecutive_failures"] >= 1
    assert pool["warm"] == 0
    assert "kernel failed to start" in d.log_text()


def test_an_acquire_that_cannot_be_served_times_out(kpoold):
    d = kpoold("""
        [pools.hang]
        kernelspec = "fake-hang"
        size = 1
    """)
    start = time.monotonic()
    r = d.rpc(op="acquire", pool="hang", timeout_ms=300, req_id="t")
    assert r["ok"] is False and r["error"]["code"] == "timeout" and r["req_id"] == "t"
    assert 0.25 < time.monotonic() - start < 3
    assert d.rpc(op="acquire", pool="hang", timeout_ms=0)["error"]["code"] == "timeout"
    assert d.pool("hang")["counters"]["timed_out"] == 2


def test_a_kernel_that_crashes_at_start_is_counted_with_its_output_and_backed_off(kpoold):
    d = kpoold("""
        [pools.crash]
        kernelspec = "fake-crash"
        size = 1
    """)
    wait_until(lambda: d.pool("crash")["counters"]["spawn_failures"] >= 2, what="two failures")
    pool = d.pool("crash")
    assert "exit code 3" in pool["last_error"]
    assert "crashing on purpose" in pool["last_error"]
    time.sleep(1.0)
    # Backoff: 0.5 s, 1 s, 2 s... so only a handful of attempts, not a fork storm.
    assert d.pool("crash")["counters"]["spawn_failures"] <= 4


def test_a_missing_kernel_binary_or_kernelspec_is_a_spawn_failure_not_a_crash(kpoold):
    d = kpoold("""
        [pools.nobin]
        kernelspec = "no-such-binary"
        size = 1
        [pools.nospec]
        kernelspec = "does-not-exist"
        size = 1
    """)
    wait_until(lambda: d.pool("nobin")["counters"]["spawn_failures"] >= 1, what="failure")
    wait_until(lambda: d.pool("nospec")["counters"]["spawn_failures"] >= 1, what="failure")
    assert "no such file or directory" in d.pool("nobin")["last_error"]
    assert "kernelspec 'does-not-exist': not found" in d.pool("nospec")["last_error"]
    assert d.rpc(op="ping")["ok"]


def test_a_kernel_that_ignores_shutdown_and_sigterm_is_sigkilled(kpoold):
    d = kpoold("""
        [pools.deaf]
        kernelspec = "fake-deaf"
        size = 1
        shutdown_grace_s = 0.3
    """)
    d.wait_warm("deaf", 1)
    r = d.acquire("deaf")
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    wait_until(lambda: not alive(r["pid"]), timeout=5, what="SIGKILL")
    assert "ignored SIGTERM; sending SIGKILL" in d.log_text()


def test_a_warm_fake_kernel_killed_is_replaced(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 2
    """)
    d.wait_warm("fake", 2)
    victim = d.status()["kernels"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_until(lambda: d.pool("fake")["counters"]["died_warm"] == 1, what="the death")
    d.wait_warm("fake", 2)
    ids = {k["id"] for k in d.status()["kernels"]}
    assert victim["id"] not in ids


def test_waiters_are_served_first_come_first_served(kpoold):
    d = kpoold("""
        [pools.slow]
        kernelspec = "fake-slow"
        size = 0
        max_starting = 4
    """)
    ctx = zmq.Context.instance()
    socks = []
    for i in range(3):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.connect(d.endpoint)
        s.send_multipart([b"", b'{"op":"acquire","pool":"slow","timeout_ms":20000,"req_id":%d}' % i])
        socks.append(s)
        time.sleep(0.02)
    import json
    replies = []
    for s in socks:
        assert s.poll(20000), "no reply"
        empty, body = s.recv_multipart()
        replies.append(json.loads(body))
        s.close()
    assert [r["req_id"] for r in replies] == [0, 1, 2]
    assert all(r["ok"] for r in replies)
    assert len({r["kernel_id"] for r in replies}) == 3
    assert d.pool("slow")["counters"]["waited"] == 3


def test_a_client_gone_before_its_reply_does_not_take_the_kernel(kpoold):
    d = kpoold("""
        [pools.slow]
        kernelspec = "fake-slow"
        size = 0
    """)
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    s.connect(d.endpoint)
    s.send_multipart([b"", b'{"op":"acquire","pool":"slow","timeout_ms":20000}'])
    time.sleep(0.1)
    s.close()  # gone before the kernel is warm
    wait_until(lambda: d.pool("slow")["warm"] == 1, what="the kernel to go back to warm")
    pool = d.pool("slow")
    assert pool["leased"] == 0 and pool["counters"]["acquired"] == 0
    assert "not delivered" in d.log_text()


def test_an_expired_lease_shuts_the_kernel_down(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """)
    d.wait_warm("fake", 1)
    r = d.acquire("fake", lease_s=0.3)
    wait_until(lambda: not alive(r["pid"]), timeout=5, what="the lease to expire")
    assert d.pool("fake")["counters"]["leases_expired"] == 1


def test_max_kernels_gives_capacity_errors_and_recovers(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
    """, daemon_toml="max_kernels = 1")
    d.wait_warm("fake", 1)
    r = d.acquire("fake")
    full = d.rpc(op="acquire", pool="fake", timeout_ms=1000)
    assert full["error"]["code"] == "capacity"
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    assert d.acquire("fake", timeout_ms=10000)["ok"]


def test_ipc_transport(kpoold):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 1
        transport = "ipc"
    """)
    d.wait_warm("fake", 1)
    r = d.acquire("fake")
    conn = r["connection"]
    assert conn["transport"] == "ipc"
    # The run directory here is too long for every kernel's endpoints (ipc_socket_dirs.hpp):
    # the sockets live in a short private directory instead, and the log says where.
    assert len("ipc://%s-5" % conn["ip"]) <= 31
    socket_dir = os.path.dirname(conn["ip"])
    assert "ipc sockets go to %s" % socket_dir in d.log_text()
    st = os.stat(socket_dir)
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid()
    assert os.path.exists("%s-%d" % (conn["ip"], conn["shell_port"]))
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    wait_until(lambda: not os.path.exists("%s-%d" % (conn["ip"], conn["shell_port"])),
               what="ipc sockets removed")
