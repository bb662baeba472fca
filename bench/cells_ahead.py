"""bench/run.py's scenario 21: a notebook request at the kernel's own speed (issue #49).

One kpoold, one fork pool of 3 ipykernels that first learns scenario 19's report notebook (its
imports pre-imported, its hot pages pre-faulted), and two kpool serve processes in front of it:
one with the default `--cells-ahead 4` (a notebook's next cells wait at the kernel while one
runs) and one with `--cells-ahead 1` (one cell at a time, as nbclient sends them). Interleaved,
each after the pool has settled: GET /v1/run of the report through each, and `kpool run` with
each setting. kpool serve's own part of a request is read inside each request from the
kernel's stamps (scenario 19's serve_part_ms: before the first cell, between cells, after the
last), beside the floor (the kernel's own time for the cells, on the same kernel again). Two
more kpool serve, `--cells-ahead 2` and `--cells-ahead 64` (every cell at once), give serve's
own part for the window's other sizes. Of serve's part, what others would pay too is shown
beside it: the kernel's own dispatch of each cell (ipykernel's, from the execute_request to its
execute_input) and the HTTP client's round trip (GET /v1/health); what is left is kpool serve's.

The first execute of a fresh kernel: `x = 1` timed by the kernel (busy to idle) on kernels
acquired as `kpool run` takes them (history in memory, a cwd), the first against the median of
the next nine, and against the same kernel's execute after it has sat idle for a second (the
floor for any kernel that waits in a pool: its caches are cold and its threads asleep).

Last, one-cell `/v1/run` requests at c=10 against the pool's fork refill rate from empty: kpool
serve must add no ceiling of its own."""
import os
import statistics
import subprocess
import tempfile
import time

import requests
import nbformat
from jupyter_client import BlockingKernelClient
from nbformat.v4 import new_code_cell, new_notebook

from benchlib import Daemon
from refill import close_client
from report_notebook import (LEARN_FROM, kernel_cell_ms, pooled_fresh_and_floor, prepared_cells, report_notebook,
                             serve_part_ms, start_serve)
from serve import load, stop_peer

POOLS = """
[pools.report]
kernelspec = "python3"
launcher = "fork"
size = 3
"""


def first_execute(d, pool, cwd):
    """(first, median of the next nine, after a second idle) for one freshly acquired kernel."""
    r = d.rpc(op="acquire", pool=pool, timeout_ms=120000, history="memory", cwd=cwd)
    assert r["ok"], r
    try:
        kc = BlockingKernelClient(connection_file=r["connection_file"])
        kc.load_connection_file()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            time.sleep(0.5)  # as a kernel waits in a pool before a request comes
            first = kernel_cell_ms(kc, "x = 1")
            nine = statistics.median(kernel_cell_ms(kc, "x = 1") for _ in range(9))
            time.sleep(1.0)
            return first, nine, kernel_cell_ms(kc, "x = 1")
        finally:
            close_client(kc)
    finally:
        d.rpc(op="release", kernel_id=r["kernel_id"])


def cells_ahead_bench(b):
    quick = b.args.quick
    runs = 9 if quick else 21
    root = tempfile.mkdtemp(prefix="kpool-bench-ahead-")
    nb = os.path.join(root, "report.ipynb")
    report_notebook(nb)
    one_cell = os.path.join(root, "one.ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1")], metadata={"kernelspec": {
        "name": "python3", "language": "python", "display_name": "Python 3"}}), one_cell)
    cli = os.path.join(b.args.build, "kpool")
    d = Daemon(b.kpoold, POOLS)
    ahead, ahead_url = start_serve(cli, d, root)
    serial, serial_url = start_serve(cli, d, root, "--cells-ahead", "1")
    # The window's other sizes, for serve's own part only: 2, and 64 (every cell at once).
    two, two_url = start_serve(cli, d, root, "--cells-ahead", "2")
    every, every_url = start_serve(cli, d, root, "--cells-ahead", "64")
    urls = {"ahead": ahead_url, "serial": serial_url}
    other_urls = {"2": two_url, "64": every_url}
    run_args = {"ahead": [], "serial": ["--cells-ahead", "1"]}
    try:
        d.wait_warm("report", 3, timeout=600)

        def settle():
            d.wait_warm("report", 3, timeout=600)
            time.sleep(0.5)

        def get(url):
            t = time.perf_counter()
            r = requests.get(url + "/v1/run/report.ipynb?region=south", timeout=120)
            assert r.status_code == 200 and '"sales"' in r.text, (r.status_code, r.text[:300])
            return (time.perf_counter() - t) * 1000

        for _ in range(LEARN_FROM):
            get(ahead_url)
        end = time.monotonic() + 300
        while time.monotonic() < end:
            z = d.pool("report")["zygote"]
            if {"numpy", "pandas", "matplotlib.pyplot"} <= set(z["preload"]["preloaded"]) and not z["rebuilding"]:
                break
            time.sleep(0.5)
        for _ in range(LEARN_FROM // 2):
            get(ahead_url)

        serve_ms = {k: [] for k in urls}
        run_ms = {k: [] for k in urls}
        parts = {k: [] for k in urls}
        dispatch = {k: [] for k in urls}  # the kernel's own share of parts (serve_part_ms)
        out_dir = tempfile.mkdtemp(prefix="kpool-bench-ahead-run-")
        for i in range(runs):
            for k in list(urls)[::1 if i % 2 == 0 else -1]:  # which goes first alternates
                settle()
                serve_ms[k].append(get(urls[k]))
                settle()
                parts[k].append(serve_part_ms(d, lambda url=urls[k]: get(url), dispatch[k]))
                settle()
                t = time.perf_counter()
                r = subprocess.run([cli, "--endpoint", d.endpoint, "run", nb, os.path.join(out_dir, "%d.ipynb" % i),
                                    "-p", "region", "south", *run_args[k]], capture_output=True)
                assert r.returncode == 0, r.stderr
                run_ms[k].append((time.perf_counter() - t) * 1000)
        other_parts = {k: [] for k in other_urls}
        for i in range(runs):
            for k in other_urls:
                settle()
                other_parts[k].append(serve_part_ms(d, lambda url=other_urls[k]: get(url)))
        # The HTTP client's own round trip, as get() makes one (a new connection, requests):
        # GET /v1/health, which asks nothing of kpoold or a kernel.
        settle()
        http_floor = []
        for _ in range(20):
            t = time.perf_counter()
            assert requests.get(ahead_url + "/v1/health", timeout=30).status_code == 200
            http_floor.append((time.perf_counter() - t) * 1000)
        cells = prepared_cells(cli, nb, root)
        passes = []
        for _ in range(5 if quick else 9):
            settle()
            passes.append(pooled_fresh_and_floor(d, "report", cells))
        firsts = []
        for _ in range(8 if quick else 16):
            settle()
            firsts.append(first_execute(d, "report", root))
        # One-cell requests at c=10 against the refill rate from empty.
        settle()
        n = 40 if quick else 100
        seconds, results = load(n, 10, lambda s: s.get(ahead_url + "/v1/run/one.ipynb", timeout=120).status_code)
        served = sum(1 for _, st in results if st == 200)
        c10_rate = served / seconds
        settle()
        assert d.rpc(op="resize", pool="report", size=0)["ok"]
        end = time.monotonic() + 60
        while d.pool("report")["warm"] + d.pool("report")["starting"] > 0 and time.monotonic() < end:
            time.sleep(0.1)
        t = time.perf_counter()
        assert d.rpc(op="resize", pool="report", size=8)["ok"]
        d.wait_warm("report", 8, timeout=600)
        refill_rate = 8 / (time.perf_counter() - t)
    finally:
        for proc in (ahead, serial, two, every):
            stop_peer(proc)
        d.close()

    p50 = statistics.median
    part = lambda k, i: p50(p[i] for p in parts[k])
    total = lambda k: p50(sum(p) for p in parts[k])
    floor = p50(a for _, a in passes)
    fresh = p50(f for f, _ in passes)
    first, nine, idle = (p50(f[i] for f in firsts) for i in range(3))
    lines = ["| | cells ahead (default, 4) | one at a time (`--cells-ahead 1`) | ratio |", "| --- | --- | --- | --- |",
             "| `/v1/run` report, c=1, p50 ms (%d) | **%.1f** | %.1f | %.2fx |"
             % (runs, p50(serve_ms["ahead"]), p50(serve_ms["serial"]), p50(serve_ms["ahead"]) / p50(serve_ms["serial"])),
             "| `kpool run` report, whole process, p50 ms | **%.1f** | %.1f | %.2fx |"
             % (p50(run_ms["ahead"]), p50(run_ms["serial"]), p50(run_ms["ahead"]) / p50(run_ms["serial"])),
             "| serve's own part: HTTP request to the first cell, ms | %.1f | %.1f | |" % (part("ahead", 0), part("serial", 0)),
             "| serve's own part: between the %d cells (idle to the next execute_input), ms | %.1f | %.1f | |"
             % (len(cells), part("ahead", 1), part("serial", 1)),
             "| serve's own part: the last cell's idle to the answer, ms | %.1f | %.1f | |" % (part("ahead", 2), part("serial", 2)),
             "| **serve's own part, in all, ms** | **%.1f** | %.1f | |" % (total("ahead"), total("serial")),
             "| of which the kernel's own dispatch (each execute_request sent and the kernel free, to its "
             "execute_input), ms | %.1f | %.1f | |" % (p50(dispatch["ahead"]), p50(dispatch["serial"])),
             "| of which the HTTP client's round trip (GET /v1/health, p50 of 20), ms | %.1f | %.1f | |"
             % (p50(http_floor), p50(http_floor)),
             "| **what is left: kpool serve's, ms** | **%.1f** | %.1f | |"
             % (p50(sum(p) - x for p, x in zip(parts["ahead"], dispatch["ahead"])) - p50(http_floor),
                p50(sum(p) - x for p, x in zip(parts["serial"], dispatch["serial"])) - p50(http_floor)), "",
             "Other windows, serve's own part between the cells / in all (p50 of %d): `--cells-ahead 2` %.1f / "
             "%.1f ms, `--cells-ahead 64` (every cell at once) %.1f / %.1f ms."
             % (runs, p50(p[1] for p in other_parts["2"]), p50(sum(p) for p in other_parts["2"]),
                p50(p[1] for p in other_parts["64"]), p50(sum(p) for p in other_parts["64"])), "",
             "The floor: the report's cells timed by the kernel on the same kernel again, %.1f ms (a fresh "
             "kernel's first pass %.1f ms, %.2fx). `/v1/run` with cells ahead is %.2fx the floor."
             % (floor, fresh, fresh / floor, p50(serve_ms["ahead"]) / floor), "",
             "A fresh kernel's first execute of `x = 1`, by the kernel (p50 of %d kernels, busy to idle): first "
             "**%.2f** ms, the next nine %.2f ms (+%.2f ms), the same kernel after a second idle %.2f ms "
             "(the floor for a kernel that waits: first is +%.2f ms above it)."
             % (len(firsts), first, nine, first - nine, idle, first - idle), "",
             "One-cell `/v1/run` at c=10: %.1f req/s (%d of %d served); the pool's fork refill from empty to 8: "
             "%.1f kernels/s; **%.2fx**." % (c10_rate, served, n, refill_rate, c10_rate / refill_rate), ""]
    b.md("## 21. A notebook request at the kernel's own speed", "",
         "One learned fork pool of 3 (scenario 19's report notebook, %d requests to learn from), two kpool "
         "serve in front of it: `--cells-ahead 4` (the default) and `--cells-ahead 1`, interleaved."
         % LEARN_FROM, "", *lines)
    b.results["cells_ahead"] = {"serve_ms": serve_ms, "run_ms": run_ms, "serve_part_ms": parts,
                                "kernel_dispatch_ms": dispatch, "http_floor_ms": http_floor,
                                "serve_part_ms_other_windows": other_parts,
                                "kernel_cells_ms": passes, "first_execute_ms": firsts,
                                "c10_rate": c10_rate, "refill_rate": refill_rate}
