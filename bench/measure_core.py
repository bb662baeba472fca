#!/usr/bin/python3
"""Issues #2 and #3's measurements, side by side in one run on one machine:
  1. warm acquire latency (median, p99) over a few hundred acquires from a warm pool, measured
     from a Python DEALER client (so it includes pyzmq's own overhead), with background refills
     running as they would in production;
  2. the cold start of the same kernelspec with jupyter_client (KernelManager.start_kernel +
     wait_for_ready), and the time to a usable kernel through kpoold (acquire + connect +
     kernel_info_reply);
  3. the wall time of `jupyter execute` on a small notebook with the pooled kernelspec
     (kpool-provisioner) versus the plain python3 kernelspec, runs alternating.
Usage: bench/measure_core.py [KPOOLD] (default build/kpoold). Results are printed as markdown.
The full load generator (C++, concurrency, baselines) is issue #4's kpool-bench."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat
import zmq
from jupyter_client import BlockingKernelClient, KernelManager

HERE = os.path.dirname(os.path.abspath(__file__))
KPOOLD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "kpoold")
FAKE = os.path.join(HERE, "..", "tests", "integration", "fake_kernel.py")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


class Daemon:
    def __init__(self, pools):
        self.dir = tempfile.mkdtemp(prefix="kpool-bench-")
        jp = os.path.join(self.dir, "jupyter", "kernels", "fake")
        os.makedirs(jp)
        with open(os.path.join(jp, "kernel.json"), "w") as f:
            json.dump({"argv": ["/usr/bin/python3", FAKE, "ok", "-f", "{connection_file}"]}, f)
        cfg = os.path.join(self.dir, "kpool.toml")
        with open(cfg, "w") as f:
            f.write('[daemon]\nruntime_dir = "%s/run"\nlog_level = "warn"\nmax_kernels = 400\n%s'
                    % (self.dir, pools))
        env = dict(os.environ, JUPYTER_PATH=os.path.join(self.dir, "jupyter"))
        self.proc = subprocess.Popen([KPOOLD, "--config", cfg], env=env)
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect("ipc://%s/run/control" % self.dir)
        time.sleep(0.3)

    def rpc(self, **req):
        self.sock.send_multipart([b"", json.dumps(req).encode()])
        return json.loads(self.sock.recv_multipart()[-1])

    def wait_warm(self, pool, n, timeout=300):
        end = time.time() + timeout
        while time.time() < end:
            p = [p for p in self.rpc(op="status")["pools"] if p["name"] == pool][0]
            if p["warm"] >= n:
                return
            time.sleep(0.2)
        raise RuntimeError("pool never warmed")

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def warm_acquire_latency(rounds=3, per_round=100):
    d = Daemon("[pools.fake]\nkernelspec = \"fake\"\nsize = %d\nmax_starting = 2\n" % per_round)
    lat, pings = [], []
    try:
        d.wait_warm("fake", per_round)
        for _ in range(300):  # a full, idle pool: the daemon's bare request overhead
            t = time.perf_counter()
            d.rpc(op="ping")
            pings.append((time.perf_counter() - t) * 1000)
        for _ in range(rounds):
            d.wait_warm("fake", per_round)
            ids = []
            for _ in range(per_round):
                t = time.perf_counter()
                r = d.rpc(op="acquire", pool="fake", timeout_ms=0)
                lat.append((time.perf_counter() - t) * 1000)
                assert r["ok"], r
                ids.append(r["kernel_id"])
            for i in ids:
                d.rpc(op="release", kernel_id=i)
    finally:
        d.close()
    return lat, pings


def usable_kernel_times(runs=5):
    cold, pooled, pooled_ready = [], [], []
    for _ in range(runs):
        t = time.perf_counter()
        km = KernelManager(kernel_name="python3")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        cold.append(time.perf_counter() - t)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    d = Daemon("[pools.python3]\nsize = 2\n")
    try:
        for _ in range(runs):
            d.wait_warm("python3", 2, timeout=120)
            t = time.perf_counter()
            r = d.rpc(op="acquire", pool="python3", timeout_ms=60000)
            kc = BlockingKernelClient()
            kc.load_connection_file(r["connection_file"])
            kc.start_channels()
            kc.kernel_info(reply=True, timeout=60)
            pooled.append(time.perf_counter() - t)
            # jupyter_client's wait_for_ready also waits up to 0.2 s for an iopub message that
            # a client joining a running kernel may miss (ipykernel 6 has no iopub welcome).
            kc.wait_for_ready(timeout=60)
            pooled_ready.append(time.perf_counter() - t)
            kc.stop_channels()
            d.rpc(op="release", kernel_id=r["kernel_id"])
    finally:
        d.close()
    return cold, pooled, pooled_ready


def install_python_package(workdir):
    """pip-installs python/ (offline) into a private directory; returns it for PYTHONPATH."""
    src = os.path.join(workdir, "src")
    shutil.copytree(os.path.join(HERE, "..", "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = os.path.join(workdir, "site")
    subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--quiet", "--root-user-action=ignore",
                    "--no-build-isolation", "--no-deps", "--no-index", "--target", site, src],
                   check=True)
    return site


def jupyter_execute_times(runs=5):
    work = tempfile.mkdtemp(prefix="kpool-bench-nb-")
    d = Daemon("[pools.python3]\nsize = 2\n")
    try:
        site = install_python_package(work)
        env = dict(os.environ, PYTHONPATH=site, JUPYTER_PATH=os.path.join(work, "share", "jupyter"))
        subprocess.run(["/usr/bin/python3", "-m", "kpool", "install-kernelspec", "--pool", "python3",
                        "--prefix", work, "--endpoint", "ipc://%s/run/control" % d.dir],
                       check=True, env=env, capture_output=True)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"),
                    nbformat.v4.new_code_cell("sum(range(1000))")]
        path = os.path.join(work, "small.ipynb")
        nbformat.write(nb, path)
        times = {"python3": [], "python3-pooled": []}
        for _ in range(runs):
            for name in times:
                d.wait_warm("python3", 2, timeout=120)
                t = time.perf_counter()
                subprocess.run(["jupyter", "execute", "--kernel_name=" + name, path], check=True,
                               env=env, capture_output=True)
                times[name].append(time.perf_counter() - t)
        return times
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    lat, pings = warm_acquire_latency()
    cold, pooled, pooled_ready = usable_kernel_times()
    nb_times = jupyter_execute_times()
    print("| measurement | n | median | p99 | max |")
    print("| --- | --- | --- | --- | --- |")
    print("| warm acquire round trip (ms) | %d | %.3f | %.3f | %.3f |"
          % (len(lat), statistics.median(lat), pct(lat, 99), max(lat)))
    print("| ping round trip, idle full pool (ms) | %d | %.3f | %.3f | %.3f |"
          % (len(pings), statistics.median(pings), pct(pings, 99), max(pings)))
    print("| cold start, jupyter_client start_kernel+wait_for_ready (s) | %d | %.3f | - | %.3f |"
          % (len(cold), statistics.median(cold), max(cold)))
    print("| usable kernel via kpoold: acquire+connect+kernel_info_reply (s) | %d | %.3f | - | %.3f |"
          % (len(pooled), statistics.median(pooled), max(pooled)))
    print("| ... the same then jupyter_client wait_for_ready (s) | %d | %.3f | - | %.3f |"
          % (len(pooled_ready), statistics.median(pooled_ready), max(pooled_ready)))
    for name, label in (("python3", "plain python3"), ("python3-pooled", "python3-pooled (kpool)")):
        print("| jupyter execute small.ipynb, %s (s) | %d | %.3f | - | %.3f |"
              % (label, len(nb_times[name]), statistics.median(nb_times[name]), max(nb_times[name])))
    print("\nratio cold / pooled usable kernel (medians): %.1fx" % (statistics.median(cold) / statistics.median(pooled)))
    print("ratio jupyter execute plain / pooled (medians): %.2fx"
          % (statistics.median(nb_times["python3"]) / statistics.median(nb_times["python3-pooled"])))


if __name__ == "__main__":
    main()
