"""nbclient's own test suite (the installed version's, Debian's python3-nbclient ships it) on
pooled kernels, beside the same suite on plain ones: the kpool provisioner must give every test
at least the result a launched kernel gives (issue #53 item 8: the caller's environment, nbclient's
in-memory history, and no kernel left leased after the suite's clients are gone).

The pooled run installs a pooled kernelspec named python3 first in JUPYTER_PATH: nbclient's tests
ask for `python` or `python3`, which jupyter_client resolves to python3. It runs in the plain
build only: what it adds to the sanitized build's coverage (acquire with env and history, renew,
release) the ecosystem and client suites already drive there, and the suite is two minutes of
mostly kernel starts."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import PYTHON, wait_until

NBCLIENT_TESTS = "/usr/lib/python3/dist-packages/nbclient/tests"
HELD_LEASE_S = 5  # short, so that kernels a test's client never shut down come back soon

pytestmark = [
    pytest.mark.skipif(not os.path.isdir(NBCLIENT_TESTS), reason="python3-nbclient's tests are not installed"),
    pytest.mark.skipif(os.environ.get("KPOOL_SANITIZED") == "1",
                       reason="the plain build runs it (see the module's docstring)"),
]


def run_suite(tmp_path, name, jupyter_path):
    """Runs nbclient's suite; returns {test id: outcome} from its JUnit report."""
    report = tmp_path / (name + ".xml")
    work = tmp_path / name
    work.mkdir()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", JUPYTER_RUNTIME_DIR=str(work / "runtime"))
    env.pop("JUPYTER_PATH", None)
    if jupyter_path:
        env["JUPYTER_PATH"] = jupyter_path
    r = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(report),
                        NBCLIENT_TESTS], cwd=str(work), env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test = case.get("classname") + "::" + case.get("name")
        kinds = {child.tag for child in case}
        outcomes[test] = ("failed" if kinds & {"failure", "error"} else
                          "skipped" if "skipped" in kinds else "passed")
    return outcomes, r.stdout


def test_nbclients_own_suite_gives_pooled_kernels_the_results_of_plain_ones(kpoold, tmp_path):
    d = kpoold('[pools.python3]\nkernelspec = "python3"\nlauncher = "fork"\nsize = 4\n')
    prefix = tmp_path / "prefix"
    subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3", "--name", "python3",
                    "--prefix", str(prefix), "--endpoint", d.endpoint], check=True, capture_output=True)
    spec_file = prefix / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["metadata"]["kernel_provisioner"]["config"]["held_lease_s"] = HELD_LEASE_S
    spec_file.write_text(json.dumps(spec))
    d.wait_warm("python3", 4, timeout=60)

    plain, _ = run_suite(tmp_path, "plain", None)
    pooled, output = run_suite(tmp_path, "pooled", str(prefix / "share" / "jupyter"))
    assert d.pool("python3")["counters"]["acquired"] >= 50, output[-2000:]  # it did run on the pool
    assert len(plain) >= 80 and sum(o == "passed" for o in plain.values()) >= 80, plain
    # The same tests, and every one that passes on plain kernels passes on pooled ones. A plain
    # kernel's own failure (nbclient's parallel tests race for tcp ports under load: seen once
    # in three runs here) is not the provisioner's, so a test that fails plain may pass pooled.
    assert set(pooled) == set(plain)
    worse = {t: (plain[t], pooled[t]) for t in plain if plain[t] != pooled[t] and plain[t] != "failed"}
    assert not worse, "plain vs pooled:\n%s\n%s" % (json.dumps(worse, indent=1), output[-4000:])
    # The suite's clients are gone: whatever they did not shut down comes back within the lease.
    wait_until(lambda: d.pool("python3")["leased"] == 0, timeout=HELD_LEASE_S * 3,
               what="every kernel back from the suite's clients")
