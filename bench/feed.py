"""bench/run.py's scenario 22: clients that keep kpool serve busy without flooding it (issue #50).

One kpoold with a fork pool of 4 ipykernels, one kpool serve in front of it with its production
defaults (--queue-timeout 5, --max-queue 64, one spare), and 400 one-cell jobs of ~40 ms of work
each (`time.sleep(0.04)`; 100 in quick mode), sent by each client in turn, the pool warm again
before each:

- a synchronous loop (requests, one Session, each job in turn, a 429 waited out);
- a naive asyncio client (httpx, every job in flight at once, a 429 waited out and sent again);
- `ab` at fixed concurrency 1, 2, 4, 8 and 16 (what the server can do: its capacity is the best
  rate of 200s among these);
- `kpool feed` (the adaptive policy, HTTP/1.1 keep-alive);
- kpool.AsyncServeClient.map and kpool.ServeClient.map (the same policy in Python);
- `kpool feed` over TLS, HTTP/1.1 against HTTP/2 (a second kpool serve with a self-signed
  certificate);
- `kpool run --url` over 100 one-cell notebooks (--output-dir), beside `ab` on /v1/run's upload.

For each: jobs/s, its ratio to the capacity, the 429s it took (as a share of the jobs), and the
latency p50/p99 of a job (from its first send to its answer, retries included). The floor is the
kernels' own work: 400 x 40 ms over 4 kernels."""
import asyncio
import json
import os
import re
import subprocess
import tempfile
import threading
import time

import nbformat
import requests
from nbformat.v4 import new_code_cell, new_notebook

from benchlib import Daemon, percentile
from serve import stop_peer

POOLS = """
[pools.feed]
kernelspec = "python3"
launcher = "fork"
size = 4
"""
CODE = "import time; time.sleep(0.04)"
WORK_MS = 40


def start_serve(cli, d, *args):
    """A kpool serve with its default limits (no token, a free loopback port): (process, url)."""
    proc = subprocess.Popen([cli, "--endpoint", d.endpoint, "serve", "--no-token", "--listen", "127.0.0.1:0",
                             "--kernel", "feed", *args], stderr=subprocess.PIPE, text=True)
    url = re.search(r"(https?)://(127\.0\.0\.1:\d+)/", proc.stderr.readline())
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, "%s://%s" % (url.group(1), url.group(2))


def row(name, n, seconds, latencies, throttled, capacity):
    rate = n / seconds
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    return {"client": name, "jobs": n, "seconds": seconds, "rate": rate, "ratio": rate / capacity if capacity else None,
            "429": throttled, "429_share": throttled / n, "p50_ms": p50, "p99_ms": p99}


def sync_loop(url, n):
    latencies, throttled = [], 0
    start = time.perf_counter()
    with requests.Session() as s:
        for _ in range(n):
            t = time.perf_counter()
            while True:
                r = s.post(url + "/v1/exec", json={"code": CODE}, timeout=120)
                if r.status_code != 429:
                    break
                throttled += 1
                time.sleep(int(r.headers.get("retry-after", "1")))
            assert r.status_code == 200, r.text
            latencies.append((time.perf_counter() - t) * 1000)
    return time.perf_counter() - start, latencies, throttled


def naive_async(url, n):
    import httpx

    async def main():
        throttled = 0
        async with httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=n)) as c:
            async def one():
                nonlocal throttled
                t = time.perf_counter()
                while True:
                    r = await c.post(url + "/v1/exec", json={"code": CODE})
                    if r.status_code != 429:
                        break
                    throttled += 1
                    await asyncio.sleep(int(r.headers.get("retry-after", "1")))
                assert r.status_code == 200, r.text
                return (time.perf_counter() - t) * 1000
            start = time.perf_counter()
            latencies = await asyncio.gather(*(one() for _ in range(n)))
            return time.perf_counter() - start, list(latencies), throttled
    return asyncio.run(main())


def ab(url, n, c, body_file, path="/v1/exec"):
    """`ab` at concurrency c: (rate of 200s, their p50 ms, non-2xx answers)."""
    out = subprocess.run(["ab", "-q", "-n", str(n), "-c", str(c), "-k", "-p", body_file, "-T", "application/json",
                          url + path], capture_output=True, text=True, timeout=1200).stdout
    seconds = float(re.search(r"Time taken for tests:\s+([\d.]+)", out).group(1))
    non2xx = int(re.search(r"Non-2xx responses:\s+(\d+)", out).group(1)) if "Non-2xx" in out else 0
    p50 = float(re.search(r"\n\s+50%\s+(\d+)", out).group(1))
    return (n - non2xx) / seconds, p50, non2xx


def feed_cli(cli, url, jobs_file, *args):
    out = subprocess.run([cli, "feed", jobs_file, "--url", url, "--no-progress", *args], capture_output=True,
                         text=True, timeout=1200)
    stats = json.loads(out.stderr.strip().splitlines()[-1])
    assert stats["jobs"]["ok"] == stats["jobs"]["total"], out.stderr[-2000:]
    latencies = [a["ms"] for a in map(json.loads, out.stdout.splitlines())]  # from the first send
    return stats, latencies


def feed_bench(b):
    quick = b.args.quick
    n = 100 if quick else 400
    n_notebooks = 40 if quick else 100
    cli = os.path.join(b.args.build, "kpool")
    work = tempfile.mkdtemp(prefix="kpool-bench-feed-")
    body = os.path.join(work, "body.json")
    with open(body, "w") as f:
        json.dump({"code": CODE}, f)
    jobs_file = os.path.join(work, "jobs.jsonl")
    with open(jobs_file, "w") as f:
        f.writelines(json.dumps({"id": i, "code": CODE}) + "\n" for i in range(n))
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert], check=True,
                   capture_output=True)
    nb_dir = os.path.join(work, "notebooks")
    os.makedirs(nb_dir)
    nb = new_notebook(cells=[new_code_cell(CODE)], metadata={"kernelspec": {
        "name": "python3", "language": "python", "display_name": "Python 3"}})
    notebooks = []
    for i in range(n_notebooks):
        notebooks.append(os.path.join(nb_dir, "n%03d.ipynb" % i))
        nbformat.write(nb, notebooks[-1])
    upload = os.path.join(work, "upload.json")
    with open(upload, "w") as f:
        json.dump({"notebook": json.loads(nbformat.writes(nb)), "kernel": "feed"}, f)

    d = Daemon(b.kpoold, POOLS)
    serve, url = start_serve(cli, d)
    tls, tls_url = start_serve(cli, d, "--cert", cert, "--key", key)
    rows, capacity_rows = [], []
    try:
        def settle():
            d.wait_warm("feed", 4, timeout=600)
            time.sleep(1.0)

        settle()
        for c in (1, 2, 4, 8, 16):  # the server's capacity first: the ratios are to it
            settle()
            rate, p50, non2xx = ab(url, n, c, body)
            capacity_rows.append({"c": c, "rate": rate, "p50_ms": p50, "non2xx": non2xx})
        capacity = max(r["rate"] for r in capacity_rows)

        settle()
        seconds, lat, throttled = sync_loop(url, n)
        rows.append(row("synchronous loop (requests)", n, seconds, lat, throttled, capacity))
        settle()
        seconds, lat, throttled = naive_async(url, n)
        rows.append(row("naive asyncio, all %d in flight (httpx)" % n, n, seconds, lat, throttled, capacity))
        for c in capacity_rows:
            rows.append({"client": "ab -c %d" % c["c"], "jobs": n, "rate": c["rate"], "ratio": c["rate"] / capacity,
                         "429": c["non2xx"], "429_share": c["non2xx"] / n, "p50_ms": c["p50_ms"], "p99_ms": None})
        settle()
        stats, lat = feed_cli(cli, url, jobs_file)
        feed_row = row("**kpool feed**", n, stats["seconds"], lat, stats["responses"].get("429", 0), capacity)
        feed_row["window"] = stats["in_flight"]["window"]
        rows.append(feed_row)

        kp = b.kpool
        settle()

        async def amap():
            async with kp.AsyncServeClient(url) as c:
                t = time.perf_counter()
                results = [r async for r in c.map({"id": i, "code": CODE} for i in range(n))]
                return time.perf_counter() - t, results, c.stats
        seconds, results, stats = asyncio.run(amap())
        assert all(r.ok for r in results)
        rows.append(row("AsyncServeClient.map", n, seconds, [r.ms for r in results], stats["responses"].get("429", 0),
                        capacity))
        settle()
        with kp.ServeClient(url) as c:
            t = time.perf_counter()
            results = list(c.map({"id": i, "code": CODE} for i in range(n)))
            seconds, stats = time.perf_counter() - t, c.stats
        assert all(r.ok for r in results)
        rows.append(row("ServeClient.map (threads)", n, seconds, [r.ms for r in results],
                        stats["responses"].get("429", 0), capacity))
        tls_rows = []
        for label, extra in (("HTTP/1.1 keep-alive", []), ("HTTP/2, one connection", ["--http2"])):
            settle()
            stats, lat = feed_cli(cli, tls_url, jobs_file, "--cacert", cert, *extra)
            tls_rows.append(row("kpool feed over TLS, " + label, n, stats["seconds"], lat,
                                stats["responses"].get("429", 0), capacity))
        settle()
        out_dir = os.path.join(work, "done")
        t = time.perf_counter()
        r = subprocess.run([cli, "--url", url, "run", *notebooks, "--output-dir", out_dir, "-k", "feed"],
                           capture_output=True, text=True, timeout=1200)
        run_seconds = time.perf_counter() - t
        assert r.returncode == 0, r.stderr[-2000:]
        run_capacity = 0.0
        for c in (4, 8):
            settle()
            run_capacity = max(run_capacity, ab(url, n_notebooks, c, upload, "/v1/run?format=outputs")[0])
    finally:
        stop_peer(serve)
        stop_peer(tls)
        d.close()

    def fmt(v, pattern="%.1f"):
        return "-" if v is None else pattern % v

    lines = ["Capacity: the best rate of 200s from `ab` at fixed concurrency, **%.1f jobs/s** (c=%d). "
             "The floor, the kernels' own work: %d x %d ms over 4 kernels = %.1f s (%.0f jobs/s); the pool's "
             "refill (a fresh kernel per job) holds the rate below it." %
             (capacity, max(capacity_rows, key=lambda r: r["rate"])["c"], n, WORK_MS, n * WORK_MS / 4000,
              4000 / WORK_MS), "",
             "| client | jobs/s | x capacity | 429s (share of jobs) | p50 ms | p99 ms | p99/p50 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows + tls_rows:
        lines.append("| %s | %.1f | %s | %d (%.0f%%) | %s | %s | %s |" % (
            r["client"], r["rate"], fmt(r["ratio"], "%.2fx"), r["429"], 100 * r["429_share"], fmt(r["p50_ms"]),
            fmt(r["p99_ms"]), fmt(r["p99_ms"] / r["p50_ms"] if r["p99_ms"] else None, "%.1fx")))
    lines += ["", "kpool feed's window at the end: %d. `kpool run --url` over %d one-cell notebooks: %.1f s, "
              "**%.1f notebooks/s**, against `ab` on POST /v1/run (the notebook uploaded) at c=4 and 8: %.1f/s "
              "(**%.2fx**)." % (feed_row["window"], n_notebooks, run_seconds, n_notebooks / run_seconds, run_capacity,
                                n_notebooks / run_seconds / run_capacity), ""]
    b.md("## 22. Clients that keep kpool serve busy without flooding it", "",
         "%d one-cell jobs (~%d ms each) through kpool serve (its defaults) on a fork pool of 4, each client in "
         "turn, the pool warm before each." % (n, WORK_MS), "", *lines)
    b.results["feed"] = {"capacity": capacity, "ab": capacity_rows, "clients": rows, "tls": tls_rows,
                         "run_url_seconds": run_seconds, "run_url_notebooks": n_notebooks, "run_capacity": run_capacity}
