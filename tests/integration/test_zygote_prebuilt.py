"""The zygote's second design (issue #12): kernels forked from a zygote that pre-built the
IPKernelApp and the ZMQInteractiveShell. Each must be a correct, independent ipykernel: its own
history session, In/Out/_dh, %who, output cache and history tail, %store, and a shell wired to
its own kernel, session, iopub socket and streams. A request whose environment or arguments
differ from the zygote's takes the slow path and says why; the zygote survives a malformed
request line; what the imports set in the environment reaches forked kernels; atexit runs."""
import json
import os
import socket
import subprocess

from jupyter_client import BlockingKernelClient

from conftest import KPOOL, PYTHON, alive, run_cells, run_code, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZYGOTE_DIR = os.path.join(REPO, "daemon", "process")


# The preload plan kpoold sends when the pool has learned nothing (protocol::zygote::preload_plan).
DEFAULT_PLAN = {"modules": [], "max_mb": 1024, "request_env": [], "prefault": "learn", "imports_every_s": 60}


def zygote_argv(path, template, plan):
    """zygote.py's command line as kpoold builds it (launcher_registry.cpp: its settings, one
    JSON object), its files' sources read from the source tree."""
    def source(name):
        with open(os.path.join(ZYGOTE_DIR, name)) as f:
            return f.read()
    helpers = {name: source(name) for name in sorted(os.listdir(ZYGOTE_DIR))
               if name.startswith("zygote_") and name.endswith(".py")}
    settings = {"socket": path, "startup_code": "", "args": template, "prime": False,
                "preload": dict(DEFAULT_PLAN, **(plan or {})), "helpers": helpers}
    return [PYTHON, "-c", source("zygote.py"), json.dumps(settings)]

FORK_AND_SPAWN = """
[pools.py]
kernelspec = "python3"
launcher = "fork"
size = 0
max_starting = 2
[pools.spawned]
kernelspec = "python3"
size = 1
"""


def prebuilt_kernels(d, n):
    wait_until(lambda: d.pool("py").get("zygote_ready"), timeout=60, what="the zygote")
    assert d.rpc(op="resize", pool="py", size=n)["ok"]
    d.wait_warm("py", n, timeout=60)
    pool = d.pool("py")
    zygote = pool["zygote"]
    assert zygote["prebuilt"] is True and zygote["why_not"] is None, zygote
    assert zygote["kernels_prebuilt"] == n and zygote["kernels_not_prebuilt"] == 0, pool
    return [d.acquire("py") for _ in range(n)]


def test_prebuilt_kernels_have_state_of_their_own(kpoold, tmp_path):
    d = kpoold(FORK_AND_SPAWN)
    a, b = prebuilt_kernels(d, 2)
    cells = lambda k: [
        "mine = %r" % k["kernel_id"],
        "mine",  # an execute_result: goes to Out and the output cache
        "ip = get_ipython(); import sys\n"
        "print(ip.history_manager.session_number, len(In), sorted(Out), _dh[0], _)\n"
        "%who",
        "print([line for _, _, line in ip.history_manager.get_tail(3, include_latest=True)][0])",
        "import ipykernel.kernelbase as kb\n"
        "k = ip.kernel\n"
        "print(isinstance(k, kb.Kernel), k.shell is ip, ip.parent is k,\n"
        "      ip.displayhook.session is k.session, ip.display_pub.session is k.session,\n"
        "      ip.displayhook.pub_socket is k.iopub_socket, sys.stdout.session is k.session,\n"
        "      sys.stdout.pub_thread is k.iopub_thread, k.session.session)",
    ]
    out_a = run_cells(a["connection_file"], ["import os; os.chdir('/tmp')"] + cells(a))
    out_b = run_cells(b["connection_file"], cells(b))
    session_a, in_a, out_keys_a, dh_a, last_a = out_a[3].splitlines()[0].split(" ", 4)
    session_b, in_b, out_keys_b, dh_b, last_b = out_b[2].splitlines()[0].split(" ", 4)
    assert session_a != session_b  # history sessions of their own
    assert (in_a, in_b) == ("5", "4")  # In has [''] plus this kernel's own cells only
    assert out_keys_a == "[3]" and out_keys_b == "[2]"  # Out: only its own execute_result
    assert last_a == a["kernel_id"] and last_b == b["kernel_id"]  # output cache (_)
    assert dh_a == dh_b != "/tmp"  # _dh starts where the kernel started (a's chdir came later)
    assert out_a[3].split("\n", 1)[1].split() == ["ip", "mine", "os", "sys"]  # %who: its own names
    assert out_b[2].split("\n", 1)[1].split() == ["ip", "mine", "sys"]
    assert out_a[4].strip() == "mine" and out_b[3].strip() == "mine"  # history tail
    wiring_a, wiring_b = out_a[5].split(), out_b[4].split()
    assert wiring_a[:-1] == ["True"] * 8 == wiring_b[:-1]
    assert wiring_a[-1] != wiring_b[-1]  # Session ids differ
    # %store: the pre-built shell's storemagic, per kernel.
    assert run_cells(a["connection_file"], ["stored_value = 42\n%store stored_value"])
    assert run_cells(b["connection_file"], ["%store -r stored_value\nprint(stored_value)"]) == ["42\n"]
    for k in (a, b):
        d.rpc(op="release", kernel_id=k["kernel_id"])


def test_forked_kernels_get_the_environment_the_imports_set_and_run_atexit(kpoold, tmp_path):
    d = kpoold(FORK_AND_SPAWN)
    (forked,) = prebuilt_kernels(d, 1)
    d.wait_warm("spawned", 1, timeout=60)
    spawned = d.acquire("spawned")
    probe = "import os; print(os.environ.get('PYDEVD_USE_FRAME_EVAL'), 'PYDEVD_DISABLE_FILE_VALIDATION' in os.environ)"
    assert run_code(forked["connection_file"], probe) == run_code(spawned["connection_file"], probe)
    # atexit functions run when the kernel ends normally (shutdown_request on release).
    marker = tmp_path / "atexit-ran"
    run_code(forked["connection_file"],
             "import atexit; atexit.register(lambda: open(%r, 'w').write('yes'))" % str(marker))
    assert d.rpc(op="release", kernel_id=forked["kernel_id"])["ok"]
    wait_until(lambda: not alive(forked["pid"]), timeout=20, what="the kernel to exit")
    assert marker.read_text() == "yes"
    d.rpc(op="release", kernel_id=spawned["kernel_id"])


def wait_connection_file(path):
    """Until the kernel's connection file is there and whole (ipykernel writes it, then fills it)."""
    def whole():
        try:
            with open(path) as f:
                return "shell_port" in json.load(f)
        except (OSError, ValueError):
            return False
    wait_until(whole, timeout=30, what="the connection file")


class Zygote:
    """daemon/process/zygote.py driven directly over its socket, as kpoold drives it."""

    def __init__(self, tmp_path, template, plan=None):
        self.dir = tmp_path
        path = str(tmp_path / "z.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        self.env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        self.proc = subprocess.Popen(zygote_argv(path, template, plan),
                                     env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        server.settimeout(60)
        self.conn, _ = server.accept()
        server.close()
        self.conn.settimeout(60)
        self.buffer = b""
        self.ready = self.read()
        self.next_id = 1

    def read(self):
        while b"\n" not in self.buffer:
            data = self.conn.recv(65536)
            assert data, "the zygote closed its connection"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def read_until(self, key):
        while True:
            msg = self.read()
            if key in msg:
                return msg

    def send_raw(self, line):
        self.conn.sendall(line)

    def fork(self, env=None, args=None, cwd=""):
        request_id, self.next_id = self.next_id, self.next_id + 1
        cf = str(self.dir / ("kernel-%d.json" % request_id))
        request = {"fork": request_id, "args": args or ["-f", cf], "connection_file": cf,
                   "env": env or self.env, "cwd": cwd, "log": str(self.dir / ("k%d.log" % request_id)),
                   "limits": [], "idle": False}
        self.send_raw((json.dumps(request) + "\n").encode())
        forked = self.read_until("forked")
        return forked, cf

    def close(self):
        self.conn.close()  # the zygote exits; its children die with it
        self.proc.wait(timeout=30)


def test_a_differing_environment_or_argv_takes_the_slow_path_and_says_so(tmp_path):
    z = Zygote(tmp_path, ["-f", "{connection_file}"])
    try:
        assert z.ready["prebuilt"] is True and z.ready["why_not"] is None, z.ready
        workdir = tmp_path / "work dir"
        workdir.mkdir()
        fast, cf_fast = z.fork(cwd=str(workdir))
        assert fast["prebuilt"] is True and fast["why_not"] is None
        env = dict(z.env, JUPYTER_CONFIG_DIR=str(tmp_path / "elsewhere"))
        slow_env, cf_env = z.fork(env=env)
        assert slow_env["prebuilt"] is False
        assert slow_env["why_not"] == "environment variable JUPYTER_CONFIG_DIR differs from the zygote's"
        slow_args, cf_args = z.fork(args=["-f", str(tmp_path / "kernel-3.json"), "--Session.debug=False"])
        assert slow_args["prebuilt"] is False
        assert slow_args["why_not"] == "the kernel's arguments differ from the zygote's"
        # A malformed line is answered with an error; the zygote and its kernels live on.
        z.send_raw(b"this is not json\n")
        assert "unreadable request" in z.read_until("error")["error"]
        z.send_raw(b'{"fork": "x"}\n')
        assert "unreadable request" in z.read_until("error")["error"]
        # All three are working kernels, each with its own history session.
        sessions = set()
        for cf in (cf_fast, cf_env, tmp_path / "kernel-3.json"):
            wait_connection_file(cf)
            sessions.add(run_code(str(cf), "print(get_ipython().history_manager.session_number)"))
        assert len(sessions) == 3
        # The request's cwd, and _dh starting there, in a pre-built kernel.
        assert run_code(cf_fast, "import os; print(os.getcwd() == str(_dh[0]) == %r)" % str(workdir)) == "True\n"
        for msg in (fast, slow_env, slow_args):
            assert alive(msg["pid"])
    finally:
        z.close()


def test_a_subcommand_template_refuses_prebuilding_for_the_whole_zygote(tmp_path):
    z = Zygote(tmp_path, ["install", "--user"])
    try:
        assert z.ready["prebuilt"] is False
        assert z.ready["why_not"].startswith("the kernel's arguments start a subcommand")
    finally:
        z.close()


def test_status_says_how_many_kernels_were_prebuilt_and_the_hot_pages(kpoold):
    d = kpoold(FORK_AND_SPAWN)
    kernels = prebuilt_kernels(d, 2)
    zygote = wait_until(lambda: (lambda z: z if z["hot_pages"] is not None else None)(
        d.pool("py")["zygote"]), timeout=30, what="hot pages learned")
    # Learned from the first kernel when pagemap and MADV_POPULATE_WRITE work (Linux 5.14+).
    assert zygote["hot_pages"] > 1000 or zygote["hot_pages_why_not"], zygote
    assert zygote["not_prebuilt_because"] == {}
    assert zygote["hot_pages_kernels"] == 0  # no kernel has ended yet
    # Kernels that ran a cell and are released end normally and report their whole life.
    for k in kernels:
        run_code(k["connection_file"], TOUCH_MODULES)
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    wait_until(lambda: d.pool("py")["zygote"]["hot_pages_kernels"] == 2, timeout=30,
               what="both kernels' lives reported")
    zygote = d.pool("py")["zygote"]
    text = subprocess.run([KPOOL, "--endpoint", d.endpoint, "status", "--wide"],
                          capture_output=True, text=True, timeout=30).stdout
    assert ("  prefault py: %d pages (%.1f MiB) a kernel, from its start and 2 sampled kernels' lives\n"
            % (zygote["hot_pages"], zygote["hot_pages_mib"])) in text, text


def test_prefault_start_learns_no_lives_and_off_prefaults_nothing(kpoold):
    d = kpoold("""
[pools.start]
kernelspec = "python3"
launcher = "fork"
size = 0
prefault = "start"
[pools.none]
kernelspec = "python3"
launcher = "fork"
size = 1
prefault = "off"
""")
    wait_until(lambda: d.pool("start").get("zygote_ready"), timeout=60, what="the zygote")
    assert d.rpc(op="resize", pool="start", size=1)["ok"]  # a forked kernel, not one spawned meanwhile
    d.wait_warm("start", 1, timeout=60)
    d.wait_warm("none", 1, timeout=60)
    none = wait_until(lambda: (lambda z: z if z["hot_pages"] is not None else None)(
        d.pool("none")["zygote"]), timeout=30, what="the off pool's zygote to say so")
    assert none["hot_pages"] == 0 and none["hot_pages_why_not"] == 'prefault = "off"', none
    k = d.acquire("start")
    run_code(k["connection_file"], TOUCH_MODULES)
    start = wait_until(lambda: (lambda z: z if z["hot_pages"] is not None else None)(
        d.pool("start")["zygote"]), timeout=30, what="the start pages learned")
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    wait_until(lambda: not alive(k["pid"]), timeout=20, what="the kernel to exit")
    d.wait_warm("start", 1, timeout=60)
    assert d.pool("start")["zygote"]["hot_pages_kernels"] == 0
    assert d.pool("start")["zygote"]["hot_pages"] == start["hot_pages"]


def test_a_running_kernel_reports_its_imports_now_and_then(tmp_path):
    """Not only as it ends: a kernel that runs cells reports what it uses every imports_every_s
    (60 in kpoold's plans), so a notebook server's hours-long kernels are learned from too."""
    z = Zygote(tmp_path, ["-f", "{connection_file}"], plan={"imports_every_s": 0.5})
    try:
        forked, cf = z.fork()
        wait_connection_file(cf)
        run_code(cf, "import csv")
        sampled = z.read_until("imports")
        assert sampled["imports"] == forked["pid"] and sampled["running"] is True, sampled
        assert "csv" in sampled["modules"] and alive(forked["pid"])
        run_code(cf, "import json, tarfile")  # later cells: a later report, the whole view
        later = z.read_until("imports")
        assert later["running"] is True and {"csv", "tarfile"} <= set(later["modules"]), later
        shut_down(cf)
        last = z.read_until("imports")
        assert last["running"] is False and {"csv", "tarfile"} <= set(last["modules"]), last
    finally:
        z.close()


# Copies every module's namespace: reference counts written on pages of the zygote's that a
# kernel's start does not write.
TOUCH_MODULES = ("import sys\n"
                 "kept = [vars(m).copy() for m in list(sys.modules.values()) if hasattr(m, '__dict__')]")


def private_dirty_kb(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    raise AssertionError("no Private_Dirty in smaps_rollup")


def shut_down(connection_file):
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
    try:
        assert kc.shutdown(reply=True, timeout=30)["content"]["status"] == "ok"
    finally:
        kc.stop_channels()


def test_sampled_kernels_teach_the_pages_they_write_over_their_life(tmp_path):
    """The first kernels are samples: each reports as it ends which of the zygote's pages it
    wrote; the pages most of them wrote are then pre-faulted by every later kernel as it starts
    (its own memory from then on), not faulted in one by one while its user waits."""
    z = Zygote(tmp_path, ["-f", "{connection_file}"])
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    try:
        def started():
            forked, cf = z.fork()
            wait_connection_file(cf)
            run_code(cf, "pass")
            return forked["pid"], cf

        for i in range(3):
            pid, cf = started()
            if i == 0:  # after its first answer: the pages every kernel's start writes
                first = z.read_until("learned")
                if first["why_not"]:
                    return  # no pagemap or MADV_POPULATE_WRITE here (Linux before 5.14)
                assert first["kernels"] == 0 and first["learned"] > 1000, first
            sample_kb = private_dirty_kb(pid)  # pre-faulted the start pages only
            run_code(cf, TOUCH_MODULES)
            shut_down(cf)
            learned = z.read_until("learned")
            assert learned["kernels"] == i + 1 and learned["why_not"] is None, learned
        life_pages = learned["learned"] - first["learned"]
        assert life_pages > 300, (first, learned)
        # Three lives are in: the next fork is no sample and starts with those pages its own.
        pid, cf = started()
        assert private_dirty_kb(pid) - sample_kb > 0.8 * life_pages * page_kb, (sample_kb, learned)
        run_code(cf, TOUCH_MODULES)  # and works as any kernel
    finally:
        z.close()
