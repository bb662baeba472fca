"""Fixtures for the integration tests: a real kpoold in a private runtime directory, fake
kernelspecs for fault injection beside Debian's real python3 (ipykernel) kernelspec, and leak
checks (processes, files) after every daemon stops."""
import contextlib
import json
import os
import socket
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import zmq
from jupyter_client import BlockingKernelClient

HERE = os.path.dirname(os.path.abspath(__file__))
KPOOLD = os.environ.get("KPOOLD") or os.path.join(HERE, "..", "..", "build", "kpoold")
KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")
FAKE_KERNEL = os.path.join(HERE, "fake_kernel.py")
PYTHON = "/usr/bin/python3"  # Debian's, with pyzmq, as the kernels use

FAKE_SPECS = {
    "fake": [PYTHON, FAKE_KERNEL, "ok", "-f", "{connection_file}"],
    "fake-hang": [PYTHON, FAKE_KERNEL, "hang", "-f", "{connection_file}"],
    "fake-crash": [PYTHON, FAKE_KERNEL, "crash", "-f", "{connection_file}"],
    "fake-slow": [PYTHON, FAKE_KERNEL, "slow", "-f", "{connection_file}"],
    "fake-deaf": [PYTHON, FAKE_KERNEL, "deaf", "-f", "{connection_file}"],
    "no-such-binary": ["/nonexistent/kernel", "-f", "{connection_file}"],
}


PORT_THIEF = os.path.join(HERE, "port_thief.py")

# Kernelspecs beside the fakes, whole kernel.json contents, for the any-language tests.
EXTRA_SPECS = {
    # ipykernel that wants its interrupts as interrupt_request messages on the control channel.
    "python3-message": {"argv": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                        "display_name": "Python 3 (message interrupts)", "language": "python",
                        "interrupt_mode": "message"},
    # argv[0] "python", as Debian's octave kernelspec has it: the pool's `python` runs it.
    "bare-python": {"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "bare python", "language": "python"},
    "missing-program": {"argv": ["kpool-no-such-kernel-program", "-f", "{connection_file}"],
                        "display_name": "missing", "language": "julia"},
    # Another process takes the shell port the first time, between kpoold's choice and the bind.
    "fake-port-thief": {"argv": [PYTHON, PORT_THIEF, "{resource_dir}/stolen", PYTHON, FAKE_KERNEL,
                                 "ok", "-f", "{connection_file}"],
                        "display_name": "fake, port stolen once", "language": "fake"},
    # ipykernel whose iopub port another process takes the first time: it says so, and stays up.
    "python3-iopub-thief": {"argv": [PYTHON, PORT_THIEF, "{resource_dir}/stolen", "--port", "iopub_port", PYTHON,
                                     "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                            "display_name": "ipykernel, iopub port stolen once", "language": "python"},
}

SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON_SITE = None  # where pytest_configure installed the kpool Python package


def pytest_configure(config):
    """Installs python/ (the kpool package) with Debian's pip, offline, into a private directory
    put first on sys.path: jupyter_client finds the provisioner through the installed entry
    point, exactly as it would after a real install. The source tree stays clean."""
    global PYTHON_SITE
    work = tempfile.mkdtemp(prefix="kpool-python-")
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), os.path.join(work, "src"),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    PYTHON_SITE = os.path.join(work, "site")
    subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--root-user-action=ignore",
                    "--no-build-isolation",
                    "--no-deps", "--no-index", "--target", PYTHON_SITE, os.path.join(work, "src")],
                   check=True, cwd=work)
    sys.path.insert(0, PYTHON_SITE)
    os.environ["PYTHONPATH"] = PYTHON_SITE + os.pathsep + os.environ.get("PYTHONPATH", "")
    # Any kpoold a test starts outside Daemon learns into the run's own directory, never the
    # user's (or /var/lib/kpool).
    os.environ["STATE_DIRECTORY"] = os.path.join(work, "state")


def pytest_unconfigure(config):
    if PYTHON_SITE:
        shutil.rmtree(os.path.dirname(PYTHON_SITE), ignore_errors=True)


# One fake kernel kept warm, and a pool whose kernels never become ready (for timeouts).
FAKE_AND_HANG_POOLS = """
[pools.fake]
kernelspec = "fake"
size = 1
[pools.hang]
kernelspec = "fake-hang"
size = 0
"""


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        # open() fails once the pid is reaped; read() fails with ESRCH when the process is
        # reaped between the two.
        return False


def run_code(connection_file, code):
    """Connects like any Jupyter client would and returns the stdout of `code`."""
    return run_cells(connection_file, [code])[0]


def reference_kernel_manager(kernel_name, directory):
    """A plain jupyter_client kernel, the reference a test compares kpool with, on ipc sockets
    in `directory`: over tcp, jupyter_client finds its kernel's ports by binding port 0 and
    closing them, and in the window before the kernel binds them the parallel suites' kernels and
    connections can take one ("Address already in use", seen under ASan's slower starts)."""
    from jupyter_client import KernelManager
    return KernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(str(directory), "ref-ipc"))


@contextlib.contextmanager
def connected(connection_file):
    """A client of the kernel, as any Jupyter client connects, ready; closed after."""
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        yield kc
    finally:
        kc.stop_channels()


def run_cells(connection_file, cells):
    """Runs cells in order through one client; returns the stdout of each."""
    with connected(connection_file) as kc:
        results = []
        for code in cells:
            out = []
            reply = kc.execute_interactive(
                code, timeout=30,
                output_hook=lambda m: out.append(m["content"].get("text", ""))
                if m["msg_type"] == "stream" else None)
            assert reply["content"]["status"] == "ok", reply["content"]
            results.append("".join(out))
        return results


def coalesced(outputs):
    """Consecutive stream outputs of one name joined: how a kernel batches its writes into
    stream messages depends on timing (ipykernel flushes every 0.2 s and around subprocesses),
    not on the client; the text and its order must be the same."""
    out = []
    for o in outputs:
        if o["output_type"] == "stream" and out and out[-1]["output_type"] == "stream" \
                and out[-1]["name"] == o["name"]:
            out[-1] = dict(out[-1], text="".join(out[-1]["text"]) + "".join(o["text"]))
        else:
            out.append(dict(o, text="".join(o["text"])) if o["output_type"] == "stream" else o)
    return out


def tcp_connections(pid):
    """The established TCP connections of process `pid` (IPv4): [(fd, local port, remote port)]."""
    by_inode = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            by_inode[target[8:-1]] = int(fd)
    out = []
    with open("/proc/%d/net/tcp" % pid) as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and fields[9] in by_inode:  # ESTABLISHED, and this process's
                out.append((by_inode[fields[9]], int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)))
    return out


def tcp_nodelay(pid, fd):
    """Whether socket `fd` of process `pid` (a child of ours) has TCP_NODELAY set: a copy of the
    descriptor taken with pidfd_getfd(2), asked with getsockopt."""
    import ctypes
    import socket
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        copy = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd, on x86_64 and arm64 alike
        if copy < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd(%d, %d)" % (pid, fd))
    finally:
        os.close(pidfd)
    with socket.socket(fileno=copy) as s:
        return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def self_signed_certificate(directory):
    """A certificate for 127.0.0.1 and its key, made with openssl in `directory`: (cert, key)."""
    cert, key = os.path.join(str(directory), "cert.pem"), os.path.join(str(directory), "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def free_port():
    """A tcp port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout=10.0, interval=0.05, what="condition", detail=None):
    """`detail`: a function whose text (logs, say) a timeout shows, read only then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %.1f s waiting for %s%s"
                         % (timeout, what, "\n" + detail() if detail else ""))


class Daemon:
    """One kpoold process and a client for its control socket."""

    def __init__(self, workdir, pools_toml, daemon_toml="", env=None, args=None, runtime_dir=None,
                 wrapper=(), control=None, curve=None):
        self.workdir = workdir
        self.runtime_dir = runtime_dir or os.path.join(workdir, "run")
        self.endpoint = control or "ipc://" + os.path.join(self.runtime_dir, "control")
        if control:
            daemon_toml = 'control = "%s"\n%s' % (control, textwrap.dedent(daemon_toml))
        self.wrapper = list(wrapper)  # e.g. prlimit: a command that execs kpoold
        self.expected_exit = 0  # a test that SIGKILLs the daemon says so
        self.curve = curve  # (server public, client public, client secret) for tcp endpoints
        self.config_path = os.path.join(workdir, "kpool.toml")
        with open(self.config_path, "w") as f:
            f.write('[daemon]\nruntime_dir = "%s"\nlog_level = "debug"\n%s\n%s\n' % (
                self.runtime_dir, textwrap.dedent(daemon_toml), textwrap.dedent(pools_toml)))
        self.log_path = os.path.join(workdir, "kpoold.log")
        self.env = dict(os.environ, **(env or {}))
        # What pools learn to pre-import is this daemon's own (a test may share it on purpose).
        self.env["STATE_DIRECTORY"] = (env or {}).get("STATE_DIRECTORY", os.path.join(workdir, "state"))
        self.args = args if args is not None else ["--config", self.config_path]
        self.ctx = zmq.Context.instance()
        self.seen_pids = set()
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.wrapper + [KPOOLD] + self.args, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env)
        wait_until(lambda: self.proc.poll() is not None or self._pings(), timeout=10,
                   what="the daemon to answer ping")
        assert self.proc.poll() is None, "kpoold exited:\n" + self.log_text()
        return self

    def _pings(self):
        try:
            return self.rpc(op="ping", timeout=200)["ok"]
        except (TimeoutError, zmq.ZMQError):
            return False

    def rpc(self, timeout=15000, **request):
        sock = self.ctx.socket(zmq.REQ)
        sock.linger = 0
        sock.rcvtimeo = timeout
        if self.curve:
            sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = self.curve
        try:
            sock.connect(self.endpoint)
            sock.send_json(request)
            try:
                reply = sock.recv_json()
            except zmq.Again:
                raise TimeoutError("no reply to %r within %d ms" % (request, timeout))
        finally:
            sock.close()
        if reply.get("ok") and "pid" in reply and request.get("op") == "acquire":
            self.seen_pids.add(reply["pid"])
        return reply

    def status(self):
        st = self.rpc(op="status")
        assert st["ok"], st
        self.seen_pids.update(k["pid"] for k in st["kernels"] if k["pid"])
        return st

    def pool(self, name):
        return next(p for p in self.status()["pools"] if p["name"] == name)

    def wait_warm(self, name, count, timeout=None):
        # Under the sanitizers on a loaded 2-core CI machine a start can take the whole ready
        # timeout's first half; a kernel truly stuck is killed by kpoold at 60 s and logged, and
        # the pool starts another a second later: that one gets its chance too (CI once saw both
        # of a pool's first kernels time out, the test's subject elsewhere).
        if os.environ.get("KPOOL_SANITIZED") == "1":
            timeout = max(timeout or 0, 90)
        elif timeout is None:
            timeout = 30
        try:
            return wait_until(lambda: self.pool(name)["warm"] >= count, timeout=timeout,
                              what="%d warm kernels in pool %s" % (count, name))
        except AssertionError as e:  # what the pool was doing, for a failure seen only in CI
            raise AssertionError("%s\npool: %s\nkpoold's log, its end:\n%s"
                                 % (e, self.pool(name), self.log_tail())) from None

    def acquire(self, pool, **kw):
        reply = self.rpc(op="acquire", pool=pool, **kw)
        assert reply["ok"], reply
        return reply

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_tail(self, chars=8000):
        """The log's end without the status polls of the wait that failed, which would fill it."""
        lines = [l for l in self.log_text().splitlines() if "request op=status" not in l]
        return "\n".join(lines)[-chars:]

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops the daemon and returns its exit code; fails if it takes longer than timeout."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.status()  # remember every kernel pid for the leak check
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("kpoold did not exit within %d s:\n%s" % (timeout, self.log_text()))

    def assert_no_leaks(self):
        survivors = [pid for pid in self.seen_pids if alive(pid)]
        assert not survivors, "kernel processes outlived the daemon: %s" % survivors
        kernels_dir = os.path.join(self.runtime_dir, "kernels")
        left = os.listdir(kernels_dir) if os.path.isdir(kernels_dir) else []
        assert not left, "files left in %s: %s" % (kernels_dir, left)
        for socket_dir in re.findall(r"ipc sockets go to (\S+):", self.log_text()):
            assert not os.path.exists(socket_dir), "ipc socket directory %s left" % socket_dir
        if self.endpoint.startswith("ipc://"):
            path = self.endpoint[len("ipc://"):]
            assert not os.path.exists(path), "ipc socket left"
            assert not os.path.exists(path + ".lock"), "lock file left"


def module_daemon(tmp_path_factory, kernelspec_path, pools, name, warm=("python3", 2)):
    """For a module-scoped fixture (`yield from`): one kpoold, once `warm` = (pool, kernels) are
    warm (two python3 ones by default), checked for leaked kernels, files and sockets when it
    stops."""
    d = Daemon(str(tmp_path_factory.mktemp(name)), pools, env={"JUPYTER_PATH": kernelspec_path})
    d.start()
    try:
        d.wait_warm(warm[0], warm[1], timeout=90)
        yield d
        assert d.stop() == 0, d.log_text()
        d.assert_no_leaks()
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()


@pytest.fixture(scope="session")
def kernelspec_path(tmp_path_factory):
    """A JUPYTER_PATH holding the fake kernelspecs; python3 still comes from /usr/share."""
    root = tmp_path_factory.mktemp("jupyter")
    for name, argv in FAKE_SPECS.items():
        d = root / "kernels" / name
        d.mkdir(parents=True)
        (d / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": "Fake " + name, "language": "fake"}))
    for name, spec in EXTRA_SPECS.items():
        d = root / "kernels" / name
        d.mkdir(parents=True)
        (d / "kernel.json").write_text(json.dumps(spec))
    return str(root)


def daemon_factory(root, kernelspec_path):
    """(start, finish): start(pools_toml, daemon_toml="", ...) starts a kpoold under `root`;
    finish() stops them all and checks each for leaks (exit code 0, no kernel process, no file)."""
    daemons = []

    def start(pools_toml, daemon_toml="", env=None, args=None, runtime_dir=None, wrapper=(),
              control=None, curve=None):
        workdir = os.path.join(str(root), "d%d" % len(daemons))
        os.makedirs(workdir)
        env = dict(env or {}, JUPYTER_PATH=kernelspec_path)
        d = Daemon(workdir, pools_toml, daemon_toml, env, args, runtime_dir, wrapper, control, curve)
        daemons.append(d)
        return d.start()

    def finish():
        # All stopped first (newest first), then checked: daemons may share a runtime directory.
        codes = {id(d): d.stop() for d in reversed(daemons)}
        for d in daemons:
            code = codes[id(d)]
            assert code == d.expected_exit, "kpoold exited with %s:\n%s" % (code, d.log_text())
            if d.expected_exit == 0:
                d.assert_no_leaks()

    return start, finish


@pytest.fixture
def kpoold(tmp_path, kernelspec_path):
    """Factory: kpoold(pools_toml, daemon_toml="") starts a daemon; all are stopped and checked
    for leaks (exit code 0, no kernel process, no file) at the end of the test."""
    start, finish = daemon_factory(tmp_path, kernelspec_path)
    yield start
    finish()


@pytest.fixture(scope="module")
def module_kpoold(tmp_path_factory, kernelspec_path):
    """kpoold's factory for daemons a whole module shares, as a user's long-lived one is: for
    tests that only run code on fresh kernels (kpoold never hands one out twice), where a daemon
    per test spent 3.5-6 s of each test's setup starting itself, its zygote and its kernels.
    Stopped and checked for leaks once the module is done."""
    start, finish = daemon_factory(tmp_path_factory.mktemp("module-daemons"), kernelspec_path)
    yield start
    finish()
