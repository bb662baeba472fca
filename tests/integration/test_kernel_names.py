"""One rule wherever a client names a kernel (issue #38): a pool of that name, else the pools
that serve that kernelspec, the one with a warm kernel first. A daemon whose pools are named
after their purpose (`py`, `plain`: both kernelspec python3, not a pool named python3), driven
by every door: an acquire, kpool exec, kpool run (the notebook's kernelspec, -k, --pool), kpool
serve's /v1 requests (body "kernel", GET ?kernel=, the notebook's kernelspec) and the gateway."""
import json
import os
import subprocess

import nbformat
import pytest
import requests
from nbformat.v4 import new_code_cell, new_notebook

from conftest import module_daemon, wait_until
from serve_fixtures import JSON, KPOOL, Serve

POOLS = """
[pools.py]
kernelspec = "python3"
size = 1
[pools.plain]
kernelspec = "python3"
size = 0
startup_code = "import os; os.environ['KPOOL_TEST_POOL'] = 'plain'"
"""

WHICH = "import os; print(os.environ.get('KPOOL_TEST_POOL', 'py'))"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "kernel-names", warm=("py", 1))


def kpool(d, *args, cwd=None):
    return subprocess.run([KPOOL, "--endpoint", d.endpoint, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def notebook(path, kernelspec="python3"):
    nbformat.write(new_notebook(cells=[new_code_cell(WHICH, metadata={"tags": ["response"]})], metadata={
        "kernelspec": {"name": kernelspec, "language": "python", "display_name": "P"}}), path)
    return str(path)


def settle(d):
    """py has its warm kernel and plain none: a kernelspec's name then means py."""
    wait_until(lambda: d.pool("py")["warm"] == 1 and d.pool("plain")["warm"] == 0, timeout=90,
               what="py warm, plain empty")


def printed(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    return "".join(nb.cells[0].outputs[0]["text"]).strip()


def test_an_acquire_names_a_pool_or_a_kernelspec(daemon):
    settle(daemon)
    r = daemon.rpc(op="acquire", pool="python3", timeout_ms=30000)
    assert r["ok"] and r["pool"] == "py", r  # the pool of that kernelspec with a warm kernel
    assert daemon.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    r = daemon.rpc(op="acquire", pool="plain", timeout_ms=60000)
    assert r["ok"] and r["pool"] == "plain", r  # by its own name, though it keeps none warm
    assert daemon.rpc(op="release", kernel_id=r["kernel_id"])["ok"]
    r = daemon.rpc(op="acquire", pool="ir", timeout_ms=1000)
    assert r["error"]["code"] == "unknown_pool"
    assert r["error"]["message"] == ("no pool named 'ir' nor one that serves kernelspec 'ir' "
                                     "(pools: plain (kernelspec python3), py (kernelspec python3))")


def test_kpool_exec_and_kpool_run_follow_the_rule(daemon, tmp_path):
    for pool, expected in (("python3", "py"), ("py", "py"), ("plain", "plain")):
        settle(daemon)
        r = kpool(daemon, "exec", "--pool", pool, WHICH)
        assert r.returncode == 0 and r.stdout.strip() == expected, (pool, r.stdout, r.stderr)
    nb = notebook(tmp_path / "in.ipynb")
    for args, expected in (((), "py"), (("-k", "py"), "py"), (("-k", "plain"), "plain"),
                           (("--pool", "python3"), "py"), (("--pool", "plain"), "plain")):
        out = str(tmp_path / "out.ipynb")
        settle(daemon)
        r = kpool(daemon, "run", nb, out, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert "(cold)" not in r.stderr, (args, r.stderr)  # a pool's kernel, not one started here
        assert printed(out) == expected, args
    r = kpool(daemon, "run", nb, str(tmp_path / "out.ipynb"), "--pool", "nope")
    assert r.returncode == 2 and "kpoold has no pool 'nope' nor one that serves kernelspec 'nope'" in r.stderr


def test_kpool_serve_and_its_gateway_follow_the_rule(daemon, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    notebook(root / "hello.ipynb")
    s = Serve(daemon.endpoint, "--root", str(root), "--kernel", "py", "--spares", "0")
    try:
        for query, expected in (("", "py"), ("?kernel=plain", "plain"), ("?kernel=python3", "py")):
            settle(daemon)
            r = s.get("/v1/run/hello.ipynb" + query)
            assert r.status_code == 200 and r.text.strip() == expected, (query, r.status_code, r.text)
        r = s.post("/v1/run/hello.ipynb", {"kernel": "plain"})
        assert r.status_code == 200 and r.text.strip() == "plain"
        for kernel, expected in (("python3", "py"), ("plain", "plain")):
            settle(daemon)
            r = s.post("/v1/exec", {"code": WHICH, "kernel": kernel})
            assert r.status_code == 200 and r.json()["outputs"][0]["text"] == [expected + "\n"], r.text
        r = s.post("/v1/exec", {"code": "1", "kernel": "ir"})
        assert r.status_code == 404 and "nor one that serves kernelspec 'ir'" in r.json()["message"]
        settle(daemon)
        started = requests.post(s.url + "/api/kernels", json={"name": "python3"}, timeout=60)
        assert started.status_code == 201, started.text
        assert requests.delete(s.url + "/api/kernels/" + started.json()["id"], timeout=30).status_code == 204
    finally:
        assert s.stop() == 0, s.log_text()
    wait_until(lambda: all(p["leased"] == 0 for p in daemon.status()["pools"]), timeout=20, what="no kernel leased")
