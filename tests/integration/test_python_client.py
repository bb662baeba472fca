"""The kpool Python package: Client, AsyncClient and install-kernelspec, against the daemon."""
import asyncio
import json
import os
import signal
import socket
import subprocess
import time

import pytest

import kpool
from conftest import FAKE_AND_HANG_POOLS as POOLS, PYTHON, wait_until



def test_sync_client(kpoold):
    d = kpoold(POOLS)
    c = kpool.Client(d.endpoint)
    assert c.ping()["protocol"] == 1
    assert {p["name"] for p in c.status()["pools"]} == {"fake", "hang"}
    assert "fake" in {s["name"] for s in c.kernelspecs()}
    k = c.acquire("fake", timeout_ms=10000, lease_s=60)
    assert isinstance(k, kpool.Kernel) and k.pool == "fake" and os.path.isfile(k.connection_file)
    info = k.connection_info()
    assert isinstance(info["key"], bytes) and len(info) == 10 and isinstance(info["shell_port"], int)
    assert c.poll(k.kernel_id) is None
    c.signal(k.kernel_id, signal.SIGKILL)
    wait_until(lambda: c.poll(k.kernel_id) == -signal.SIGKILL, what="poll to see SIGKILL")
    k2 = c.acquire("fake", timeout_ms=10000)
    c.release(k2.kernel_id)
    with pytest.raises(kpool.Error) as e:
        c.release(k2.kernel_id)
    assert e.value.code == "unknown_kernel"
    with pytest.raises(kpool.Error) as e:
        c.acquire("hang", timeout_ms=200)
    assert e.value.code == "timeout" and "hang" in e.value.message
    with pytest.raises(kpool.Error) as e:
        c.acquire("nope")
    assert e.value.code == "unknown_pool"


def test_async_client(kpoold):
    d = kpoold(POOLS)

    async def scenario():
        c = kpool.AsyncClient(d.endpoint)
        assert (await c.ping())["ok"]
        kernels = await asyncio.gather(*[c.acquire("fake", timeout_ms=20000) for _ in range(3)])
        assert len({k.kernel_id for k in kernels}) == 3
        assert await c.poll(kernels[0].kernel_id) is None
        await asyncio.gather(*[c.release(k.kernel_id) for k in kernels])
        with pytest.raises(kpool.Error) as e:
            await c.acquire("hang", timeout_ms=100)
        assert e.value.code == "timeout"

    asyncio.run(scenario())


def test_default_endpoint_and_an_absent_daemon(tmp_path, monkeypatch):
    monkeypatch.setenv("KPOOL_ENDPOINT", "ipc://%s/control" % tmp_path)
    assert kpool.default_endpoint() == "ipc://%s/control" % tmp_path
    with pytest.raises(kpool.Error) as e:
        kpool.Client().ping()
    assert e.value.code == "unreachable" and "is kpoold running?" in e.value.message
    monkeypatch.delenv("KPOOL_ENDPOINT")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert kpool.default_endpoint() == "ipc://%s/kpool/control" % tmp_path


def test_install_kernelspec(kpoold, tmp_path):
    # Without --language it asks kpoold what the pool runs; without kpoold it cannot.
    r = subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3",
                        "--prefix", str(tmp_path), "--endpoint", "ipc:///x/control"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "give --language" in r.stderr, r.stderr
    d = kpoold("[pools.python3]\nsize = 0\n")
    r = subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3",
                        "--prefix", str(tmp_path), "--endpoint", d.endpoint],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert path == str(tmp_path / "share" / "jupyter" / "kernels" / "python3-pooled")
    with open(os.path.join(path, "kernel.json")) as f:
        spec = json.load(f)
    assert spec["display_name"] == "Python 3 (ipykernel) (kpool)" and spec["language"] == "python"
    assert spec["metadata"]["kernel_provisioner"] == {
        "provisioner_name": "kpool-provisioner",
        "config": {"pool": "python3", "endpoint": d.endpoint}}
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "r", "--name", "r-warm",
                        "--language", "R", "--user"], capture_output=True, text=True,
                       env=dict(os.environ, HOME=str(home), JUPYTER_DATA_DIR=str(home / "jd")))
    assert r.returncode == 0, r.stderr
    with open(home / "jd" / "kernels" / "r-warm" / "kernel.json") as f:
        spec = json.load(f)
    assert spec["display_name"] == "r (kpool)" and spec["language"] == "R"
    assert "endpoint" not in spec["metadata"]["kernel_provisioner"]["config"]
    r = subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec"], capture_output=True, text=True)
    assert r.returncode == 2 and "--pool" in r.stderr


def test_a_dead_or_silent_daemon_is_unreachable_at_once(tmp_path):
    """A SIGKILLed daemon's socket refuses the connection: known in milliseconds. Something that
    accepts but never completes the handshake: unreachable after 1 s, not the whole timeout."""
    stale, silent = str(tmp_path / "stale"), str(tmp_path / "silent")
    s = socket.socket(socket.AF_UNIX)
    s.bind(stale)
    s.close()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(silent)
    listener.listen(8)
    try:
        cases = (("ipc://" + stale, "refused the connection", (0, 0.9)),
                 ("ipc://" + silent, "dropped before a reply", (0.9, 4)))
        for endpoint, words, (low, high) in cases:
            for ping in (lambda: kpool.Client(endpoint, timeout_ms=15000).ping(),
                         lambda: asyncio.run(kpool.AsyncClient(endpoint, timeout_ms=15000).ping())):
                start = time.monotonic()
                with pytest.raises(kpool.Error) as e:
                    ping()
                assert e.value.code == "unreachable" and words in e.value.message, e.value.message
                assert low <= time.monotonic() - start < high
    finally:
        listener.close()
