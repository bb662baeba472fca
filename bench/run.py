#!/usr/bin/python3
"""kpool's benchmarks: every scenario side by side with its baseline, in one run on one machine.

    bench/run.py [--build build] [--quick] [--only 1,2,...] [--out DIR]

Writes DIR/report.md (a markdown table per scenario, with ratios to the baseline),
DIR/results.json and DIR/latency.png (default DIR: bench/results/<time>, not committed).
See bench/README.md for what each scenario models and the targets."""
import argparse
import concurrent.futures
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import nbformat
from jupyter_client import BlockingKernelClient, KernelManager

import loadgen
import multi
import batch
import burst
import first_result
import notebook_server
import notebooks
import refill
import serve
import gateway
import report_notebook
import sandbox
import cells_ahead
import feed
from benchlib import (PYTHON, ROOT, Daemon, cold_start_seconds, cpu_seconds, install_python_package, percentile,
                      rss_mib, summary)


class Bench:
    def __init__(self, args):
        self.args = args
        self.kpoold = os.path.join(args.build, "kpoold")
        self.tool = os.path.join(args.build, "kpool-bench")
        self.report = []
        self.results = {}
        self.latencies = {}  # label -> list of ms, for the plot

    def md(self, *lines):
        self.report.extend(lines)
        for line in lines:
            print(line, flush=True)

    def kpool_bench(self, endpoint, *args):
        out = subprocess.run([self.tool, "--endpoint", endpoint, "--json"] + list(args),
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    # 1 -------------------------------------------------------------------------------------
    def warm_acquire(self):
        n = 100 if self.args.quick else 200
        echo_endpoint = "ipc://%s/echo" % tempfile.mkdtemp(prefix="kpool-echo-")
        echo = subprocess.Popen([self.tool, "echo-server", echo_endpoint])
        d = Daemon(self.kpoold, '[pools.fake]\nkernelspec = "fake"\nsize = %d\nmax_starting = 4\n' % n)
        rows = []
        try:
            for c in (1, 10, 50):
                d.wait_warm("fake", n)
                time.sleep(1.0)  # let the last refills' CPU settle
                acq = self.kpool_bench(d.endpoint, "-c", str(c), "-n", str(n), "--timeout-ms", "0",
                                       "acquire", "fake")
                base = self.kpool_bench(echo_endpoint, "-c", str(c), "-n", str(max(n, 2000)), "ping")
                for k in d.rpc(op="status")["kernels"]:
                    if k["state"] == "leased":
                        d.rpc(op="release", kernel_id=k["id"])
                self.latencies["acquire c=%d" % c] = acq["latencies_ms"]
                self.latencies["bare echo c=%d" % c] = base["latencies_ms"]
                rows.append((c, acq, base))
        finally:
            d.close()
            echo.kill()
        self.md("## 1. Warm acquire latency", "",
                "A pool of %d warm (fake) kernels; each client acquires, the pool refills behind "
                "it. Baseline: a bare ZeroMQ ROUTER echo over ipc at the same concurrency." % n, "",
                "| concurrency | acquires | failures | p50 ms | p90 ms | p99 ms | max ms | echo p50 ms | echo p99 ms | p50 ratio |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for c, a, b in rows:
            self.md("| %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2fx |" % (
                c, a["requests"], a["failures"], a["p50_ms"], a["p90_ms"], a["p99_ms"], a["max_ms"],
                b["p50_ms"], b["p99_ms"], a["p50_ms"] / b["p50_ms"]))
        self.md("")
        self.results["warm_acquire"] = [{"c": c, "acquire": {k: v for k, v in a.items() if k != "latencies_ms"},
                                         "echo": {k: v for k, v in b.items() if k != "latencies_ms"}}
                                        for c, a, b in rows]

    # 2 -------------------------------------------------------------------------------------
    def usable_kernel(self):
        runs = 3 if self.args.quick else 7
        cold, pooled = [], []
        for _ in range(runs):
            cold.append(cold_start_seconds("python3"))
        d = Daemon(self.kpoold, "[pools.python3]\nsize = 2\n")
        try:
            for _ in range(runs):
                d.wait_warm("python3", 2)
                t = time.perf_counter()
                r = d.rpc(op="acquire", pool="python3", timeout_ms=60000)
                kc = BlockingKernelClient()
                kc.load_connection_file(r["connection_file"])
                kc.start_channels()
                kc.kernel_info(reply=True, timeout=60)
                pooled.append(time.perf_counter() - t)
                kc.stop_channels()
                kc.context.destroy(linger=0)
                d.rpc(op="release", kernel_id=r["kernel_id"])
        finally:
            d.close()
        ratio = statistics.median(cold) / statistics.median(pooled)
        self.md("## 2. Time to a usable kernel (ipykernel)", "",
                "| path | runs | p50 s | max s |", "| --- | --- | --- | --- |",
                "| jupyter_client KernelManager.start_kernel + wait_for_ready | %d | %.3f | %.3f |"
                % (runs, statistics.median(cold), max(cold)),
                "| kpoold acquire + connect + kernel_info_reply | %d | %.3f | %.3f |"
                % (runs, statistics.median(pooled), max(pooled)),
                "", "Ratio (p50): kpool is **%.1fx** faster." % ratio, "")
        self.results["usable_kernel"] = {"cold_s": cold, "pooled_s": pooled, "ratio": ratio}

    # 3 -------------------------------------------------------------------------------------
    def sustained(self):
        rate = self.args.rate
        duration = self.args.duration or (15 if self.args.quick else 60)
        count = int(rate * duration)

        def arrivals(one_request):
            """Calls one_request at a fixed rate; returns (latencies in ms, errors, seconds)."""
            usable, errors = [], []
            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(max_workers=64) as ex:
                futures = []
                for i in range(count):
                    delay = started + i / rate - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    futures.append(ex.submit(one_request))
                for f in futures:
                    try:
                        usable.append(f.result())
                    except Exception as e:  # noqa: BLE001 - counted and reported
                        errors.append(repr(e))
            return usable, errors, time.perf_counter() - started

        def use(kc, t):
            kc.start_channels()
            try:
                kc.kernel_info(reply=True, timeout=120)
                ready_ms = (time.perf_counter() - t) * 1000
                # Not timed: make sure our iopub subscription is live before running the cell
                # (a fresh SUB socket can miss the first messages).
                kc.wait_for_ready(timeout=120)
                kc.execute_interactive("sum(range(100))", timeout=120, output_hook=lambda msg: None)
            finally:
                kc.stop_channels()
                kc.context.destroy(linger=0)  # each client made its own context: free its fds
            return ready_ms

        rows, first_errors, acquire_ms = [], [], {}
        launcher = self.args.launcher
        for size in (2, 4, 8):
            d = Daemon(self.kpoold, '[pools.python3]\nsize = %d\nmax_starting = 2\nlauncher = "%s"\n'
                       % (size, launcher))
            try:
                d.wait_warm("python3", size)
                while launcher == "fork" and not d.pool("python3").get("zygote_ready"):
                    time.sleep(0.05)
                client = self.kpool.Client(d.endpoint)
                acquire_ms[size] = []

                def pooled_request():
                    t = time.perf_counter()
                    k = client.acquire("python3", timeout_ms=120000)
                    acquire_ms[size].append((time.perf_counter() - t) * 1000)
                    kc = BlockingKernelClient()
                    kc.load_connection_file(k.connection_file)
                    try:
                        return use(kc, t)
                    finally:
                        client.release(k.kernel_id)

                usable, errors, elapsed = arrivals(pooled_request)
                first_errors.extend(errors[:1])
                c = d.pool("python3")["counters"]
                made_warm = c["acquired"] + d.pool("python3")["warm"] - size
                rows.append(("kpool (%s), pool size %d" % (launcher, size), summary(usable), c["waited"], len(usable),
                             len(errors), made_warm / elapsed))
                self.latencies["sustained kpool size=%d" % size] = usable
            finally:
                d.close()

        def cold_request():
            t = time.perf_counter()
            km = KernelManager(kernel_name="python3")
            km.start_kernel()
            try:
                return use(km.client(), t)
            finally:
                km.shutdown_kernel(now=True)

        usable, errors, elapsed = arrivals(cold_request)
        rows.append(("jupyter_client cold start (baseline)", summary(usable), len(usable), len(usable),
                     len(errors), len(usable) / elapsed))
        first_errors.extend(errors[:1])
        self.latencies["sustained cold start"] = usable
        base_p50 = rows[-1][1]["p50"]
        self.md("## 3. Sustained load: %.1f kernel requests/s for %d s (ipykernel, launcher = %s)"
                % (rate, duration, launcher), "",
                "Each request gets a kernel, waits for its kernel_info_reply (the latency below), "
                "runs a cell and gives the kernel back. Baseline: the same arrivals, each starting "
                "its own kernel with jupyter_client.", "",
                "| path | requests | errors | waited for a start | p50 ms | p90 ms | p99 ms | max ms | kernels started /s | p50 ratio to baseline |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, s_, waited, n, errs, kps in rows:
            self.md("| %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.1fx faster |" % (
                name, n, errs, waited, s_["p50"], s_["p90"], s_["p99"], s_["max"], kps, base_p50 / s_["p50"]))
        self.md("", "The acquire alone (request to reply with a kernel), ms:", "",
                "| pool size | p50 | p99 | max |", "| --- | --- | --- | --- |")
        for size, lat in acquire_ms.items():
            if lat:
                self.md("| %d | %.2f | %.2f | %.2f |" % (size, percentile(lat, 50), percentile(lat, 99), max(lat)))
        for e in first_errors:
            self.md("", "An error seen: `%s`" % e[:300])
        self.md("")
        self.results["sustained_acquire_ms"] = acquire_ms
        self.results["sustained"] = [{"path": r[0], "latency_ms": r[1], "waited": r[2], "requests": r[3],
                                      "errors": r[4], "started_per_s": r[5]} for r in rows]

    # 5 -------------------------------------------------------------------------------------
    def control_plane(self):
        n = 20000 if self.args.quick else 100000
        echo_endpoint = "ipc://%s/echo" % tempfile.mkdtemp(prefix="kpool-echo-")
        echo = subprocess.Popen([self.tool, "echo-server", echo_endpoint])
        d = Daemon(self.kpoold, '[pools.fake]\nkernelspec = "fake"\nsize = 2\n')
        try:
            d.wait_warm("fake", 2)
            time.sleep(0.5)
            base = self.kpool_bench(echo_endpoint, "-c", "50", "-n", str(n), "ping")
            ping = self.kpool_bench(d.endpoint, "-c", "50", "-n", str(n), "ping")
            status = self.kpool_bench(d.endpoint, "-c", "50", "-n", str(n // 5), "status")
            # Idle: a full pool, nobody asking. The daemon must not spin.
            cpu0, t0 = cpu_seconds(d.proc.pid), time.perf_counter()
            time.sleep(10 if not self.args.quick else 5)
            idle_cpu = (cpu_seconds(d.proc.pid) - cpu0) / (time.perf_counter() - t0) * 100
            rss = rss_mib(d.proc.pid)
        finally:
            d.close()
            echo.kill()
        self.md("## 5. Control plane at concurrency 50", "",
                "| server | op | requests/s | p50 ms | p99 ms | ratio to echo |", "| --- | --- | --- | --- | --- | --- |")
        for name, r in (("bare ZeroMQ echo", base), ("kpoold", ping), ("kpoold", status)):
            self.md("| %s | %s | %.0f | %.3f | %.3f | %.2fx |" % (
                name, r["op"], r["requests_per_s"], r["p50_ms"], r["p99_ms"],
                r["requests_per_s"] / base["requests_per_s"]))
        self.md("", "Idle with a full pool: kpoold used **%.3f%%** of a core; RSS %.1f MiB." % (idle_cpu, rss), "")
        strip = lambda r: {k: v for k, v in r.items() if k != "latencies_ms"}
        self.results["control_plane"] = {"echo": strip(base), "ping": strip(ping), "status": strip(status),
                                         "idle_cpu_percent": idle_cpu, "rss_mib": rss}

    # 6 -------------------------------------------------------------------------------------
    def jupyter_execute(self):
        runs = 3 if self.args.quick else 5
        work = tempfile.mkdtemp(prefix="kpool-bench-nb-")
        d = Daemon(self.kpoold, "[pools.python3]\nsize = 2\n")
        try:
            env = dict(os.environ, PYTHONPATH=self.site, JUPYTER_PATH=os.path.join(work, "share", "jupyter"))
            subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3", "--prefix", work,
                            "--endpoint", d.endpoint], check=True, env=env, capture_output=True)
            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"),
                        nbformat.v4.new_code_cell("sum(range(1000))")]
            path = os.path.join(work, "small.ipynb")
            nbformat.write(nb, path)
            times = {"python3": [], "python3-pooled": []}
            for _ in range(runs):
                for name in times:  # alternating, so drift hits both alike
                    d.wait_warm("python3", 2)
                    t = time.perf_counter()
                    subprocess.run(["jupyter", "execute", "--kernel_name=" + name, path], check=True,
                                   env=env, capture_output=True)
                    times[name].append(time.perf_counter() - t)
        finally:
            d.close()
        plain, pooled = statistics.median(times["python3"]), statistics.median(times["python3-pooled"])
        self.md("## 6. `jupyter execute` on a small notebook", "",
                "| kernelspec | runs | p50 s | max s |", "| --- | --- | --- | --- |",
                "| python3 (plain) | %d | %.3f | %.3f |" % (runs, plain, max(times["python3"])),
                "| python3-pooled (kpool-provisioner) | %d | %.3f | %.3f |" % (runs, pooled, max(times["python3-pooled"])),
                "", "Ratio (p50): **%.2fx** faster with kpool." % (plain / pooled), "")
        self.results["jupyter_execute"] = {"plain_s": times["python3"], "pooled_s": times["python3-pooled"]}

    # 7 -------------------------------------------------------------------------------------
    def soak(self):
        """The load test's client population (bench/loadgen.py) for a long time: does anything
        leak or drift? Not in the default set: run it with --only 7 [--duration S]."""
        duration = self.args.duration or (60 if self.args.quick else 600)
        d = Daemon(self.kpoold, '[pools.python3]\nsize = 2\n'
                                '[pools.fake]\nkernelspec = "fake"\nsize = 4\nmax_starting = 4\n'
                                'transport = "ipc"\n', max_kernels=24)
        try:
            d.wait_warm("python3", 2)
            d.wait_warm("fake", 4)
            loadgen.run_load(d.endpoint, ["fake"], clients=4, duration=1)
            loadgen.settle(d.endpoint)
            pid = d.proc.pid
            before = (loadgen.fd_count(pid), loadgen.rss_kib(pid) / 1024.0, cpu_seconds(pid))
            series = []  # (seconds, fds, RSS MiB) every 10 s while the load runs
            done = threading.Event()

            def sample():
                start = time.monotonic()
                while not done.wait(10.0):
                    series.append((time.monotonic() - start, loadgen.fd_count(pid),
                                   loadgen.rss_kib(pid) / 1024.0))
            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                result = loadgen.run_load(d.endpoint, ["python3", "fake", "fake"], clients=50,
                                          duration=duration)
            finally:
                done.set()
                sampler.join()
            loadgen.settle(d.endpoint)
            after = (loadgen.wait_fds(pid, before[0]), loadgen.rss_kib(pid) / 1024.0, cpu_seconds(pid))
            problems = loadgen.audit(pid, d.endpoint, os.path.join(d.dir, "run", "kernels"),
                                     ipc_pools={"fake"})
        finally:
            d.close()
        lat = result["acquire_ms"]
        self.md("## 7. Soak: 50 misbehaving clients for %d s" % duration, "",
                "Outcomes: %s" % ", ".join("%s %d" % kv for kv in sorted(result["outcomes"].items())), "",
                "| | fds | RSS MiB |", "| --- | --- | --- |",
                "| before | %d | %.1f |" % before[:2], "| after | %d | %.1f |" % after[:2], "",
                "Under load, every 10 s (fds move with the kernels starting and leased at that "
                "moment; what matters is no upward drift):", "",
                "| s | fds | RSS MiB |", "| --- | --- | --- |")
        self.md(*["| %.0f | %d | %.1f |" % row for row in series])
        self.md("",
                "Acquire latency (ms, answered with a kernel): %s" % (
                    "p50 %.1f, p99 %.1f" % (percentile(lat, 50), percentile(lat, 99)) if lat else "none"),
                "", "Audit after settling: %s" % ("clean" if not problems else "; ".join(problems)), "")
        self.results["soak"] = {"duration_s": duration, "outcomes": result["outcomes"],
                                "fds": [before[0], after[0]], "rss_mib": [before[1], after[1]],
                                "series": series,
                                "cpu_s": after[2] - before[2], "problems": problems}

    # 8 -------------------------------------------------------------------------------------
    def autosize(self):
        """A load that changes level (quiet, busy for a minute, quiet) against an auto-sized
        pool, then against a fixed pool as large as the auto pool was on average: how many
        requests found no warm kernel and waited for a start. Real ipykernels, spawned (a
        forked kernel warms so fast that one warm kernel keeps up with this load)."""
        phases = ([(40, 0.15), (60, 1.2), (40, 0.15)] if not self.args.quick
                  else [(15, 0.15), (20, 1.2), (15, 0.15)])
        schedule, t = [], 0.0
        for seconds, rate in phases:
            end = t + seconds
            while t < end:
                schedule.append(t)
                t += 1.0 / rate

        def run(pool_toml):
            d = Daemon(self.kpoold, pool_toml, max_kernels=32)
            sizes = []
            try:
                end = time.monotonic() + 120
                d.wait_warm("python3", d.pool("python3")["size"])
                assert time.monotonic() < end
                client = self.kpool.Client(d.endpoint)
                stop = threading.Event()

                def sample():
                    while not stop.is_set():
                        sizes.append(d.pool("python3")["size"])
                        time.sleep(0.25)

                sampler = threading.Thread(target=sample)
                sampler.start()
                started = time.perf_counter()
                waits = []

                def request(at):
                    delay = started + at - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    t0 = time.perf_counter()
                    k = client.acquire("python3", timeout_ms=120000)
                    waits.append((time.perf_counter() - t0) * 1000)
                    client.release(k.kernel_id)

                with concurrent.futures.ThreadPoolExecutor(max_workers=32) as ex:
                    list(ex.map(request, schedule))
                stop.set()
                sampler.join()
                c = d.pool("python3")["counters"]
                return {"waited": c["waited"], "acquired": c["acquired"],
                        "mean_size": statistics.mean(sizes), "max_size": max(sizes),
                        "p50_ms": percentile(waits, 50), "p90_ms": percentile(waits, 90)}
            finally:
                d.close()

        auto = run('[pools.python3]\nsize = "auto"\nmin = 1\nmax = 12\nmax_starting = 4\n')
        fixed_size = max(1, int(round(auto["mean_size"])))
        fixed = run('[pools.python3]\nsize = %d\nmax_starting = 4\n' % fixed_size)
        self.md("## 8. Auto sizing under a changing load (%d requests: %s)" % (
                    len(schedule), ", ".join("%d s at %.1f/s" % p for p in phases)), "",
                "| pool | mean size | max size | acquires | waited for a start | p50 ms | p90 ms |",
                "| --- | --- | --- | --- | --- | --- | --- |",
                "| size = \"auto\" (min 1, max 12) | %.1f | %d | %d | %d | %.1f | %.1f |" % (
                    auto["mean_size"], auto["max_size"], auto["acquired"], auto["waited"], auto["p50_ms"], auto["p90_ms"]),
                "| size = %d (fixed, the auto pool's mean) | %.1f | %d | %d | %d | %.1f | %.1f |" % (
                    fixed_size, fixed["mean_size"], fixed["max_size"], fixed["acquired"], fixed["waited"],
                    fixed["p50_ms"], fixed["p90_ms"]), "")
        self.results["autosize"] = {"auto": auto, "fixed": fixed, "fixed_size": fixed_size}

    def plot(self, path):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib missing (apt-get install python3-matplotlib): no plot")
            return
        fig, ax = plt.subplots(figsize=(9, 5))
        for label, values in self.latencies.items():
            values = sorted(values)
            ax.plot(values, [i / max(1, len(values) - 1) for i in range(len(values))], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel("fraction of requests")
        ax.set_title("kpool request latency distributions")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)

    def run(self):
        # Dozens of kernels and clients at once: lift the soft file limit to the hard one.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        work = tempfile.mkdtemp(prefix="kpool-bench-py-")
        self.site = install_python_package(work)
        sys.path.insert(0, self.site)
        import kpool
        self.kpool = kpool
        scenarios = {"1": self.warm_acquire, "2": self.usable_kernel, "3": self.sustained,
                     "4": lambda: refill.refill(self), "5": self.control_plane, "6": self.jupyter_execute,
                     "7": self.soak, "8": self.autosize, "9": lambda: notebooks.languages(self),
                     "10": lambda: notebooks.notebooks(self), "11": lambda: refill.priority(self),
                     "12": lambda: multi.multi(self), "13": lambda: batch.batch(self), "14": lambda: first_result.first_result(self),
                     "15": lambda: notebook_server.notebook_server(self),
                     "16": lambda: burst.acquire_burst(self), "17": lambda: serve.serve_bench(self),
                     "18": lambda: gateway.gateway_bench(self), "19": lambda: report_notebook.report_bench(self),
                     "20": lambda: sandbox.sandbox_bench(self), "21": lambda: cells_ahead.cells_ahead_bench(self),
                     "22": lambda: feed.feed_bench(self)}
        self.md("# kpool benchmark, %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "",
                "Machine: %d cores; %s" % (os.cpu_count(), "quick mode" if self.args.quick else "full mode"), "")
        for key in self.args.only.split(","):
            scenarios[key.strip()]()
        os.makedirs(self.args.out, exist_ok=True)
        with open(os.path.join(self.args.out, "report.md"), "w") as f:
            f.write("\n".join(self.report) + "\n")
        with open(os.path.join(self.args.out, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1)
        self.plot(os.path.join(self.args.out, "latency.png"))
        print("\nwritten to", self.args.out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--quick", action="store_true", help="fewer requests, shorter runs")
    parser.add_argument("--only", default="1,2,3,4,5,6,9,10,11,12,13,14,15,16,17,18,19,20,21,22",
                        help="scenarios to run, e.g. 1,5; 7 (the soak) and 8 (auto sizing) only when asked")
    parser.add_argument("--rate", type=float, default=2.0, help="scenario 3: kernel requests/s")
    parser.add_argument("--launcher", default="spawn", choices=("spawn", "fork"),
                        help="scenario 3: how the pools start kernels")
    parser.add_argument("--duration", type=int, default=0,
                        help="scenario 3: seconds (default 60, 15 quick); scenario 7: (600, 60 quick)")
    parser.add_argument("--out", default=os.path.join(
        ROOT, "bench", "results", datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    Bench(parser.parse_args()).run()


if __name__ == "__main__":
    main()
