"""Many kpoolds side by side (issue #15): three daemons on 127.0.0.2, 127.0.0.3 and 127.0.0.4, each
binding its kernels to its own address and advertising it, tcp control with CURVE (one server
key pair for the set, as a Kubernetes Secret would hold). Clients given all three spread their
acquires, fail over when a daemon dies or is full, release to the owner, and `kpool status`
shows one table for all."""
import json
import os
import signal
import subprocess
import time

import pytest
from jupyter_client.manager import KernelManager

from conftest import PYTHON, wait_until
from test_cli import KPOOL
from test_security import free_port, keygen

ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.fixture
def daemon_set(kpoold, tmp_path):
    """Starts one kpoold per address with `pools_toml` (with {ip} filled in); returns the
    daemons, the endpoint list and the client's CURVE settings."""
    server_file, server_public, _ = keygen(tmp_path, "server.key")
    client_file, client_public, client_secret = keygen(tmp_path, "client.key")

    def start(pools_toml, daemon_extra=lambda i: ""):
        daemons = []
        for i, ip in enumerate(ADDRESSES):
            control = "tcp://%s:%d" % (ip, free_port())
            d = kpoold(pools_toml.replace("{ip}", ip),
                       daemon_toml='curve_secret_key_file = "%s"\ncurve_allowed_keys = ["%s"]\n'
                                   'advertise_host = "%s"\n%s' % (server_file, client_public, ip,
                                                                  daemon_extra(i)),
                       control=control,
                       curve=(server_public.encode(), client_public.encode(), client_secret.encode()))
            daemons.append(d)
        endpoints = ",".join(d.endpoint for d in daemons)
        env = dict(os.environ, KPOOL_ENDPOINT=endpoints, KPOOL_SERVER_KEY=server_public,
                   KPOOL_CLIENT_KEY_FILE=client_file)
        return daemons, endpoints, env

    return start


def client(env, **kw):
    import kpool
    return kpool.Client(env["KPOOL_ENDPOINT"], server_key=env["KPOOL_SERVER_KEY"],
                        client_key_file=env["KPOOL_CLIENT_KEY_FILE"], **kw)


FAKE = """
[pools.fake]
kernelspec = "fake"
ip = "{ip}"
size = %d
max_starting = 8
"""


def test_acquires_spread_over_the_set_and_release_reaches_the_owner(daemon_set):
    daemons, endpoints, env = daemon_set(FAKE % 25)
    for d in daemons:
        d.wait_warm("fake", 25)
    c = client(env)
    kernels = [c.acquire("fake", timeout_ms=10000) for _ in range(60)]
    by_daemon = {d.endpoint: sum(1 for k in kernels if k.endpoint == d.endpoint) for d in daemons}
    assert sum(by_daemon.values()) == 60 and max(by_daemon.values()) <= 30, by_daemon
    for k in kernels:
        ip = k.endpoint.split("//")[1].split(":")[0]
        assert k.connection["ip"] == ip  # bound to, and advertised as, its daemon's address
    # Each daemon counts as leased exactly what it handed out.
    for d in daemons:
        assert d.pool("fake")["leased"] == by_daemon[d.endpoint]
    # Release through a fresh client, which does not know the owners: each release still
    # reaches the daemon that holds the kernel (and nothing else).
    fresh = client(env)
    for k in kernels[:30]:
        fresh.release(k.kernel_id)
    for k in kernels[30:]:
        c.release(k.kernel_id)
    for d in daemons:
        wait_until(lambda: d.pool("fake")["leased"] == 0, what="every kernel released")
    with pytest.raises(Exception) as e:
        fresh.release(kernels[0].kernel_id)
    assert e.value.code == "unknown_kernel"


def test_a_daemon_killed_mid_run_costs_no_acquire(daemon_set):
    daemons, endpoints, env = daemon_set(FAKE % 12)
    for d in daemons:
        d.wait_warm("fake", 12)
    c = client(env, view_ttl_ms=100)
    got = [c.acquire("fake", timeout_ms=10000) for _ in range(6)]
    victim = daemons[1]
    victim.proc.kill()
    victim.proc.wait()
    victim.expected_exit = -signal.SIGKILL
    started = time.monotonic()
    for _ in range(24):
        k = c.acquire("fake", timeout_ms=10000)  # no error surfaces
        assert k.endpoint != victim.endpoint
        got.append(k)
        c.release(k.kernel_id)
    assert time.monotonic() - started < 10
    for k in got[:6]:
        if k.endpoint != victim.endpoint:
            c.release(k.kernel_id)


def test_a_daemon_at_max_kernels_is_skipped(daemon_set):
    daemons, endpoints, env = daemon_set(
        FAKE % 2, daemon_extra=lambda i: "max_kernels = 2\n" if i == 0 else "")
    for d in daemons:
        d.wait_warm("fake", 2)
    full = daemons[0]
    import kpool
    only_full = kpool.Client(full.endpoint, server_key=env["KPOOL_SERVER_KEY"],
                             client_key_file=env["KPOOL_CLIENT_KEY_FILE"])
    held = [only_full.acquire("fake") for _ in range(2)]
    c = client(env)
    # The full daemon answers capacity (its 2 kernels are leased, none may start): the client
    # goes on to the others, every time.
    for _ in range(8):
        k = c.acquire("fake", timeout_ms=5000)
        assert k.endpoint != full.endpoint
        c.release(k.kernel_id)
    for k in held:
        only_full.release(k.kernel_id)


def test_kpool_status_ping_and_acquire_over_the_set(daemon_set):
    daemons, endpoints, env = daemon_set(FAKE % 1)
    for d in daemons:
        d.wait_warm("fake", 1)
    out = subprocess.run([KPOOL, "status"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("127.0.0.2 (tcp://127.0.0.2:")
    header = next(l for l in lines if l.startswith("HOST") and "POOL" in l)
    pool_rows = [l for l in lines if l.split()[:2] in ([ip, "fake"] for ip in ADDRESSES)]
    assert header.split()[:2] == ["HOST", "POOL"] and len(pool_rows) == 3
    ping = subprocess.run([KPOOL, "ping"], env=env, capture_output=True, text=True)
    assert ping.returncode == 0 and len(ping.stdout.splitlines()) == 3
    acquired = subprocess.run([KPOOL, "acquire", "fake", "--json"], env=env, capture_output=True,
                              text=True)
    assert acquired.returncode == 0, acquired.stderr
    reply = json.loads(acquired.stdout)
    assert reply["endpoint"] in endpoints.split(",")
    # A separate process releases it: the CLI finds the owner.
    released = subprocess.run([KPOOL, "release", reply["kernel_id"]], env=env, capture_output=True,
                              text=True)
    assert released.returncode == 0, released.stderr
    # One daemon gone: status still prints the others, says which one is unreachable, exits 3.
    daemons[2].proc.kill()
    daemons[2].proc.wait()
    daemons[2].expected_exit = -signal.SIGKILL
    out = subprocess.run([KPOOL, "status"], env=env, capture_output=True, text=True)
    assert out.returncode == 3
    assert "%s: unreachable" % daemons[2].endpoint in out.stdout
    assert sum(1 for l in out.stdout.splitlines() if " fake " in " %s " % l) >= 2


PYTHON_POOL = """
[pools.python3]
kernelspec = "python3"
ip = "{ip}"
size = 1
"""


def test_the_provisioner_and_kpool_exec_with_a_list_of_endpoints(daemon_set, tmp_path):
    daemons, endpoints, env = daemon_set(PYTHON_POOL)
    for d in daemons:
        d.wait_warm("python3", 1, timeout=60)
    # kpool exec over the set: a warm kernel from one of the daemons, released afterwards.
    out = subprocess.run([KPOOL, "exec", "--pool", "python3", "print(6 * 7)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "42\n"), out.stderr
    for d in daemons:
        wait_until(lambda: d.pool("python3")["leased"] == 0, timeout=20, what="exec's release")
    prefix = str(tmp_path / "prefix")
    subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3", "--prefix",
                    prefix, "--endpoint", endpoints, "--language", "python"], check=True, env=env)
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "KPOOL_SERVER_KEY", "KPOOL_CLIENT_KEY_FILE")}
    os.environ.update(JUPYTER_PATH=os.path.join(prefix, "share", "jupyter"),
                      KPOOL_SERVER_KEY=env["KPOOL_SERVER_KEY"],
                      KPOOL_CLIENT_KEY_FILE=env["KPOOL_CLIENT_KEY_FILE"])
    try:
        km = KernelManager(kernel_name="python3-pooled")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=30)
        ip = km.provisioner.kernel_endpoint.split("//")[1].split(":")[0]
        assert km.ip == ip  # the owner's advertised address
        out = []
        kc.execute_interactive("import os; print(os.getpid())", timeout=30,
                               output_hook=lambda m: out.append(m["content"].get("text", ""))
                               if m["msg_type"] == "stream" else None)
        pid = int("".join(out))
        owner = next(d for d in daemons if d.endpoint == km.provisioner.kernel_endpoint)
        assert any(k["pid"] == pid and k["state"] == "leased" for k in owner.status()["kernels"])
        kc.stop_channels()
        km.shutdown_kernel()
        wait_until(lambda: owner.pool("python3")["leased"] == 0, timeout=20, what="the release")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_kpool_serve_fails_over_at_once_from_a_daemon_that_died(daemon_set):
    """kpool serve in front of three daemons, one SIGKILLed: its control connection drops, and
    kpool serve asks another daemon at once. Before it heard the drop, an acquire sent to the
    dead daemon waited out the queue timeout and the control margin (10 s) and then answered
    503."""
    from serve_fixtures import Serve
    daemons, endpoints, env = daemon_set(PYTHON_POOL)
    for d in daemons:
        d.wait_warm("python3", 1, timeout=60)
    s = Serve(endpoints, "--spares", "0", env={k: env[k] for k in ("KPOOL_SERVER_KEY", "KPOOL_CLIENT_KEY_FILE")})
    try:
        for _ in range(3):
            assert s.post("/v1/exec", {"code": "1"}).status_code == 200
        victim = daemons[1]
        victim.expected_exit = -signal.SIGKILL
        victim.proc.kill()
        victim.proc.wait()
        took = []
        for _ in range(12):
            started = time.monotonic()
            r = s.post("/v1/exec", {"code": "1"})
            took.append(time.monotonic() - started)
            assert r.status_code == 200, r.text
        assert max(took) < 3, took
    finally:
        assert s.stop() == 0, s.log_text()


def test_kpool_serve_follows_a_dns_name_as_daemons_come_and_go(kpoold, tmp_path):
    """kpool serve in front of `dns:NAME:PORT` resolves NAME again every --resolve-every: a
    daemon the name starts to resolve to gets requests, one it no longer resolves to gets none.
    What NAME resolves to comes from fake_dns.c, preloaded into kpool serve."""
    from serve_fixtures import Serve
    shim = str(tmp_path / "fake_dns.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", shim, os.path.join(os.path.dirname(__file__), "fake_dns.c"),
                    "-ldl"], check=True)
    server_file, server_public, _ = keygen(tmp_path, "server.key")
    client_file, client_public, client_secret = keygen(tmp_path, "client.key")
    port = free_port()  # one port on every address, as a Service's endpoints have
    for ip in ADDRESSES[:2]:
        d = kpoold(FAKE.replace("{ip}", ip) % 1,
                   daemon_toml='curve_secret_key_file = "%s"\ncurve_allowed_keys = ["%s"]\nadvertise_host = "%s"\n'
                               % (server_file, client_public, ip),
                   control="tcp://%s:%d" % (ip, port),
                   curve=(server_public.encode(), client_public.encode(), client_secret.encode()))
        d.wait_warm("fake", 1)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.2\n")
    s = Serve("dns:kpool.test:%d" % port, "--resolve-every", "0.2",
              env={"LD_PRELOAD": shim, "FAKE_DNS_NAME": "kpool.test", "FAKE_DNS_FILE": str(hosts),
                   "KPOOL_SERVER_KEY": server_public, "KPOOL_CLIENT_KEY_FILE": client_file,
                   # an ASan build wants its runtime first; the shim only wraps getaddrinfo
                   "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"})
    try:
        def daemons_answering(n=6):
            return {s.get("/v1/health").json()["daemon"] for _ in range(n)}

        first, second = "tcp://127.0.0.2:%d" % port, "tcp://127.0.0.3:%d" % port
        assert daemons_answering() == {first}
        hosts.write_text("127.0.0.2\n127.0.0.3\n")
        wait_until(lambda: any("kpoold %s joined" % second in line for line in s.log), what="the new daemon")
        assert daemons_answering() == {first, second}
        hosts.write_text("127.0.0.3\n")
        wait_until(lambda: any("kpoold %s left" % first in line for line in s.log), what="the daemon leaving")
        assert daemons_answering() == {second}
        # A name that resolves to nothing for a while changes nothing.
        hosts.write_text("")
        wait_until(lambda: any("cannot re-resolve the kpoold endpoints" in line for line in s.log),
                   what="a failed resolution")
        assert daemons_answering() == {second}
        # The one that left comes back.
        hosts.write_text("127.0.0.2\n127.0.0.3\n")
        wait_until(lambda: any("kpoold %s joined" % first in line for line in s.log), what="the daemon back")
        assert daemons_answering() == {first, second}
    finally:
        assert s.stop() == 0, s.log_text()
