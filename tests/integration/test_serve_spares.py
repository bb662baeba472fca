"""kpool serve's spare kernels (docs/serve.md, "Spare kernels"): fresh kernels held connected,
handshake done, for the next /v1 requests. A real kpool serve in front of a real kpoold with real
ipykernels: when a spare appears, that a request runs on it (with its cwd/env) and a new one takes
its place, and that a spare that died is never handed out, whether kpool serve's poll or the
request finds it gone. Every test ends with no kernel leased (test_serve's fixture)."""
import os
import re
import signal
import time

import pytest

from conftest import module_daemon, wait_until
from test_serve import POOLS, exec_, serve_processes


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "serve-spares-daemon")


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)


def spare_metric(s):
    return int(re.search(r"^kpool_serve_spare_kernels (\d+)", s.get("/metrics").text, re.M).group(1))


def leased_ids(daemon):
    return {k["id"]: k for k in daemon.status()["kernels"] if k["state"] == "leased"}


def test_a_spare_kernel_waits_connected_and_the_next_request_takes_it(serve, daemon, tmp_path):
    s = serve()
    # None before a request ran on the pool (a gateway-only kpool serve holds none); then one
    # kernel of that pool, held by kpool serve, handshake done.
    time.sleep(1.5)  # an absence is shown by waiting: longer than the spares' 1 s check
    assert spare_metric(s) == 0 and not leased_ids(daemon)
    assert exec_(s, "1").status_code == 200
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 1, timeout=60, what="a spare")
    (spare,) = leased_ids(daemon)
    work = tmp_path / "work dir"
    work.mkdir()
    # The request's cwd/env reach the spare (kpoold's context op), and nothing else ran on it.
    r = exec_(s, "import os; print(os.getcwd(), os.environ['K'])", cwd=str(work), env={"K": "v"})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["text"] == ["%s v\n" % work] and r.json()["execution_count"] == 1
    wait_until(lambda: any("kernel=%s" % spare in line for line in s.log), what="the access log line")
    # Released after its request, as every request's kernel; another spare takes its place.
    wait_until(lambda: spare_metric(s) == 1 and spare not in leased_ids(daemon) and len(leased_ids(daemon)) == 1,
               timeout=60, what="a new spare")
    # A cwd that is not there: 400, and that kernel too goes back.
    r = exec_(s, "1", cwd="/nonexistent/dir")
    assert r.status_code == 400 and "FileNotFoundError" in r.json()["message"]


def test_a_spare_that_dies_is_replaced_and_never_handed_out(serve, daemon):
    s = serve()
    assert exec_(s, "1").status_code == 200
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 1, timeout=60, what="a spare")
    ((dead, kernel),) = leased_ids(daemon).items()
    os.kill(kernel["pid"], signal.SIGKILL)
    wait_until(lambda: spare_metric(s) == 1 and dead not in leased_ids(daemon) and len(leased_ids(daemon)) == 1,
               timeout=60, what="the dead spare replaced")
    r = exec_(s, "print(1)")
    assert r.status_code == 200 and r.json()["outputs"][0]["text"] == ["1\n"]
    assert not any("kernel=%s" % dead in line for line in s.log)
    # Killed between two of kpool serve's polls and taken at once: the request finds it gone
    # (its renew) and runs on a fresh kernel instead, as if there had been no spare.
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 1, timeout=60, what="a spare")
    ((dead, kernel),) = leased_ids(daemon).items()
    os.kill(kernel["pid"], signal.SIGKILL)
    wait_until(lambda: dead not in leased_ids(daemon), timeout=10, what="kpoold to see the spare's end")
    r = exec_(s, "print(2)")
    assert r.status_code == 200 and r.json()["outputs"][0]["text"] == ["2\n"], r.text
    assert not any("kernel=%s" % dead in line for line in s.log)
