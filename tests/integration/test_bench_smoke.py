"""A few requests of every kpool-bench mode, so the benchmark tool cannot rot unnoticed.
(Speed is measured by bench/run.py, never asserted here.)"""
import json
import os
import subprocess

from conftest import HERE

BENCH = os.environ.get("KPOOL_BENCH") or os.path.join(HERE, "..", "..", "build", "kpool-bench")


def bench(endpoint, *args):
    r = subprocess.run([BENCH, "--endpoint", endpoint, "--json"] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_kpool_bench_against_kpoold_and_the_echo_baseline(kpoold, tmp_path):
    d = kpoold("""
        [pools.fake]
        kernelspec = "fake"
        size = 2
    """)
    d.wait_warm("fake", 2)
    for op in ("ping", "status"):
        out = bench(d.endpoint, "-c", "4", "-n", "40", op)
        assert out["requests"] == 40 and out["failures"] == 0 and out["p50_ms"] > 0
    out = bench(d.endpoint, "-c", "2", "-n", "4", "--release", "--timeout-ms", "20000", "acquire", "fake")
    assert out["requests"] == 4 and out["failures"] == 0
    assert d.pool("fake")["counters"]["acquired"] == 4
    failing = subprocess.run([BENCH, "--endpoint", d.endpoint, "-n", "2", "--timeout-ms", "0",
                              "acquire", "nope"], capture_output=True, text=True, timeout=60)
    assert failing.returncode == 1 and "Failed requests:     2" in failing.stdout

    echo_endpoint = "ipc://%s/echo" % tmp_path
    echo = subprocess.Popen([BENCH, "echo-server", echo_endpoint])
    try:
        out = bench(echo_endpoint, "-c", "4", "-n", "100", "ping")
        assert out["requests"] == 100 and out["failures"] == 0
    finally:
        echo.kill()
        echo.wait()
