"""Refill benchmarks (issue #12), used by run.py:

  4  refill throughput from an empty pool, spawn vs fork (pre-built zygote) vs jupyter_client cold
     starts, with each forked kernel's CPU to warm and its private memory after gc.collect();
  11 refill as background work: a CPU-bound cell in a leased kernel while the pool refills 20
     kernels beside it, a 50-client acquire burst during a full refill, and refill throughput on an
     idle machine, each with background_priority on and off in the same run."""
import concurrent.futures
import os
import statistics
import time

from jupyter_client import BlockingKernelClient, KernelManager

from benchlib import Daemon


def kernel_cpu_ms(pid):
    """CPU the process has used so far (every live thread's schedstat), in ms."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e6


def private_mib(pid):
    """Private_Clean + Private_Dirty of the process, in MiB."""
    kb = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                kb += int(line.split()[1])
    return kb / 1024.0


def client_for(connection_file):
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return kc


def close_client(kc):
    kc.stop_channels()
    kc.context.destroy(linger=0)


def wait_zygote(d, pool):
    end = time.monotonic() + 120
    while not d.pool(pool).get("zygote_ready"):
        assert time.monotonic() < end, "the zygote never became ready"
        time.sleep(0.05)


def refill_from_empty(kpoold, launcher, n, concurrency, daemon_toml=""):
    """Seconds for a pool to go from 0 to n warm kernels; plus, for fork, each kernel's CPU."""
    d = Daemon(kpoold, '[pools.python3]\nsize = 0\nmax_starting = %d\nlauncher = "%s"\n'
               % (concurrency, launcher), daemon_toml=daemon_toml)
    try:
        d.wait_warm("python3", 0)
        if launcher == "fork":
            wait_zygote(d, "python3")
            # The first pre-built kernel teaches the zygote its hot pages: not part of the run.
            d.rpc(op="resize", pool="python3", size=1)
            d.wait_warm("python3", 1)
            end = time.monotonic() + 30
            while d.pool("python3")["zygote"]["hot_pages"] is None and time.monotonic() < end:
                time.sleep(0.05)
            d.rpc(op="drain", pool="python3")
            d.wait_warm("python3", 0)
            time.sleep(1.0)
        t = time.perf_counter()
        d.rpc(op="resize", pool="python3", size=n)
        done = d.wait_warm("python3", n, interval=0.01)
        run = {"n": n, "seconds": done - t, "per_s": n / (done - t)}
        kernels = [k for k in d.rpc(op="status")["kernels"] if k["state"] == "warm"]
        run["cpu_ms"] = [kernel_cpu_ms(k["pid"]) for k in kernels]
        if launcher == "fork":
            run["zygote"] = d.pool("python3")["zygote"]
            # Private memory after a full collection, in three forked kernels.
            mem = []
            for _ in range(3):
                k = d.rpc(op="acquire", pool="python3", timeout_ms=60000)
                kc = client_for(k["connection_file"])
                kc.execute_interactive("import gc; gc.collect()", timeout=60, output_hook=lambda m: None)
                mem.append(private_mib(k["pid"]))
                close_client(kc)
            run["private_mib"] = mem
        return run
    finally:
        d.close()


def refill(bench):
    """Kernels/s from an empty pool to N warm, for both launchers, against jupyter_client cold
    starts; forked kernels' CPU to warm and private memory."""
    quick = bench.args.quick
    concurrency = 2  # the machine's width: more at once only queues on the CPU
    runs = {"spawn": refill_from_empty(bench.kpoold, "spawn", 4 if quick else 8, concurrency),
            "fork": refill_from_empty(bench.kpoold, "fork", 12 if quick else 36, concurrency)}
    n = runs["spawn"]["n"]
    t = time.perf_counter()

    def cold_start(_):
        km = KernelManager(kernel_name="python3")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        kc.stop_channels()
        return km

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as ex:
        kms = list(ex.map(cold_start, range(n)))
    cold_s = time.perf_counter() - t
    for km in kms:
        km.shutdown_kernel(now=True)
    cold = n / cold_s
    fork, spawn = runs["fork"], runs["spawn"]
    z = fork["zygote"]
    bench.md("## 4. Refill throughput from empty (ipykernels, %d at a time)" % concurrency, "",
             "| path | kernels | seconds | kernels/s | ratio to cold | kernel CPU to warm p50 ms |",
             "| --- | --- | --- | --- | --- | --- |",
             "| kpoold, launcher = spawn | %d | %.2f | %.2f | %.2fx | %.0f |" % (
                 spawn["n"], spawn["seconds"], spawn["per_s"], spawn["per_s"] / cold,
                 statistics.median(spawn["cpu_ms"])),
             "| kpoold, launcher = fork (pre-built) | %d | %.2f | %.2f | %.2fx | %.0f |" % (
                 fork["n"], fork["seconds"], fork["per_s"], fork["per_s"] / cold,
                 statistics.median(fork["cpu_ms"])),
             "| jupyter_client start_kernel + wait_for_ready | %d | %.2f | %.2f | 1.00x | |" % (n, cold_s, cold),
             "", "fork refills at **%.2fx** the rate of spawn. Forked kernels: %d pre-built, %d not "
             "(%s); %s hot pages pre-faulted; private memory after gc.collect(): %s MiB." % (
                 fork["per_s"] / spawn["per_s"], z["kernels_prebuilt"], z["kernels_not_prebuilt"],
                 z["why_not"] or "none refused", z["hot_pages"],
                 ", ".join("%.1f" % m for m in fork["private_mib"])), "")
    bench.results["refill"] = {"concurrency": concurrency, "runs": runs, "cold_s": cold_s, "cold_n": n}


CPU_CELL = """
import time
t = time.perf_counter()
total = 0
for i in range(%d):
    total += i * i
print(time.perf_counter() - t)
"""


def cpu_cell_seconds(kc, loops):
    out = []
    kc.execute_interactive(CPU_CELL % loops, timeout=300,
                           output_hook=lambda m: out.append(m["content"].get("text", ""))
                           if m["msg_type"] == "stream" else None)
    return float("".join(out))


def leased_cell_during_refill(bench, background, refills, loops):
    """Seconds a CPU-bound cell takes in a leased kernel: alone, and while the pool refills
    `refills` kernels beside it."""
    d = Daemon(bench.kpoold, "[pools.python3]\nsize = 1\nmax_starting = 2\n",
               daemon_toml="background_priority = %s" % ("true" if background else "false"))
    try:
        d.wait_warm("python3", 1)
        assert d.rpc(op="status")["background_priority"]["on"] is background
        d.rpc(op="resize", pool="python3", size=0)
        k = d.rpc(op="acquire", pool="python3", timeout_ms=60000)
        kc = client_for(k["connection_file"])
        time.sleep(1.0)
        alone = [cpu_cell_seconds(kc, loops) for _ in range(3)]
        d.rpc(op="resize", pool="python3", size=refills)
        t = time.perf_counter()
        beside = []
        while d.pool("python3")["warm"] < refills:
            beside.append(cpu_cell_seconds(kc, loops))
        refill_s = time.perf_counter() - t
        close_client(kc)
        return {"alone_s": alone, "during_refill_s": beside, "refill_s": refill_s}
    finally:
        d.close()


def burst_during_refill(bench, background, refill, rounds):
    """Bursts of 50 clients each acquiring one warm fake kernel at once (p50 and p99 of each
    burst), with the python3 pool refilling 20 real ipykernels (or not) meanwhile."""
    d = Daemon(bench.kpoold, "[pools.fake]\nkernelspec = \"fake\"\nsize = 60\nmax_starting = 8\n"
               "[pools.python3]\nsize = 0\nmax_starting = 2\n",
               daemon_toml="background_priority = %s" % ("true" if background else "false"))
    try:
        d.wait_warm("fake", 60)
        if refill:
            d.rpc(op="resize", pool="python3", size=20)
        bursts = []
        for _ in range(rounds):
            d.wait_warm("fake", 60)
            time.sleep(0.3)
            if refill:
                assert d.pool("python3")["starting"] > 0, "the refill ended before the bursts"
            result = bench.kpool_bench(d.endpoint, "-c", "50", "-n", "50", "--timeout-ms", "0",
                                       "acquire", "fake")
            bursts.append(result)
            for k in d.rpc(op="status")["kernels"]:
                if k["state"] == "leased":
                    d.rpc(op="release", kernel_id=k["id"])
        return {"p50_ms": statistics.median(b["p50_ms"] for b in bursts),
                "p99_ms": statistics.median(b["p99_ms"] for b in bursts),
                "failures": sum(b["failures"] for b in bursts), "bursts": len(bursts)}
    finally:
        d.close()


def priority(bench):
    quick = bench.args.quick
    loops = 4_000_000 if quick else 8_000_000
    refills = 10 if quick else 20
    a = {on: leased_cell_during_refill(bench, on, refills, loops) for on in (True, False)}
    b = {(on, r): burst_during_refill(bench, on, r, 3 if quick else 5)
         for on in (True, False) for r in (False, True)}
    c = {on: refill_from_empty(bench.kpoold, "spawn", 4 if quick else 8, 2,
                               daemon_toml="background_priority = %s" % ("true" if on else "false"))
         for on in (True, False)}

    def loss(run):
        return statistics.median(run["during_refill_s"]) / statistics.median(run["alone_s"]) - 1

    bench.md("## 11. Refill as background work (starting kernels at SCHED_IDLE)", "",
             "(a) A CPU-bound cell in a leased ipykernel, alone and while the pool refills %d real "
             "ipykernels beside it (2 at a time), seconds per run of the cell (median):" % refills, "",
             "| background_priority | alone s | during refill s | runs during refill | speed lost | refill s |",
             "| --- | --- | --- | --- | --- | --- |")
    for on in (True, False):
        r = a[on]
        bench.md("| %s | %.3f | %.3f | %d | %.0f%% | %.1f |" % (
            "on" if on else "off", statistics.median(r["alone_s"]), statistics.median(r["during_refill_s"]),
            len(r["during_refill_s"]), 100 * loss(r), r["refill_s"]))
    bench.md("", "(b) Bursts of 50 clients each acquiring one of 60 warm fake kernels at once, with "
             "and without 20 real ipykernels refilling in another pool (medians over %d bursts of each "
             "burst's p50 and p99):" % b[(True, True)]["bursts"], "",
             "| background_priority | refill | p50 ms | p99 ms | failures | ratio to no refill (p50) |",
             "| --- | --- | --- | --- | --- | --- |")
    for on in (True, False):
        for r in (False, True):
            x = b[(on, r)]
            bench.md("| %s | %s | %.2f | %.2f | %d | %.2fx |" % (
                "on" if on else "off", "yes" if r else "no", x["p50_ms"], x["p99_ms"], x["failures"],
                x["p50_ms"] / b[(on, False)]["p50_ms"]))
    bench.md("", "(c) Refill from empty on an idle machine (spawn, 2 at a time):", "",
             "| background_priority | kernels | seconds | kernels/s |", "| --- | --- | --- | --- |")
    for on in (True, False):
        bench.md("| %s | %d | %.2f | %.2f |" % ("on" if on else "off", c[on]["n"], c[on]["seconds"], c[on]["per_s"]))
    bench.md("", "Idle refill with priority on runs at **%.2fx** the rate with it off." % (
        c[True]["per_s"] / c[False]["per_s"]), "")
    bench.results["priority"] = {"cell": {str(k): v for k, v in a.items()},
                                 "burst": {"%s,%s" % k: v for k, v in b.items()},
                                 "idle_refill": {str(k): v for k, v in c.items()}}
