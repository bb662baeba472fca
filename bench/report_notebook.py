"""bench/run.py's scenario 19: a real report notebook on pools that learn their imports (issue #35).

The notebook is an ordinary small report: a `parameters` cell; `import numpy, pandas,
matplotlib.pyplot` with `%matplotlib inline`; a DataFrame; one figure; a `response` cell with
`df.describe().to_json()`. One kpoold, two fork pools of 3 ipykernels on the same kernelspec,
side by side in one run: `plain` (preload = "off": the zygote has ipykernel only, as before
#35) and `learned` (preload = "learn", the default), which first serves 20 requests to learn
from and rebuilds its zygote. Then, alternating between the pools: `kpool serve` GET
/v1/run/report.ipynb at c=1 (p50) and c=4 (req/s), and `kpool run` as a whole process; beside
them Voila 0.4.6 (a new kernel per request), Jupyter Kernel Gateway 2.5.2 in notebook-http mode
(its seed cells, the imports, once per kernel and the endpoint cell per request on 4 shared
kernels: the shared-kernel anchor, which isolates nothing) and papermill 2.6.0 on the same
notebook (../shared/anchors). Last, the memory and refill cost of learning: each zygote's RSS, a warm
kernel's private memory (Private_Dirty + Private_Clean, smaps_rollup) and the refill rate from
empty (kernels/s), pool by pool.

And where a request's time goes: the report's cells (parameters injected as kpool run injects
them) timed by the kernel itself, from its busy status to its idle status for each cell (no
client, no transport), on a freshly acquired kernel of each pool and then again on the same
kernel: the second pass is the floor, what the notebook costs in a kernel with nothing left to
start, import, warm or fault in, below which no system that runs this notebook on a kernel can
answer. A cold-started ipykernel (jupyter_client, what Voila and papermill start per request)
interleaved with them. kpool serve's own part of a /v1/run request is read inside the request
itself: the iopub of every kernel kpoold holds is watched, and the kernel's stamps (its first
execute_input, each cell's idle and the next execute_input, the last idle) are set against the
HTTP request's start and end. The machine's speed drifts by 20% between runs, so each figure
is paired within one kernel or one request, not a difference of medians taken apart."""
import datetime
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import nbformat
import requests
import zmq
from jupyter_client.manager import start_new_kernel
from nbformat.v4 import new_code_cell, new_notebook

from benchlib import PYTHON, Daemon, percentile, rss_mib
from refill import client_for, close_client, private_mib
from serve import ANCHORS, bounded_get, load, start_peer, stop_peer

POOLS = """
[pools.plain]
kernelspec = "python3"
launcher = "fork"
size = 3
preload = "off"
[pools.learned]
kernelspec = "python3"
launcher = "fork"
size = 3
[pools.start_pages]
kernelspec = "python3"
launcher = "fork"
size = 3
prefault = "start"
"""
# `learned` and `start_pages` differ only in which of the zygote's pages kernels pre-fault: those
# sampled kernels wrote over their whole life too (the default), or those of a kernel's start only.
POOL_NAMES = ("plain", "learned", "start_pages")
LEARNING = ("learned", "start_pages")

LEARN_FROM = 20


def report_notebook(path):
    cells = [
        new_code_cell("region = 'north'\nrows = 200", metadata={"tags": ["parameters"]}),
        new_code_cell("import numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n%matplotlib inline"),
        new_code_cell("rng = np.random.default_rng(7)\n"
                      "df = pd.DataFrame({'day': np.arange(rows), 'sales': rng.normal(100, 15, rows).round(2)})\n"
                      "df['region'] = region\ndf.head()"),
        new_code_cell("fig, ax = plt.subplots(figsize=(5, 3))\nax.plot(df['day'], df['sales'])\n"
                      "ax.set_title('sales, ' + region)\nplt.show()"),
        new_code_cell("df.describe().to_json()", metadata={"tags": ["response"]}),
    ]
    nbformat.write(new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}), path)


def prepared_cells(cli, nb, root):
    """The report's code cells with `region` injected, as `kpool run` prepares them (no kpoold needed)."""
    out = os.path.join(root, "prepared.ipynb")
    subprocess.run([cli, "run", nb, out, "--prepare-only", "-p", "region", "south"], check=True, capture_output=True)
    return [c["source"] for c in nbformat.read(out, as_version=4).cells if c["cell_type"] == "code"]


def kernel_cell_ms(kc, source):
    """The kernel's own time for one cell: its busy status to its idle status, by its header dates."""
    msg_id = kc.execute(source)
    busy = None
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id or msg["msg_type"] != "status":
            continue
        state = msg["content"]["execution_state"]
        if state == "busy":
            busy = msg["header"]["date"]
        elif state == "idle":
            assert busy is not None, "no busy status for the cell"
            kc.get_shell_msg(timeout=120)
            return (msg["header"]["date"] - busy).total_seconds() * 1000


def fresh_and_floor(kc, cells):
    """Sums of the kernel's own cell times: its first pass over the cells, and its third (steady)."""
    first = sum(kernel_cell_ms(kc, c) for c in cells)
    sum(kernel_cell_ms(kc, c) for c in cells)  # a second pass, so that the third is steady
    return first, sum(kernel_cell_ms(kc, c) for c in cells)


def pooled_fresh_and_floor(d, pool, cells):
    r = d.rpc(op="acquire", pool=pool, timeout_ms=120000)
    assert r["ok"], r
    try:
        kc = client_for(r["connection_file"])
        try:
            return fresh_and_floor(kc, cells)
        finally:
            close_client(kc)
    finally:
        d.rpc(op="release", kernel_id=r["kernel_id"])


def cold_fresh_and_floor(cells):
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        return fresh_and_floor(kc, cells)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def serve_part_ms(d, get, dispatch=None):
    """kpool serve's own part of one /v1/run request (`get()` sends it), from the kernel's stamps
    on iopub: (HTTP start to the first cell's execute_input, the gaps from each cell's idle to the
    next execute_input, the last cell's idle to the HTTP answer). Every kernel kpoold holds is
    watched (kpool serve's spares too), so whichever runs the request is seen.

    `dispatch` (a list), if given, gets the part of those that is the kernel's own dispatch: for
    each cell, from when its execute_request was both sent (kpool serve's stamp, in the parent
    header) and the kernel free (the cell before it idle) to its execute_input. ipykernel pays it
    for any client (6.17: a round trip to its control thread, the busy status, the input)."""
    ctx = zmq.Context.instance()
    subs = []
    for path in glob.glob(os.path.join(d.dir, "run", "kernels", "*", "kernel-*.json")):
        with open(path) as f:
            info = json.load(f)
        sub = ctx.socket(zmq.SUB)
        sub.linger = 0
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sep = ":" if info["transport"] == "tcp" else "-"  # jupyter_client's ipc addresses: PATH-PORT
        sub.connect("%s://%s%s%d" % (info["transport"], info["ip"], sep, info["iopub_port"]))
        subs.append(sub)
    time.sleep(0.3)  # the subscriptions reach the kernels
    t0 = time.time()
    get()
    t1 = time.time()
    time.sleep(0.2)
    events = []  # (stamp, kind, parent msg_id)
    for sub in subs:
        while sub.poll(0):
            parts = sub.recv_multipart()
            i = parts.index(b"<IDS|MSG>")
            header, parent, content = json.loads(parts[i + 2]), json.loads(parts[i + 3]), json.loads(parts[i + 5])
            kind = header["msg_type"] if header["msg_type"] != "status" else content["execution_state"]
            stamp = datetime.datetime.fromisoformat(header["date"].replace("Z", "+00:00")).timestamp()
            sent = parent.get("date")
            events.append((stamp, kind, parent.get("msg_id"),
                           datetime.datetime.fromisoformat(sent.replace("Z", "+00:00")).timestamp() if sent else None))
        sub.close()
    inputs = sorted((t, m) for t, k, m, _ in events if k == "execute_input")
    idle = {m: t for t, k, m, _ in events if k == "idle"}
    sent = {m: s for _, k, m, s in events if k == "execute_input"}
    ends = [idle[m] for _, m in inputs]
    gaps = sum(inputs[i + 1][0] - ends[i] for i in range(len(inputs) - 1))
    if dispatch is not None:
        dispatch.append(1000 * sum(t - max(sent[m], ends[i - 1] if i > 0 else sent[m])
                                   for i, (t, m) in enumerate(inputs)))
    return (inputs[0][0] - t0) * 1000, gaps * 1000, (t1 - ends[-1]) * 1000


def start_serve(cli, d, root, *args):
    """A `kpool serve` in front of kpoold `d` running the notebooks under `root` (no token, a free
    loopback port, 60 s to wait for a kernel): (process, url). Its stderr is drained."""
    proc = subprocess.Popen([cli, "--endpoint", d.endpoint, "serve", "--no-token", "--listen", "127.0.0.1:0",
                             "--root", root, "--queue-timeout", "60", *args], stderr=subprocess.PIPE, text=True)
    url = "http://" + re.search(r"://(127\.0\.0\.1:\d+)/", proc.stderr.readline()).group(1)
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, url


def report_bench(b):
    quick = b.args.quick
    runs = 7 if quick else 21
    root = tempfile.mkdtemp(prefix="kpool-bench-report-")
    nb = os.path.join(root, "report.ipynb")
    report_notebook(nb)
    d = Daemon(b.kpoold, POOLS)
    cli = os.path.join(b.args.build, "kpool")
    proc, url = start_serve(cli, d, root)
    lines = []
    times = {}
    try:
        for pool in POOL_NAMES:
            d.wait_warm(pool, 3, timeout=600)

        def run_once(pool):
            t = time.perf_counter()
            r = requests.get(url + "/v1/run/report.ipynb?region=south&kernel=" + pool, timeout=120)
            assert r.status_code == 200 and '"sales"' in r.text, (r.status_code, r.text[:300])
            return (time.perf_counter() - t) * 1000

        # What the learning pools learn from: ordinary requests.
        for _ in range(LEARN_FROM):
            for pool in LEARNING:
                run_once(pool)
        end = time.monotonic() + 300
        for pool in LEARNING:
            while time.monotonic() < end:
                pre = d.pool(pool)["zygote"]["preload"]
                if {"numpy", "pandas", "matplotlib.pyplot"} <= set(pre["preloaded"]) and \
                        not d.pool(pool)["zygote"]["rebuilding"]:
                    break
                time.sleep(0.5)
        # The rebuilt zygotes' pages: learned again from the kernels forked from them.
        for _ in range(LEARN_FROM // 2):
            for pool in LEARNING:
                run_once(pool)
        learned_status = d.pool("learned")
        for pool in POOL_NAMES:
            d.wait_warm(pool, 3, timeout=600)

        def settle(pool):
            d.wait_warm(pool, 3, timeout=600)
            time.sleep(0.5)

        serve_ms = {pool: [] for pool in POOL_NAMES}
        run_ms = {pool: [] for pool in POOL_NAMES}
        out_dir = tempfile.mkdtemp(prefix="kpool-bench-report-run-")
        for i in range(runs):
            for pool in POOL_NAMES:
                settle(pool)
                serve_ms[pool].append(run_once(pool))
                settle(pool)
                t = time.perf_counter()
                r = subprocess.run([cli, "--endpoint", d.endpoint, "run", nb, os.path.join(out_dir, "%d.ipynb" % i),
                                    "-k", pool, "-p", "region", "south"], capture_output=True)
                assert r.returncode == 0, r.stderr
                run_ms[pool].append((time.perf_counter() - t) * 1000)
        # The kernel's own time for the cells: a fresh kernel's first pass, then the same kernel
        # again (the floor). Each pool settled first: no refill of an earlier lease runs beside; the
        # refill behind this acquire runs beside the first pass, as behind kpool run's (measured on
        # 2026-12-05 no slower than with the refill done first: 199 against 217 ms, 10 each).
        cells = prepared_cells(cli, nb, root)
        passes = {pool: [] for pool in POOL_NAMES}
        cold_passes = []
        for i in range(5 if quick else 9):
            for pool in POOL_NAMES:
                settle(pool)
                passes[pool].append(pooled_fresh_and_floor(d, pool, cells))
            # Interleaved with the pools' kernels, so that the floors compare like with like.
            cold_passes.append(cold_fresh_and_floor(cells))
        serve_parts = []
        for i in range(5 if quick else 9):
            settle("learned")
            serve_parts.append(serve_part_ms(d, lambda: run_once("learned")))
        rates = {}
        for pool in POOL_NAMES:
            settle(pool)
            n = 8 if quick else 24

            def one(s, pool=pool):
                r = s.get(url + "/v1/run/report.ipynb?kernel=" + pool, timeout=120)
                return r.status_code
            seconds, results = load(n, 4, one)
            rates[pool] = sum(1 for _, st in results if st == 200) / seconds
        # Memory and refill, pool by pool.
        memory = {}
        for pool in POOL_NAMES:
            settle(pool)
            st = d.pool(pool)
            warm = [k for k in d.rpc(op="status")["kernels"] if k["pool"] == pool and k["state"] == "warm"]
            memory[pool] = {"zygote_rss_mib": rss_mib(st["zygote"]["pid"]),
                            "hot_pages": st["zygote"]["hot_pages"],
                            "hot_pages_kernels": st["zygote"]["hot_pages_kernels"],
                            "kernel_private_mib": statistics.median(private_mib(k["pid"]) for k in warm)}
            assert d.rpc(op="resize", pool=pool, size=0)["ok"]
            end = time.monotonic() + 60
            while d.pool(pool)["warm"] + d.pool(pool)["starting"] > 0 and time.monotonic() < end:
                time.sleep(0.1)
            t = time.perf_counter()
            assert d.rpc(op="resize", pool=pool, size=8)["ok"]
            d.wait_warm(pool, 8, timeout=600)
            memory[pool]["refill_per_s"] = 8 / (time.perf_counter() - t)
            assert d.rpc(op="resize", pool=pool, size=3)["ok"]
        times = {"serve_ms": serve_ms, "run_ms": run_ms, "rates": rates, "memory": memory, "passes": passes,
                 "cold_passes": cold_passes, "serve_parts": serve_parts}
    finally:
        stop_peer(proc)
        d.close()
    # The peers, on the same notebook, after kpool's pools are gone (they would share the cores).
    peers = {}
    from notebook_server import free_port
    if os.path.isdir(os.path.join(ANCHORS, "voila")):
        port = free_port()
        voila = start_peer("voila", ["voila", "report.ipynb", "--no-browser", "--port=%d" % port,
                                     "--Voila.ip=127.0.0.1", "--Voila.connection_dir_root=" + root], root, port)
        try:
            def voila_one(s):
                status, text = bounded_get(s, "http://127.0.0.1:%d/" % port)
                return status if "sales" in text or status != 200 else 500
            load(1, 1, voila_one)
            seconds, results = load(5 if quick else 9, 1, voila_one)
            ok = [ms for ms, st in results if st == 200]
            peers["Voila 0.4.6, a new kernel per request, c=1"] = {
                "p50_ms": percentile(ok, 50) if ok else None, "rate": len(ok) / seconds}
        finally:
            stop_peer(voila)
    if os.path.isdir(os.path.join(ANCHORS, "kernel_gateway")):
        # The shared-kernel anchor: the imports seeded once per kernel, the rest per request.
        kg_nb = os.path.join(root, "kg_report.ipynb")
        nbformat.write(new_notebook(cells=[
            new_code_cell("import io\nimport numpy as np\nimport pandas as pd\nimport matplotlib\nmatplotlib.use('Agg')\n"
                          "import matplotlib.pyplot as plt"),
            new_code_cell("# GET /report\nrng = np.random.default_rng(7)\n"
                          "df = pd.DataFrame({'day': np.arange(200), 'sales': rng.normal(100, 15, 200).round(2)})\n"
                          "fig, ax = plt.subplots(figsize=(5, 3))\nax.plot(df['day'], df['sales'])\n"
                          "fig.savefig(io.BytesIO(), format='png')\nplt.close(fig)\nprint(df.describe().to_json())")],
            metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}), kg_nb)
        port = free_port()
        kg = start_peer("kernel_gateway", ["kernel_gateway", "--KernelGatewayApp.api=kernel_gateway.notebook_http",
                                           "--KernelGatewayApp.seed_uri=" + kg_nb, "--KernelGatewayApp.prespawn_count=4",
                                           "--KernelGatewayApp.ip=127.0.0.1", "--port=%d" % port], root, port)
        try:
            def kg_one(s):
                status, text = bounded_get(s, "http://127.0.0.1:%d/report" % port)
                return status if '"sales"' in text or status != 200 else 500
            load(2, 1, kg_one)
            seconds, results = load(7 if quick else 21, 1, kg_one)
            ok = [ms for ms, st in results if st == 200]
            peers["Kernel Gateway 2.5.2 notebook-http (seeded, 4 shared kernels), c=1"] = {
                "p50_ms": percentile(ok, 50) if ok else None, "rate": len(ok) / seconds}
        finally:
            stop_peer(kg)
    if os.path.isdir(os.path.join(ANCHORS, "papermill")):
        env = dict(os.environ, PYTHONPATH=os.path.join(ANCHORS, "papermill"))
        pm = []
        for i in range(3 if quick else 7):
            t = time.perf_counter()
            subprocess.run([PYTHON, "-m", "papermill", nb, os.path.join(root, "pm%d.ipynb" % i), "-p", "region", "south",
                            "--no-progress-bar"], env=env, check=True, capture_output=True)
            pm.append((time.perf_counter() - t) * 1000)
        peers["papermill 2.6.0, whole process"] = {"p50_ms": statistics.median(pm), "rate": None}
    shutil.rmtree(root, ignore_errors=True)

    serve_ms, run_ms, rates, memory = times["serve_ms"], times["run_ms"], times["rates"], times["memory"]
    passes, cold_passes, serve_parts = times["passes"], times["cold_passes"], times["serve_parts"]
    p50 = statistics.median
    pre = learned_status["preload"]
    def row(label, values, fmt, better_lower):
        plain, learned, start = (values[pool] for pool in POOL_NAMES)
        ratio = (lambda a, b: a / b) if better_lower else (lambda a, b: b / a)
        return ("| %s | " + " | ".join([fmt, "**" + fmt + "**", fmt]) + " | %.2fx | %.2fx |") % (
            label, plain, learned, start, ratio(plain, learned), ratio(start, learned))

    mem = lambda key: {pool: memory[pool][key] for pool in POOL_NAMES}
    lines += ["| path | plain pool (preload off) | learned pool | learned, start pages only "
              "(prefault = \"start\") | learned vs plain | learned vs start pages only |",
              "| --- | --- | --- | --- | --- | --- |",
              row("`kpool serve` GET /v1/run/report.ipynb, c=1, p50 ms (%d runs)" % runs,
                  {pool: p50(serve_ms[pool]) for pool in POOL_NAMES}, "%.1f", True),
              row("`kpool serve`, c=4, req/s", rates, "%.2f", False),
              row("`kpool run report.ipynb`, whole process, p50 ms",
                  {pool: p50(run_ms[pool]) for pool in POOL_NAMES}, "%.1f", True),
              row("zygote RSS, MiB", mem("zygote_rss_mib"), "%.1f", True),
              row("a warm kernel's private memory, MiB (median)", mem("kernel_private_mib"), "%.1f", True),
              row("refill from empty to 8, kernels/s", mem("refill_per_s"), "%.1f", False),
              "| pages each kernel pre-faults (from N sampled lives) | %s |" % " | ".join(
                  "%s (%s)" % (memory[pool]["hot_pages"], memory[pool]["hot_pages_kernels"]) for pool in POOL_NAMES),
              ""]
    fresh = {pool: p50(f for f, _ in passes[pool]) for pool in POOL_NAMES}
    again = {pool: p50(a for _, a in passes[pool]) for pool in POOL_NAMES}
    cold_fresh, cold_again = p50(f for f, _ in cold_passes), p50(a for _, a in cold_passes)
    floor = min(list(again.values()) + [cold_again])
    lines += ["Where a request's time goes: the report's %d cells timed by the kernel (busy to idle, summed), "
              "p50 ms; the floor is the same cells again on the same kernel." % len(cells), "",
              "| kernel | its first pass (fresh) | the same cells again (floor) | fresh / floor, paired per kernel |",
              "| --- | --- | --- | --- |"]
    for pool in POOL_NAMES:
        lines.append("| %s pool | %.1f | %.1f | %.2fx |" % (pool, fresh[pool], again[pool], p50(f / a for f, a in passes[pool])))
    before, gaps, after = (p50(part[i] for part in serve_parts) for i in range(3))
    lines += ["| a cold-started ipykernel (jupyter_client) | %.1f | %.1f | %.2fx |"
              % (cold_fresh, cold_again, p50(f / a for f, a in cold_passes)), "",
              "kpool serve's own part of a `/v1/run` on the learned pool, read in each request from the kernel's "
              "stamps (p50 of %d): %.1f ms from the HTTP request to the first cell (the notebook read and "
              "parameterized, a spare kernel's lease renewed, its cwd/env/history applied, the first execute), "
              "%.1f ms between the %d cells (a cell's idle to the next one's execute_input: ZeroMQ's I/O threads "
              "and ipykernel's dispatch), %.1f ms from the last cell's idle to the answer; %.1f ms in all."
              % (len(serve_parts), before, gaps, len(cells), after, before + gaps + after), "",
              "The floor, the lowest kernel's again: %.1f ms of cells. Issue #35's targets against it: `/v1/run` "
              "<= 100 ms is %.2fx the floor, `kpool run` <= 150 ms %.2fx it (a process that also starts, "
              "acquires and writes the notebook)." % (floor, 100 / floor, 150 / floor), ""]
    if peers:
        lines += ["| peer on the same notebook | p50 ms | req/s |", "| --- | --- | --- |"]
        for label, v in peers.items():
            lines.append("| %s | %s | %s |" % (label, "%.1f" % v["p50_ms"] if v["p50_ms"] else "-",
                                              "%.2f" % v["rate"] if v["rate"] else "-"))
        lines.append("")
        voila = peers.get("Voila 0.4.6, a new kernel per request, c=1")
        if voila and voila["rate"]:
            lines.append("At c=1 the learned pool serves %.1fx Voila's requests per second (1000 / p50); "
                         "20x would need a p50 of %.1f ms, %.2fx the floor."
                         % ((1000 / p50(serve_ms["learned"])) / voila["rate"], 1000 / voila["rate"] / 20,
                            1000 / voila["rate"] / 20 / floor))
            lines.append("")
    lines.append("Learned after %d requests: %s; refused: %s; zygote grew %.1f MB; warmed: %s."
                 % (LEARN_FROM, ", ".join(pre.get("learned", [])), json.dumps(pre.get("refused", {})),
                    pre.get("growth_mb", 0), ", ".join(learned_status["zygote"]["preload"].get("warmed", []))))
    b.md("## 19. A real report notebook on a pool that learned its imports", "",
         "Three fork pools of 3 ipykernels in one kpoold, runs alternating: `plain` (preload = \"off\"), "
         "`learned` (preload = \"learn\", the default) and `start_pages` (learned too, with "
         "prefault = \"start\": no pages from sampled kernels' lives) after %d requests to learn from "
         "and %d more on the rebuilt zygotes. The notebook: a "
         "parameters cell, numpy/pandas/matplotlib with %%matplotlib inline, a DataFrame, a figure, a "
         "`response` cell (df.describe().to_json()). Peers run after kpool's pools are stopped."
         % (LEARN_FROM, LEARN_FROM // 2), "",
         *lines, "")
    b.results["report_notebook"] = {"serve_ms": serve_ms, "run_ms": run_ms, "rates": rates, "memory": memory,
                                    "peers": peers, "learned": pre, "kernel_cells_ms": passes,
                                    "cold_kernel_cells_ms": cold_passes, "serve_part_ms": serve_parts}
