"""kpool serve's spare kernels (docs/serve.md, "Spare kernels"): fresh kernels held connected,
handshake done, for the next /v1 requests and the Kernel Gateway API's starts and restarts. A
real kpool serve in front of a real kpoold with real ipykernels: when a spare appears, that a
request runs on it (with its cwd/env) and a new one takes its place, and that a spare that died
is never handed out, whether kpool serve's poll or the request finds it gone. Every test ends
with no kernel leased (serve_fixtures.py's fixture)."""
import os
import re
import signal
import time

import pytest

from conftest import module_daemon, wait_until
from test_gateway import KernelSocket, start_kernel, stdout_of
from serve_fixtures import POOLS, exec_, serve_processes

import requests


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


def behind(s, kid):
    """kpoold's id of the kernel behind gateway kernel `kid` now (kpool serve's log)."""
    found = None
    for line in list(s.log):
        m = re.search(r"kernel %s (?:started \((\S+) from kpoold|restarted on (\S+) )" % kid, line)
        if m:
            found = m.group(1) or m.group(2)
    return found


def test_gateway_starts_and_restarts_take_spares(serve, daemon, tmp_path):
    s = serve()
    time.sleep(1.5)  # none before the pool is used (longer than the spares' 1 s check)
    assert spare_metric(s) == 0 and not leased_ids(daemon)
    first = start_kernel(s)["id"]
    wait_until(lambda: behind(s, first), what="the start's log line")
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 2, timeout=60, what="a spare")
    (spare,) = set(leased_ids(daemon)) - {behind(s, first)}
    # The next start is the spare, with KERNEL_WORKING_DIR its cwd and KERNEL_* its environment
    # (kpoold's context op), and nothing run on it before.
    work = tmp_path / "work dir"
    work.mkdir()
    second = start_kernel(s, name="python3", env={"KERNEL_WORKING_DIR": str(work), "KERNEL_X": "v", "OTHER": "no"})["id"]
    wait_until(lambda: behind(s, second), what="the start's log line")
    assert behind(s, second) == spare
    ks = KernelSocket(s, second)
    iopub, reply = ks.execute("import os; print(os.getcwd(), os.environ['KERNEL_X'], os.environ.get('OTHER'))")
    assert stdout_of(iopub) == "%s v None\n" % work and reply["execution_count"] == 1
    # A restart takes the next spare, under the same id; the old kernel goes back.
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 3, timeout=60, what="a new spare")
    (spare,) = set(leased_ids(daemon)) - {behind(s, first), behind(s, second)}
    r = requests.post(s.url + "/api/kernels/%s/restart" % second, json={}, timeout=60)
    assert r.status_code == 200 and r.json()["id"] == second
    wait_until(lambda: behind(s, second) == spare, what="the restart's log line")
    iopub, reply = ks.execute("import os; print(os.getcwd(), os.environ['KERNEL_X'])")
    assert stdout_of(iopub) == "%s v\n" % work and reply["execution_count"] == 1  # the same cwd/env
    ks.close()
    for kid in (first, second):
        assert requests.delete(s.url + "/api/kernels/" + kid, timeout=30).status_code == 204


def test_a_dead_spare_is_never_a_gateway_kernel(serve, daemon):
    s = serve()
    first = start_kernel(s)["id"]
    wait_until(lambda: spare_metric(s) == 1 and len(leased_ids(daemon)) == 2, timeout=60, what="a spare")
    wait_until(lambda: behind(s, first), what="the start's log line")
    (dead,) = set(leased_ids(daemon)) - {behind(s, first)}
    os.kill(leased_ids(daemon)[dead]["pid"], signal.SIGKILL)
    wait_until(lambda: dead not in leased_ids(daemon), timeout=10, what="kpoold to see the spare's end")
    # Taken before kpool serve's own poll saw it gone: the renew finds it, a fresh kernel instead.
    second = start_kernel(s)["id"]
    wait_until(lambda: behind(s, second), what="the start's log line")
    assert behind(s, second) != dead
    # Whichever found it gone first: the start's renew (a fresh one instead) or the poll.
    assert any(re.search("spare kernel %s is gone: (a fresh one instead|replaced)" % dead, line) for line in s.log)
    ks = KernelSocket(s, second)
    assert ks.execute("print(7)")[1]["status"] == "ok"
    ks.close()
    for kid in (first, second):
        assert requests.delete(s.url + "/api/kernels/" + kid, timeout=30).status_code == 204
