"""Scenario 12 (issue #15), used by run.py: acquires from a set of three kpoolds (kernels bound to
127.0.0.2, .3 and .4) against a single daemon in the same run, at concurrency 1, through the
Python client, 50 ms between requests; then one daemon is SIGKILLed and the first acquire that
would have gone to it is timed."""
import signal
import statistics
import time

from benchlib import Daemon, percentile

ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
POOL = '[pools.fake]\nkernelspec = "fake"\nip = "%s"\nsize = %d\nmax_starting = 8\n'


def acquire_ms(client, n, pause_s=0.05):
    """Acquire + release n times; the acquire's latency each time, in ms. A pause after each
    release lets the daemon's replacement start settle: back to back, every acquire would
    queue behind the previous ones' refills on 2 cores, and measure that instead."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        k = client.acquire("fake", timeout_ms=10000)
        out.append((time.perf_counter() - t) * 1000)
        client.release(k.kernel_id)
        time.sleep(pause_s)
    return out


def multi(bench):
    quick = bench.args.quick
    n = 100 if quick else 200
    size = 20
    daemons = [Daemon(bench.kpoold, POOL % (ip, size)) for ip in ADDRESSES]
    single = Daemon(bench.kpoold, POOL % ("127.0.0.1", size))
    try:
        for d in daemons + [single]:
            d.wait_warm("fake", size)
        one = bench.kpool.Client(single.endpoint)
        many = bench.kpool.Client(",".join(d.endpoint for d in daemons))
        lat = {"single": [], "set": []}
        for _ in range(5):  # interleaved blocks: drift hits both alike
            lat["single"] += acquire_ms(one, n // 5)
            lat["set"] += acquire_ms(many, n // 5)
        served = {d.endpoint: d.pool("fake")["counters"]["acquired"] for d in daemons}
        # Failover: the daemon the client would ask next dies; time the acquire that finds out.
        victim_endpoint = many._daemons.views.order("fake")[0]
        victim = next(d for d in daemons if d.endpoint == victim_endpoint)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        t = time.perf_counter()
        k = many.acquire("fake", timeout_ms=10000)
        failover_ms = (time.perf_counter() - t) * 1000
        assert k.endpoint != victim_endpoint
        many.release(k.kernel_id)
        after = acquire_ms(many, 20)
    finally:
        for d in daemons + [single]:
            if d.proc.poll() is None:
                d.close()
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    bench.md("## 12. Several daemons: acquire from a set of three (fake kernels, c=1, Python client)", "",
             "| path | acquires | p50 ms | p99 ms | max ms |", "| --- | --- | --- | --- | --- |",
             *["| %s | %d | %.3f | %.3f | %.3f |" % (
                 "one daemon" if k == "single" else "set of three daemons", len(v), p50[k],
                 percentile(v, 99), max(v)) for k, v in lat.items()],
             "", "The set's p50 is **%.2fx** the single daemon's. Acquires served per daemon: %s." % (
                 p50["set"] / p50["single"], ", ".join(str(v) for v in served.values())),
             "", "After SIGKILL of the daemon the client would have asked next: that acquire took "
             "**%.1f ms** (served by another daemon); the next 20: p50 %.3f ms, max %.3f ms." % (
                 failover_ms, statistics.median(after), max(after)), "")
    bench.results["multi"] = {"latency_ms": lat, "p50_ratio": p50["set"] / p50["single"],
                              "served": served, "failover_ms": failover_ms, "after_ms": after}
