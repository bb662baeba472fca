"""bench/run.py's scenario 13: batch throughput of `kpool run` (issue #20). 100 one-cell notebooks
run by `kpool run -j 4` on a fork pool, against that pool's refill rate measured from empty in the
same run (what a batch can reach at best: every notebook takes a kernel the pool must replace), and
beside it papermill 2.6.0 itself (../shared/anchors) running the same notebooks 4 at a time, each
starting its own kernel as papermill does. Real ipykernels."""
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
from benchlib import PYTHON, Daemon

ANCHORS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "shared", "anchors")


def busy_cpu_seconds():
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat less idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def refill_rate(d, pool, n=8, cpu=None):
    """Kernels per second from an empty pool: drain, wait until nothing is left, resize to n.
    Appends the machine's busy CPU seconds per kernel to `cpu` if given."""
    d.rpc(op="drain", pool=pool)
    end = time.monotonic() + 60
    while any(k["pool"] == pool for k in d.rpc(op="status")["kernels"]):
        assert time.monotonic() < end, "the drained kernels did not go"
        time.sleep(0.05)
    t, busy = time.perf_counter(), busy_cpu_seconds()
    d.rpc(op="resize", pool=pool, size=n)
    rate = n / (d.wait_warm(pool, n, interval=0.02) - t)
    if cpu is not None:
        cpu.append((busy_cpu_seconds() - busy) / n)
    return rate


def churn_rate(d, pool, n, context=None):
    """Acquire + release cycles per second, 4 at a time, no code run: what the pool sustains when
    every released kernel ends gracefully and is replaced; with `context` (cwd and env, as kpool
    run sends them) the snippet that applies it runs too."""
    def cycle(_):
        ctx = zmq.Context.instance()
        req = dict({"op": "acquire", "pool": pool, "timeout_ms": 60000}, **(context or {}))
        k = loadgen._rpc(ctx, d.endpoint, req, 70000)
        assert k["ok"], k
        loadgen._rpc(ctx, d.endpoint, {"op": "release", "kernel_id": k["kernel_id"]}, 10000)
    d.wait_warm(pool, 4)
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
        list(ex.map(cycle, range(n)))
    return n / (time.perf_counter() - t)


def batch(b):
    n = 40 if b.args.quick else 100
    work = tempfile.mkdtemp(prefix="kpool-bench-batch-")
    kpool = os.path.join(b.args.build, "kpool")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell("print(1)")]
    inputs = []
    for i in range(n):
        p = os.path.join(work, "b%03d.ipynb" % i)
        nbformat.write(nb, p)
        inputs.append(p)
    d = Daemon(b.kpoold, '[pools.python3]\nsize = 4\nmax_starting = 2\nlauncher = "fork"\n')
    try:
        env = dict(os.environ, KPOOL_ENDPOINT=d.endpoint)
        d.wait_warm("python3", 4, timeout=120)
        rates, refill_cpu = [], []
        for _ in range(3):
            rates.append(refill_rate(d, "python3", cpu=refill_cpu))
            d.rpc(op="resize", pool="python3", size=4)
        refill = statistics.median(rates)
        d.wait_warm("python3", 4)
        t, busy = time.perf_counter(), busy_cpu_seconds()
        r = subprocess.run([kpool, "run"] + inputs + ["--output-dir", os.path.join(work, "kpool"), "-j", "4"],
                           env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        kpool_s = time.perf_counter() - t
        d.wait_warm("python3", 4)
        notebook_cpu = (busy_cpu_seconds() - busy) / n
        assert r.returncode == 0, r.stderr
        launcher = d.pool("python3").get("launcher")
        churn = churn_rate(d, "python3", n)
        churn_context = churn_rate(d, "python3", n, {"cwd": work, "env": dict(os.environ)})
    finally:
        d.close()
    papermill_s = None
    if os.path.isdir(os.path.join(ANCHORS, "papermill")):
        pm_env = dict(os.environ, PYTHONPATH=os.path.join(ANCHORS, "papermill"))
        os.makedirs(os.path.join(work, "papermill"))

        def one(path):
            out = os.path.join(work, "papermill", os.path.basename(path))
            subprocess.run([PYTHON, "-m", "papermill", path, out, "--no-progress-bar"], env=pm_env,
                           check=True, capture_output=True, stdin=subprocess.DEVNULL)

        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            list(ex.map(one, inputs))
        papermill_s = time.perf_counter() - t
    shutil.rmtree(work, ignore_errors=True)
    rate = n / kpool_s
    lines = ["## 13. Batch: `kpool run -j 4` on a fork pool, and papermill 4 at a time", "",
             "| what | notebooks | seconds | notebooks/s |", "| --- | --- | --- | --- |",
             "| kpool run -j 4 (pool of 4, launcher %s) | %d | %.1f | %.2f |" % (launcher, n, kpool_s, rate)]
    if papermill_s is not None:
        lines.append("| papermill 2.6.0, 4 at a time | %d | %.1f | %.2f |" % (n, papermill_s, n / papermill_s))
    lines += ["", "The pool refills %.2f kernels/s from empty (median of 3, 8 kernels each): kpool run "
              "reaches **%.2f** of it%s. Where the rest goes: the pool sustains %.2f acquire+release "
              "cycles/s, 4 at a time, with no code (each released kernel ends gracefully and is "
              "replaced: %.2f of refill), %.2f/s with cwd and env applied as kpool run sends them "
              "(%.2f)." % (refill, rate / refill,
                           "" if papermill_s is None else
                           ", **%.1fx** papermill's rate" % (papermill_s / kpool_s),
                           churn, churn / refill, churn_context, churn_context / refill),
              "", "CPU, the whole machine's busy time: %.0f ms per kernel refilled from empty, %.0f ms "
              "per notebook run (its kernel's cwd/env, connection, cell and graceful end, the kernel "
              "that replaces it, kpool run and kpoold), so on a machine the batch keeps busy the "
              "ratio cannot exceed about %.2f." % (1000 * statistics.median(refill_cpu), 1000 * notebook_cpu,
                                                    statistics.median(refill_cpu) / notebook_cpu), ""]
    b.md(*lines)
    b.results["batch"] = {"n": n, "kpool_s": kpool_s, "refill_per_s": refill, "refill_runs": rates,
                          "refill_cpu_s": refill_cpu, "notebook_cpu_s": notebook_cpu,
                          "churn_per_s": churn, "churn_with_context_per_s": churn_context,
                          "papermill_s": papermill_s, "launcher": launcher}
