"""Shared pieces of the benchmark driver: a kpoold under test, the kpool Python package
installed privately, percentiles, CPU and memory readings from /proc."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
FAKE_KERNEL = os.path.join(ROOT, "tests", "integration", "fake_kernel.py")
PYTHON = "/usr/bin/python3"


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def summary(values):
    return {"n": len(values), "min": min(values), "p50": percentile(values, 50),
            "p90": percentile(values, 90), "p99": percentile(values, 99), "max": max(values)}


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Daemon:
    """A kpoold with its own runtime directory and a fake kernelspec beside the real ones."""

    def __init__(self, kpoold, pools_toml, max_kernels=400, daemon_toml="", state_dir=None):
        self.dir = tempfile.mkdtemp(prefix="kpool-bench-")
        spec = os.path.join(self.dir, "jupyter", "kernels", "fake")
        os.makedirs(spec)
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({"argv": [PYTHON, FAKE_KERNEL, "ok", "-f", "{connection_file}"],
                       "language": "fake"}, f)
        self.endpoint = "ipc://%s/run/control" % self.dir
        cfg = os.path.join(self.dir, "kpool.toml")
        with open(cfg, "w") as f:
            f.write('[daemon]\nruntime_dir = "%s/run"\nlog_level = "warn"\nmax_kernels = %d\n%s\n%s'
                    % (self.dir, max_kernels, daemon_toml, pools_toml))
        # Its own state directory: a pool starts with nothing learned unless the scenario says.
        env = dict(os.environ, JUPYTER_PATH=os.path.join(self.dir, "jupyter"),
                   STATE_DIRECTORY=state_dir or os.path.join(self.dir, "state"))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([kpoold, "--config", cfg], env=env,
                                     stderr=open(os.path.join(self.dir, "kpoold.log"), "wb"))
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.connect(self.endpoint)

    def rpc(self, **req):
        self.sock.send_multipart([b"", json.dumps(req).encode()])
        if not self.sock.poll(10000):
            raise RuntimeError("kpoold did not answer %r" % req)
        return json.loads(self.sock.recv_multipart()[-1])

    def pool(self, name):
        return next(p for p in self.rpc(op="status")["pools"] if p["name"] == name)

    def wait_warm(self, name, n, timeout=600, interval=0.05):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if self.pool(name)["warm"] >= n:
                    return time.perf_counter()
            except (RuntimeError, zmq.ZMQError):
                pass
            time.sleep(interval)
        raise RuntimeError("pool %s never reached %d warm kernels" % (name, n))

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def install_python_package(workdir):
    """pip-installs python/ (offline) into a private directory; returns it for sys.path."""
    src = os.path.join(workdir, "src")
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = os.path.join(workdir, "site")
    subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--root-user-action=ignore",
                    "--no-build-isolation", "--no-deps", "--no-index", "--target", site, src],
                   check=True)
    return site


def cold_start_seconds(kernel_name):
    """Seconds for jupyter_client to start a kernel and see it ready (start_kernel, then
    wait_for_ready): the baseline of every pooled path. The kernel is shut down afterwards."""
    from jupyter_client import KernelManager
    t = time.perf_counter()
    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    seconds = time.perf_counter() - t
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    return seconds
