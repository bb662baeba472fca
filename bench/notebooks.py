"""bench/run.py's scenarios about kernels in use rather than the pool's own mechanics: 9, time to
warm per kernel language, and 10, notebooks run by `kpool run` and `kpool exec`. Each takes the
Bench (its builds, the installed Python package, the report)."""
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import nbformat
import zmq

import loadgen
from benchlib import PYTHON, Daemon, cold_start_seconds


# 10 ------------------------------------------------------------------------------------
def notebooks(b):
    """Serverless and batch notebooks (issue #11): a one-cell notebook run end to end by
    `kpool run` (the whole process) beside `jupyter execute` with the pooled and the plain
    kernelspec, `kpool exec 'print(1)'`, peak RSS of `kpool run`, and 100 one-cell notebooks
    with -j 4 against the pool's refill rate measured in the same run. Real ipykernels,
    refilling behind every request as users run it."""
    runs = 7 if b.args.quick else 21
    work = tempfile.mkdtemp(prefix="kpool-bench-run-")
    kpool = os.path.join(b.args.build, "kpool")
    d = Daemon(b.kpoold, "[pools.python3]\nsize = 4\nmax_starting = 2\n")
    try:
        env = dict(os.environ, PYTHONPATH=b.site, JUPYTER_PATH=os.path.join(work, "share", "jupyter"),
                   KPOOL_ENDPOINT=d.endpoint)
        subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3", "--prefix", work,
                        "--endpoint", d.endpoint], check=True, env=env, capture_output=True)
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                               "display_name": "Python 3"}})
        nb.cells = [nbformat.v4.new_code_cell("print(1)")]
        path = os.path.join(work, "one.ipynb")
        nbformat.write(nb, path)
        out = os.path.join(work, "out.ipynb")

        def timed(argv):
            d.wait_warm("python3", 4)  # served warm, the refill of the last one done
            t = time.perf_counter()
            subprocess.run(argv, env=env, check=True, capture_output=True)
            return time.perf_counter() - t

        run_s, exec_s = [], []
        for _ in range(runs):
            run_s.append(timed([kpool, "run", path, out, "--no-progress"]))
            exec_s.append(timed([kpool, "exec", "print(1)"]))
        # Peak RSS through GNU time: a child forked from this (large) Python process would
        # report Python's pages as its own high-water mark.
        rss = 0
        if os.path.exists("/usr/bin/time"):
            d.wait_warm("python3", 4)
            r = subprocess.run(["/usr/bin/time", "-f", "%M", kpool, "run", path, out, "--no-progress"],
                               env=env, capture_output=True, text=True, check=True)
            rss = int(r.stderr.strip().splitlines()[-1])
        jx = {"python3-pooled": [], "python3": []}
        for _ in range(3 if b.args.quick else 5):
            for name in jx:
                jx[name].append(timed(["jupyter", "execute", "--kernel_name=" + name, path]))
        # Refill rate of this pool: 8 kernels from a resize of an empty pool.
        d.rpc(op="drain", pool="python3")
        end = time.monotonic() + 60
        while any(k["pool"] == "python3" for k in d.rpc(op="status")["kernels"]):
            assert time.monotonic() < end
            time.sleep(0.05)
        t = time.perf_counter()
        d.rpc(op="resize", pool="python3", size=8)
        refill_rate = 8 / (d.wait_warm("python3", 8, interval=0.02) - t)
        d.rpc(op="resize", pool="python3", size=4)
        n = 40 if b.args.quick else 100
        batch = []
        for i in range(n):
            p = os.path.join(work, "b%03d.ipynb" % i)
            shutil.copyfile(path, p)
            batch.append(p)
        d.wait_warm("python3", 4)
        t = time.perf_counter()
        r = subprocess.run([kpool, "run"] + batch + ["--output-dir", os.path.join(work, "outs"), "-j", "4"],
                           env=env, capture_output=True, text=True)
        batch_s = time.perf_counter() - t
        assert r.returncode == 0, r.stderr
        # The pool's sustained churn: the same number of acquire + release, 4 at a time, no
        # code run (each released kernel shuts down gracefully and is replaced, as above).
        d.wait_warm("python3", 4)
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            def churn(_):
                ctx = zmq.Context.instance()
                k = loadgen._rpc(ctx, d.endpoint, {"op": "acquire", "pool": "python3", "timeout_ms": 60000}, 70000)
                assert k["ok"], k
                loadgen._rpc(ctx, d.endpoint, {"op": "release", "kernel_id": k["kernel_id"]}, 10000)
            list(ex.map(churn, range(n)))
        churn_rate = n / (time.perf_counter() - t)
    finally:
        d.close()
    med = statistics.median
    rate = n / batch_s
    b.md("## 10. Notebooks: `kpool run` and `kpool exec` (warm pool of 4 ipykernels, refilling)", "",
            "| command (whole process, one-cell notebook) | runs | p50 ms | max ms |", "| --- | --- | --- | --- |",
            "| kpool run | %d | %.1f | %.1f |" % (runs, med(run_s) * 1000, max(run_s) * 1000),
            "| kpool exec 'print(1)' | %d | %.1f | %.1f |" % (runs, med(exec_s) * 1000, max(exec_s) * 1000),
            "| jupyter execute, pooled kernelspec | %d | %.1f | %.1f |" % (
                len(jx["python3-pooled"]), med(jx["python3-pooled"]) * 1000, max(jx["python3-pooled"]) * 1000),
            "| jupyter execute, plain kernelspec | %d | %.1f | %.1f |" % (
                len(jx["python3"]), med(jx["python3"]) * 1000, max(jx["python3"]) * 1000),
            "", "kpool run is **%.0fx** faster than jupyter execute with the pooled kernelspec and **%.0fx** "
            "than with the plain one (p50). Peak RSS of `kpool run` (GNU time): %.1f MB." % (
                med(jx["python3-pooled"]) / med(run_s), med(jx["python3"]) / med(run_s), rss / 1024.0),
            "", "%d one-cell notebooks with -j 4: %.1f s, **%.2f notebooks/s**. The pool refills %.2f "
            "kernels/s from empty (8 kernels, nothing else running): ratio **%.2f**; it sustains %.2f "
            "acquire+release cycles/s, 4 at a time, when every released kernel also shuts down "
            "gracefully: ratio **%.2f**." % (n, batch_s, rate, refill_rate, rate / refill_rate,
                                             churn_rate, rate / churn_rate), "")
    b.results["notebooks"] = {"run_s": run_s, "exec_s": exec_s, "jupyter_execute_s": jx,
                                 "peak_rss_kib": rss, "batch": {"n": n, "seconds": batch_s,
                                                               "per_s": rate, "refill_per_s": refill_rate,
                                                               "churn_per_s": churn_rate}}

# 9 -------------------------------------------------------------------------------------
def languages(b):
    """Time to warm for every kernelspec Debian ships here, one kernel at a time, spawned by
    kpoold (resize 0 -> 1 until it is warm) beside a cold start through jupyter_client
    (start_kernel + wait_for_ready), medians of n runs each, in the same run."""
    runs = 3 if b.args.quick else 7
    rows = []
    for spec in ("python3", "ir", "xpython", "octave"):
        d = Daemon(b.kpoold, '[pools.k]\nkernelspec = "%s"\nsize = 0\nmax_starting = 1\n' % spec)
        pooled = []
        try:
            for _ in range(runs):
                t = time.perf_counter()
                d.rpc(op="resize", pool="k", size=1)
                pooled.append(d.wait_warm("k", 1, interval=0.005) - t)
                d.rpc(op="drain", pool="k")
                end = time.monotonic() + 30
                while any(k["pool"] == "k" for k in d.rpc(op="status")["kernels"]):
                    assert time.monotonic() < end, "the drained kernel did not stop"
                    time.sleep(0.02)
        finally:
            d.close()
        cold = [cold_start_seconds(spec) for _ in range(runs)]
        rows.append((spec, statistics.median(pooled), statistics.median(cold)))
    b.md("## 9. Time to warm per kernel language (one at a time, %d runs each)" % runs, "",
            "| kernelspec | kpoold spawn to warm, p50 s | jupyter_client cold start, p50 s | ratio |",
            "| --- | --- | --- | --- |")
    for spec, pooled, cold in rows:
        b.md("| %s | %.3f | %.3f | %.2fx |" % (spec, pooled, cold, cold / pooled))
    b.md("", "Either way the kernel's own start-up is the cost; a pooled kernel pays it "
            "before anyone asks (scenario 2 shows what an acquire then costs).", "")
    b.results["languages"] = [{"kernelspec": s, "kpoold_s": p, "cold_s": c} for s, p, c in rows]
