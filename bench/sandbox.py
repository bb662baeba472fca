"""bench/run.py's scenario 20: what a sandbox costs (issue #48), a sandboxed fork pool beside a
plain one in one kpoold, every measurement interleaved pool by pool:

  - the report notebook of scenario 19 through kpool serve's /v1/run, once both pools have
    learned its imports (target: sandboxed p50 <= 1.1x plain), and `kpool exec 'pass'` end to
    end (<= 1.1x): the sandbox is made at refill, so nothing of it should be on the request's
    path but the working directory an acquire names (`kpool-sandbox workdir`, one short process:
    measured apart with `kpool exec --cwd`);
  - refill throughput from an empty pool, 8 kernels (target: sandboxed >= 0.8x plain);
  - memory per warm kernel: the proportional set size of the kernel's whole process tree (the
    sandbox's outer process and init included) and its private memory.

The floor beside them: `kpool --version`'s own run time (a process start) for exec, and the
notebook's cells timed by the kernel on each pool's fresh kernel (scenario 19's floor)."""
import os
import statistics
import subprocess
import tempfile
import time

import requests

from benchlib import Daemon, percentile
from refill import private_mib
from report_notebook import pooled_fresh_and_floor, prepared_cells, report_notebook, start_serve
from serve import stop_peer

POOLS = """
[pools.plain]
kernelspec = "python3"
launcher = "fork"
size = 3
[pools.box]
kernelspec = "python3"
launcher = "fork"
size = 3
isolation = "sandbox"
[pools.box.sandbox]
roots = ["{root}"]
"""
POOL_NAMES = ("plain", "box")
LEARN_FROM = 12


def tree_pids(pid):
    """pid and every descendant (/proc/PID/task/TID/children)."""
    out, pending = [], [pid]
    while pending:
        p = pending.pop()
        out.append(p)
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    pending.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def field_kib(pid, name, field):
    """A "Field: N kB" line of /proc/PID/NAME (smaps_rollup, status); 0 if the process is gone."""
    try:
        with open("/proc/%d/%s" % (pid, name)) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory(pid):
    """(PSS, private, page tables) of the kernel's process tree, MiB. PSS splits each page shared
    with the zygote among its mappers, so a tree of more mappers (the sandbox's outer process is
    a waiting copy of the zygote) is charged more of the same pages: private memory and page
    tables are what a kernel adds to the host."""
    pids = tree_pids(pid)
    pss = sum(field_kib(p, "smaps_rollup", "Pss") for p in pids) / 1024
    private = sum(private_mib(p) for p in pids if os.path.exists("/proc/%d" % p))
    tables = sum(field_kib(p, "status", "VmPTE") for p in pids) / 1024
    return pss, private, tables


def sandbox_bench(b):
    quick = b.args.quick
    runs = 7 if quick else 21
    root = tempfile.mkdtemp(prefix="kpool-bench-sandbox-")
    os.chmod(root, 0o1777)
    nb = os.path.join(root, "report.ipynb")
    report_notebook(nb)
    d = Daemon(b.kpoold, POOLS.replace("{root}", root))
    cli = os.path.join(b.args.build, "kpool")
    proc, url = start_serve(cli, d, root)

    def settle(pool, n=3):
        d.wait_warm(pool, n, timeout=600)
        time.sleep(0.3)

    def timed(args):
        t = time.perf_counter()
        r = subprocess.run(args, capture_output=True)
        assert r.returncode == 0, r.stderr
        return (time.perf_counter() - t) * 1000

    try:
        serve_ms = {p: [] for p in POOL_NAMES}
        exec_ms = {p: [] for p in POOL_NAMES}
        exec_cwd_ms = {p: [] for p in POOL_NAMES}  # the sandbox's working directory bound at acquire
        floor_exec = []
        # Both pools learn what the notebook imports (scenario 19's learning, inside the sandbox
        # too), their zygotes are rebuilt, and the pages kernels write are learned again.
        for _ in range(LEARN_FROM):
            for pool in POOL_NAMES:
                settle(pool)
                requests.get(url + "/v1/run/report.ipynb?kernel=" + pool, timeout=120)
        end = time.monotonic() + 300
        for pool in POOL_NAMES:
            while time.monotonic() < end:
                zygote = d.pool(pool)["zygote"]
                if {"numpy", "pandas", "matplotlib.pyplot"} <= set(zygote["preload"]["preloaded"]) and \
                        not zygote["rebuilding"]:
                    break
                time.sleep(0.5)
        for _ in range(LEARN_FROM // 2):
            for pool in POOL_NAMES:
                settle(pool)
                requests.get(url + "/v1/run/report.ipynb?kernel=" + pool, timeout=120)
        learned = {pool: sorted(d.pool(pool)["zygote"]["preload"]["preloaded"]) for pool in POOL_NAMES}
        for _ in range(runs):
            for pool in POOL_NAMES:
                settle(pool)
                t = time.perf_counter()
                r = requests.get(url + "/v1/run/report.ipynb?region=south&kernel=" + pool, timeout=120)
                assert r.status_code == 200 and '"sales"' in r.text, (r.status_code, r.text[:300])
                serve_ms[pool].append((time.perf_counter() - t) * 1000)
                settle(pool)
                exec_ms[pool].append(timed([cli, "--endpoint", d.endpoint, "exec", "--pool", pool, "pass"]))
                settle(pool)
                exec_cwd_ms[pool].append(timed([cli, "--endpoint", d.endpoint, "exec", "--pool", pool, "--cwd", root,
                                                "pass"]))
            floor_exec.append(timed([cli, "--version"]))
        cells = prepared_cells(cli, nb, root)
        passes = {p: [] for p in POOL_NAMES}
        for _ in range(3 if quick else 7):
            for pool in POOL_NAMES:
                settle(pool)
                passes[pool].append(pooled_fresh_and_floor(d, pool, cells))
        memory = {}
        for pool in POOL_NAMES:
            settle(pool)
            warm = [k for k in d.rpc(op="status")["kernels"] if k["pool"] == pool and k["state"] == "warm"]
            trees = [tree_memory(k["pid"]) for k in warm]
            memory[pool] = {"pss_mib": statistics.median(t[0] for t in trees),
                            "private_mib": statistics.median(t[1] for t in trees),
                            "page_tables_mib": statistics.median(t[2] for t in trees),
                            "processes": len(tree_pids(warm[0]["pid"]))}
        refill = {p: [] for p in POOL_NAMES}
        for _ in range(3 if quick else 5):
            for pool in POOL_NAMES:
                assert d.rpc(op="resize", pool=pool, size=0)["ok"]
                end = time.monotonic() + 60
                # Every kernel gone, stopping ones too: a quiet machine (kpool serve's spare stays
                # leased: not one to wait for).
                while time.monotonic() < end and any(k["pool"] == pool and k["state"] != "leased"
                                                     for k in d.rpc(op="status")["kernels"]):
                    time.sleep(0.1)
                time.sleep(0.5)
                t = time.perf_counter()
                assert d.rpc(op="resize", pool=pool, size=8)["ok"]
                d.wait_warm(pool, 8, timeout=600)
                refill[pool].append(8 / (time.perf_counter() - t))
                assert d.rpc(op="resize", pool=pool, size=3)["ok"]
    finally:
        stop_peer(proc)
        d.close()

    def p50(values):
        return percentile(values, 50)

    b.md("## 20. What a sandbox costs: a sandboxed fork pool beside a plain one (issue #48)", "",
         "One kpoold, both pools forked from zygotes, every measurement interleaved pool by pool; "
         "%d requests each. Target: sandboxed /v1/run and kpool exec p50 <= 1.1x plain, refill >= 0.8x." % runs, "",
         "| | plain | sandboxed | sandboxed / plain |", "| --- | --- | --- | --- |")
    rows = [("report notebook /v1/run p50 ms", p50(serve_ms["plain"]), p50(serve_ms["box"])),
            ("`kpool exec 'pass'` p50 ms", p50(exec_ms["plain"]), p50(exec_ms["box"])),
            ("`kpool exec --cwd DIR 'pass'` p50 ms (the sandbox: DIR bound at acquire)", p50(exec_cwd_ms["plain"]),
             p50(exec_cwd_ms["box"])),
            ("the cells on a fresh kernel (kernel's own time) p50 ms",
             p50([p[0] for p in passes["plain"]]), p50([p[0] for p in passes["box"]])),
            ("the cells again on that kernel (the floor) p50 ms",
             p50([p[1] for p in passes["plain"]]), p50([p[1] for p in passes["box"]])),
            ("refill kernels/s (8 from empty), median", statistics.median(refill["plain"]),
             statistics.median(refill["box"])),
            ("memory per warm kernel, PSS of its process tree MiB (see tree_memory)", memory["plain"]["pss_mib"], memory["box"]["pss_mib"]),
            ("memory per warm kernel, private MiB", memory["plain"]["private_mib"], memory["box"]["private_mib"]),
            ("memory per warm kernel, page tables MiB", memory["plain"]["page_tables_mib"],
             memory["box"]["page_tables_mib"]),
            ("processes per warm kernel", memory["plain"]["processes"], memory["box"]["processes"])]
    for label, plain, box in rows:
        b.md("| %s | %.1f | %.1f | %.2fx |" % (label, plain, box, box / plain if plain else float("nan")))
    b.md("", "Floor for `kpool exec`: `kpool --version` p50 %.1f ms (a process start). Both pools learned "
         "their imports first (%d requests each); the same modules: %s." % (
             p50(floor_exec), LEARN_FROM, "yes" if learned["plain"] == learned["box"] else
             "no (plain %s, sandboxed %s)" % (learned["plain"], learned["box"])), "")
    b.results["sandbox"] = {"serve_ms": serve_ms, "exec_ms": exec_ms, "exec_cwd_ms": exec_cwd_ms,
                            "passes": passes, "memory": memory,
                            "refill_per_s": refill, "floor_exec_ms": floor_exec}
