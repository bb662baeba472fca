"""The control socket as a client sees it: every op, framing mistakes and bad input, each
answered with exactly one clear reply, the daemon still answering ping afterwards."""
import json
import os
import stat
import subprocess

import zmq

from conftest import KPOOLD, wait_until

FAKE_POOL = """
[pools.fake]
kernelspec = "fake"
size = 1
"""


def dealer(d):
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.linger = 0
    s.connect(d.endpoint)
    return s


def recv_all(sock, timeout_ms=3000):
    """Every message that arrives within the timeout (to prove there is exactly one reply)."""
    out = []
    while sock.poll(timeout_ms if not out else 200):
        out.append(sock.recv_multipart())
    return out


def test_ping_status_kernelspecs(kpoold):
    d = kpoold(FAKE_POOL)
    ping = d.rpc(op="ping", req_id="p1")
    assert ping == {"ok": True, "protocol": 1, "version": ping["version"], "req_id": "p1"}
    d.wait_warm("fake", 1)
    st = d.status()
    assert st["pid"] == d.proc.pid and st["protocol"] == 1 and st["uptime_s"] >= 0
    (pool,) = st["pools"]
    for key in ("name", "kernelspec", "size", "warm", "starting", "leased", "counters", "last_error"):
        assert key in pool
    assert set(pool["counters"]) >= {"acquired", "served_warm", "waited", "timed_out",
                                     "spawn_failures", "died_warm"}
    (kernel,) = st["kernels"]
    assert set(kernel) >= {"id", "pool", "pid", "state", "age_s"} and kernel["state"] == "warm"
    specs = {s["name"]: s for s in d.rpc(op="kernelspecs")["kernelspecs"]}
    assert specs["fake"]["display_name"] == "Fake fake" and specs["fake"]["language"] == "fake"
    assert "python3" in specs


def test_control_socket_is_private(kpoold):
    d = kpoold(FAKE_POOL)
    assert stat.S_IMODE(os.stat(d.runtime_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(d.runtime_dir, "control")).st_mode) & 0o077 == 0


def test_request_errors_by_code(kpoold):
    d = kpoold(FAKE_POOL)
    cases = [
        ({"op": "fly"}, "unknown_op"),
        ({"op": "acquire", "pool": "nope"}, "unknown_pool"),
        ({"op": "release", "kernel_id": "nope"}, "unknown_kernel"),
        ({"op": "acquire"}, "bad_request"),
        ({"op": "acquire", "pool": "fake", "timeout_ms": "soon"}, "bad_request"),
        ({"op": "ping", "extra": 1}, "bad_request"),
        ({"op": "acquire", "pool": "fake", "timeout_ms": 10 ** 30}, "bad_request"),
        ({"op": "acquire", "pool": "fake", "lease_s": -1}, "bad_request"),
        ({"op": "acquire", "pool": "fake", "env": {"A": 1}}, "bad_request"),
        ({"op": "acquire", "pool": "fake", "cwd": "relative"}, "bad_request"),
        ({"op": "signal", "kernel_id": "k", "signum": 10 ** 12}, "bad_request"),
        ({"op": "release", "kernel_id": ["k"]}, "bad_request"),
        ({"op": "acquire", "pool": "p" * 20000}, "unknown_pool"),
        ({"op": 5}, "bad_request"),
    ]
    for request, code in cases:
        reply = d.rpc(req_id=7, **request)
        assert reply["ok"] is False and reply["error"]["code"] == code, (request, reply)
        assert reply["req_id"] == 7 and reply["error"]["message"]
        assert len(reply["error"]["message"]) < 400  # user input echoed at most ~128 bytes


def test_bad_frames_and_bytes_each_get_one_reply(kpoold):
    d = kpoold(FAKE_POOL)
    s = dealer(d)
    cases = [
        ([b"", b""], "empty request"),
        ([b"", b"not json"], "not valid JSON"),
        ([b"", b"[1,2,3]"], "must be a JSON object"),
        ([b"", b'{"op":"ping","x":"\xff\xfe"}'], "not valid JSON"),
        ([b"", b"{" * 1000], "nests deeper"),
        ([b"", b'{"op":"ping"}', b"extra"], "expected one request frame"),
        ([b""], "no frame after the delimiter"),
        ([b'{"op":"ping"}'], "missing the empty delimiter"),
        ([b"", b'{"op":"' + b"a" * 100000 + b'"}'], "larger than 65536 bytes"),
    ]
    for frames, text in cases:
        s.send_multipart(frames)
        replies = recv_all(s)
        assert len(replies) == 1, (frames[:2], replies)
        body = json.loads(replies[0][-1])
        assert body["ok"] is False and body["error"]["code"] == "bad_request"
        assert text in body["error"]["message"], (text, body)
        assert len(body["error"]["message"]) < 400
    assert d.rpc(op="ping")["ok"]


def test_an_oversized_message_is_dropped_and_the_daemon_lives_on(kpoold):
    d = kpoold(FAKE_POOL)
    s = dealer(d)
    s.send_multipart([b"", b"x" * (2 * 1024 * 1024)])
    assert recv_all(s, 500) == []  # libzmq drops the peer (ZMQ_MAXMSGSIZE): nobody to answer
    assert d.rpc(op="ping")["ok"]


def test_a_burst_of_requests_gets_one_reply_each_in_order(kpoold):
    d = kpoold(FAKE_POOL)
    s = dealer(d)
    n = 2000
    for i in range(n):
        s.send_multipart([b"", json.dumps({"op": "ping", "req_id": i}).encode()])
    got = []
    while len(got) < n and s.poll(5000):
        got.append(json.loads(s.recv_multipart()[-1])["req_id"])
    assert got == list(range(n))


def test_ten_thousand_pipelined_requests_are_all_answered_in_order(kpoold):
    # Issue #14: once the client's pipe was full, replies used to be dropped with a warning.
    d = kpoold(FAKE_POOL)
    s = dealer(d)
    s.sndhwm = 0  # the client may queue as much as it likes
    n = 10000
    for i in range(n):
        s.send_multipart([b"", json.dumps({"op": "ping", "req_id": i}).encode()])
    # While that client does not read, others are served.
    assert d.rpc(op="ping", timeout=5000)["ok"]
    got = []
    while len(got) < n and s.poll(10000):
        got.append(json.loads(s.recv_multipart()[-1])["req_id"])
    assert got == list(range(n))
    assert not s.poll(300)  # and nothing more
    assert "reply not delivered" not in d.log_text()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_client_that_never_reads_cannot_grow_the_daemon_past_the_bound(kpoold):
    d = kpoold(FAKE_POOL)
    before = rss_kib(d.proc.pid)
    s = dealer(d)
    s.sndhwm = 0
    n = 110000  # more replies than a client may have waiting (100,000)
    for i in range(n):
        s.send_multipart([b"", b'{"op":"ping"}'])
    wait_until(lambda: "a client is not reading its replies" in d.log_text(), timeout=120,
               what="the queue to be dropped")
    assert d.rpc(op="ping", timeout=5000)["ok"]
    if os.environ.get("KPOOL_SANITIZED") != "1":  # ASan's quarantine keeps freed memory
        assert rss_kib(d.proc.pid) < before + 64 * 1024, (before, rss_kib(d.proc.pid))
    s.close()


def test_requests_during_shutdown_get_shutting_down(kpoold):
    d = kpoold("""
        [pools.deaf]
        kernelspec = "fake-deaf"
        size = 1
        shutdown_grace_s = 1.5
    """)
    d.wait_warm("deaf", 1)
    d.status()
    d.proc.terminate()  # the deaf kernel keeps the daemon in shutdown for a few seconds
    import time
    time.sleep(0.3)
    reply = d.rpc(op="acquire", pool="deaf", timeout=3000)
    assert reply["error"]["code"] == "shutting_down"
    assert d.rpc(op="status", timeout=3000)["shutting_down"] is True
    assert d.proc.wait(10) == 0


def test_check_config(tmp_path):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "config", "kpool.example.toml")
    r = subprocess.run([KPOOLD, "--check-config", example], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    good = tmp_path / "good.toml"
    good.write_text('[pools.python3]\nsize = 1\n')
    r = subprocess.run([KPOOLD, "--check-config", str(good)], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[pools.python3]\nsize = 1\nszie = 2\n')
    r = subprocess.run([KPOOLD, "--check-config", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == "%s:3:1: unknown key 'szie' in [pools.python3]" % bad
    r = subprocess.run([KPOOLD, "--config", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and ":3:1:" in r.stderr


def test_the_embedded_default_config_serves_python3(kpoold, tmp_path):
    """What the README's first command runs: kpoold with no arguments."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    d = kpoold("", env={"XDG_RUNTIME_DIR": str(xdg)}, args=[], runtime_dir=str(xdg / "kpool"))
    d.wait_warm("python3", 2, timeout=60)
    pool = d.pool("python3")
    assert pool["size"] == 2 and pool["kernelspec"] == "python3"


def test_a_second_daemon_on_the_same_endpoint_refuses_to_start(kpoold):
    d = kpoold(FAKE_POOL)
    r = subprocess.run([KPOOLD, "--config", d.config_path], capture_output=True, text=True,
                       timeout=30, env=d.env)
    assert r.returncode == 1
    assert "another kpoold (pid %d) holds %s/control.lock" % (d.proc.pid, d.runtime_dir) in r.stderr
    assert d.rpc(op="ping")["ok"]  # the first one still owns its socket
    assert os.path.exists(os.path.join(d.runtime_dir, "control"))
