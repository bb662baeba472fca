"""kpool's fork server ("zygote") for pools with launcher = "fork".

kpoold compiles this file in and starts it with the kernelspec's own interpreter:

    PYTHON -c <this file> SOCKET_PATH STARTUP_CODE ARGS_TEMPLATE_JSON PRIME PRELOAD_JSON HELPERS_JSON

HELPERS_JSON maps the zygote's other files to their sources, compiled into kpoold as this one
is: zygote_preload.py (what it pre-imports, and what a kernel used), zygote_pages.py (the pages
kernels write, pre-faulted), zygote_warm_ups.py (first-use set-up), zygote_sandbox.py (the
sandbox a child makes before it becomes the kernel, for a request that carries one).

It imports ipykernel and IPython (and the import statements of the pool's startup_code) once,
then pre-builds what every kernel would build the same way and that holds no thread, socket,
file descriptor or per-kernel identity: the IPKernelApp's configuration (parsed from the
kernelspec's arguments, with `{connection_file}` left as a placeholder) and the
ZMQInteractiveShell (magics, formatters, completer, ...; its history disabled while pre-built).
With PRIME = "prime" (the pool's `prime`, on by default) a cell then runs through the pre-built
shell as kpoold's priming execute runs in each kernel (languages/python.cpp): silently,
with its value formatted as a user expression, so that the display formatters, the input
transformers and the compiler's caches are built here once; it leaves no trace (execution
count, In/Out, `_`, history are untouched, and the child builds its own history and namespace).
gc.freeze() then keeps the inherited objects out of each kernel's collections, whose first full
pass would otherwise touch (and copy) all of them.

PRELOAD_JSON ({"modules": [...], "max_mb": N, "request_env": [...], "prefault": MODE,
"imports_every_s": S}) names the modules the pool learned its kernels import (or the ones its
`preload` lists), most used first, and the pool's `prefault` (which pages kernels pre-fault,
below). zygote_preload.py's Preloader tries each first in a probe child forked from here: it
must be an installed module (the standard library or the interpreter's site directories; not a
user's site directory, not found through a kernel's cwd, a notebook's folder or a path added at
run time), import without error, start no thread, leave no file descriptor open and read no
environment variable that requests set (`request_env`). Those that pass are imported here,
while the zygote's growth stays under `max_mb`, and then warmed: WARM_UPS (zygote_warm_ups.py)
runs the first-use set-up of the libraries it knows (a figure to PNG, a DataFrame's reprs), again tried first in a probe
that checks it leaves no output, file, thread, open figure or name behind. The ready message
says what was pre-imported (with each module's file and mtime, for kpoold to see upgrades), what
was refused and why, and how much the zygote grew.

Each child reports, when its kernel ends (and, pre-built, every `imports_every_s` of the plan
while cells run), the top-level modules it used: those it imported
(beyond the zygote's) and those its user namespace holds (a learned module is pre-imported, so
only the namespace shows that it is still used), each installed or not (with where it was
found). A learned module that a kernel's own working directory shadows (./utils.py, ./utils/)
is dropped from sys.modules when the kernel starts there or is moved there, so the user's
`import utils` finds the local one, as in a kernel that never had it.

Each child then builds only what is its own: Session and key, ZeroMQ context, sockets and
threads, the kernel object, a real HistoryManager (its own sqlite connection and session
number), `In`/`Out`/`_dh`, the shell's environment, extensions and startup code. Its kernel
also answers kpoold's kpool_context_request on the control channel (a client's cwd and env,
applied without running a cell).

Children break copy-on-write in bulk (MADV_POPULATE_WRITE, as they start: off any request)
for the zygote's pages that kernels write, instead of faulting them in one by one while a user
waits (zygote_pages.py): the pages the first pre-built kernel has written right after answering
its first execute_request (the pool's startup_code, else kpoold's priming; its first
kernel_info_request when the pool does not prime), and those most of the recent sampled kernels
wrote over their whole life, each reported as the sample ends. MODE "start" keeps the former
only, "off" none.

The fast path is refused for the whole zygote (status says why) when ipykernel is not 6.x, the
arguments start a subcommand, IPython logging is configured, or pre-building left a thread or a
file descriptor behind; and per request when the arguments differ from the template or an
environment variable the imports read (or HOME, IPYTHONDIR, JUPYTER_*, XDG_*, PYTHON*, LANG,
LC_*, PATH) differs. Those kernels take the slow path: IPKernelApp.launch_instance in the
child.

Protocol, one JSON object per line (protocol/zygote_protocol.hpp is kpoold's side):
  kpoold -> zygote  {"fork": ID, "args": [...], "connection_file": PATH, "env": {...},
                     "cwd": DIR or "", "log": PATH, "limits": [[RESOURCE, VALUE], ...],
                     "idle": BOOL, "sandbox": SPEC, "sandbox_helper": PATH}
                    (sandbox: protocol/sandbox_spec.hpp's JSON, only for isolation = "sandbox";
                     the pid reported is then the sandbox's outer process)
  zygote -> kpoold  {"ready": PID, "threads": N, "prebuilt": BOOL, "why_not": TEXT,
                     "preload": {"preloaded": [{"name", "file", "mtime"}], "refused": [[NAME, WHY]],
                                 "warmed": [NAME], "warm_ups_refused": [[NAME, WHY]],
                                 "growth_mb": MB, "rss_mb": MB}}   once
                    {"forked": ID, "pid": PID, "prebuilt": BOOL, "why_not": TEXT,
                     "at_idle": BOOL}
                    {"failed": ID, "error": TEXT}
                    {"exited": PID, "code": CODE, "signal": SIGNUM}
                    {"learned": PAGES, "why_not": TEXT, "kernels": N}
                                                           hot pages learned (or why not), from
                                                           N sampled kernels' whole lives
                    {"error": TEXT}                        a request it could not read
                    {"imports": PID, "modules": [NAME], "other": [[NAME, WHERE]], "running": BOOL}
                                   what a kernel used: as it ended, or (running) while it runs
The zygote reaps its children and reports their exits: kpoold is not their parent.

A background request ("idle": true, a refill nobody waits for) is forked at SCHED_IDLE: the
zygote drops to it just around os.fork() (copying the page tables of a big process is most of a
fork's cost) and returns to SCHED_OTHER at once, so its loop still reads an awaited request
promptly. Only where it may return: root, or an RLIMIT_NICE of 20 (kpoold raises its own and the
zygote inherits it; see daemon/process/cpu_priority.hpp), else every fork is at normal priority.
"""
import os


class AfterFork:
    """What every forked child does first: SCHED_IDLE for background work that the zygote could
    not fork at SCHED_IDLE itself, then copy-on-write broken in bulk for the hot pages
    (HotPageLearner fills `prefault`). Registered before anything imports threading or random,
    whose after-fork hooks would otherwise run first and fault the hot pages in one by one; the
    zygote's parts get this one instance passed in."""

    def __init__(self):
        self.sched_idle = False
        self.prefault = []  # (address, length) runs
        self.populate = None  # (address, length): madvise(MADV_POPULATE_WRITE), set by Zygote

    def __call__(self):
        if self.sched_idle:
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            except OSError:
                pass
        for address, length in self.prefault:
            self.populate(address, length)


AFTER_FORK = AfterFork()
os.register_at_fork(after_in_child=AFTER_FORK)

import ast  # noqa: E402
import atexit  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402


def helper(name):
    """One of the zygote's other files, whose source kpoold passes as it passes this one's
    (compiled in): run in a namespace of its own, as a module would be, but not importable
    (nothing of kpool's in a kernel's sys.modules)."""
    if name not in HELPER_SOURCES:
        sys.exit("zygote: HELPERS_JSON has no %s" % name)
    namespace = {"__name__": "kpool_" + name.partition(".")[0]}
    exec(compile(HELPER_SOURCES[name], "<%s>" % name, "exec"), namespace)
    return types.SimpleNamespace(**namespace)


# HELPERS_JSON (the module docstring).
HELPER_SOURCES = json.loads(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] else {}
preloading = helper("zygote_preload.py")
pages = helper("zygote_pages.py")
sandboxing = helper("zygote_sandbox.py")

PR_SET_PDEATHSIG = 1
# Read by Python's start-up, by C libraries or lazily by IPython rather than through os.environ
# during our imports: a request must agree on these too before taking the fast path.
WATCHED_ENV = ("HOME", "IPYTHONDIR", "PATH", "LANG", "MPLBACKEND")
WATCHED_ENV_PREFIXES = ("JUPYTER_", "XDG_", "PYTHON", "LC_")
# Set by the zygote for itself only (silences debugpy's frozen-modules warning at import).
ZYGOTE_ONLY_ENV = "PYDEVD_DISABLE_FILE_VALIDATION"
IMPORTS_EVERY_S = 60  # a running kernel's imports report, at most this often (the plan's)
BACKGROUND_LIMIT_S = 5  # a rebuild at SCHED_IDLE goes on at normal priority after this long
PRELOADED = ()  # the modules the Preloader imported here: what a kernel's cwd may shadow


def preload(startup_code):
    """The import statements of startup_code, run here so every kernel finds the modules
    loaded. Anything else in it runs in each kernel, where its names belong."""
    import IPython  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    if not startup_code:
        return
    tree = ast.parse(startup_code)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), "<startup_code imports>", "exec"), {})


class Prebuilt:
    """The IPKernelApp and ZMQInteractiveShell every kernel of this zygote shares until fork."""

    def __init__(self, template, prime):
        self.template = template
        self.prime = prime
        self.app = None
        self.shell = None

    def build(self):
        """Returns None, or why the fast path is refused for this zygote."""
        import ipykernel
        if ipykernel.version_info[0] != 6:
            return "ipykernel %s is not 6.x" % ipykernel.__version__
        if self.template and not self.template[0].startswith("-"):
            return "the kernel's arguments start a subcommand (%s)" % self.template[0]
        if not any("{connection_file}" in a for a in self.template):
            return "the kernel's arguments have no {connection_file}"
        threads, fds = threading.active_count(), preloading.open_fds()
        from IPython.core.application import BaseIPythonApplication
        from IPython.core.history import HistoryManager
        from ipykernel.compiler import XCachingCompiler
        from ipykernel.kernelapp import IPKernelApp
        from ipykernel.zmqshell import ZMQInteractiveShell

        app = IPKernelApp.instance()
        try:
            app._init_asyncio_patch()
            BaseIPythonApplication.initialize(app, list(self.template))
        except SystemExit:
            return "ipykernel refused the kernel's arguments"
        if app.subapp is not None:
            return "the kernel's arguments start a subcommand"

        def disabled_history(shell):
            # No sqlite connection and no saving thread may cross fork.
            shell.history_manager = HistoryManager(shell=shell, parent=shell, enabled=False)
            shell.configurables.append(shell.history_manager)

        ZMQInteractiveShell.init_history = disabled_history
        try:
            shell = ZMQInteractiveShell.instance(parent=app, profile_dir=app.profile_dir,
                                                 user_module=None, user_ns=None, kernel=None,
                                                 compiler_class=XCachingCompiler)
        finally:
            del ZMQInteractiveShell.init_history
        self.app, self.shell = app, shell
        if shell.logstart or shell.logfile or shell.logappend:
            return "IPython logging is configured"
        warm_up()
        if self.prime:
            why_not = prime_shell(shell)
            if why_not is not None:
                return why_not
        if threading.active_count() != threads:
            return "pre-building started a thread"
        opened = preloading.open_fds() - fds
        if opened:
            return "pre-building left file descriptor(s) %s open" % sorted(opened)
        return None

    def discard(self):
        """Undoes the singletons, for a zygote that does not take the fast path."""
        from ipykernel.kernelapp import IPKernelApp
        from ipykernel.zmqshell import ZMQInteractiveShell
        if self.shell is not None:
            atexit.unregister(self.shell.atexit_operations)
        ZMQInteractiveShell.clear_instance()
        IPKernelApp.clear_instance()
        self.app = self.shell = None

    def expected_args(self, connection_file):
        return [a.replace("{connection_file}", connection_file) for a in self.template]


def warm_up():
    """Once, what every kernel would otherwise pay for on its first use."""
    import sqlite3
    sqlite3.connect(":memory:").close()
    from jupyter_client import localinterfaces
    localinterfaces.localhost()
    import faulthandler  # noqa: F401  (every kernel's start imports it: not one to learn)
    import ipykernel.comm  # noqa: F401
    import ipykernel.control  # noqa: F401
    import ipykernel.heartbeat  # noqa: F401
    import ipykernel.iostream  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import IPython.extensions.storemagic  # noqa: F401


def prime_shell(shell):
    """kpoold's Python priming execute, run once here through the pre-built shell; None, or why
    it could not be (then the zygote does not pre-build at all)."""
    count, names = shell.execution_count, set(shell.user_ns)
    result = shell.run_cell("pass", store_history=False, silent=True)
    values = shell.user_expressions({"kpool_priming": "None"})
    if not result.success or values["kpool_priming"].get("status") != "ok":
        return "the priming cell failed in the pre-built shell"
    if shell.execution_count != count or set(shell.user_ns) != names:
        return "the priming cell left a trace in the pre-built shell"
    return None


def report_used_modules(imports_sock, base_modules, running):
    """One datagram to the zygote (lost if it is gone): the modules this kernel used."""
    used = preloading.used_modules(base_modules, set(PRELOADED))
    imports_sock.send(json.dumps(dict(used, pid=os.getpid(), running=running)).encode())


def sample_imports_while_running(shell, every_s, report):
    """Every `every_s` seconds, if cells ran since the last time, `report()` what this kernel
    uses so far: a kernel that lives for hours (a notebook server's) is learned from as it goes,
    not only when it ends. On the kernel's own loop, so never in the middle of a cell."""
    from tornado.ioloop import PeriodicCallback
    seen = [shell.execution_count]

    def sample():
        if shell.execution_count != seen[0]:
            seen[0] = shell.execution_count
            try:
                report()
            except Exception:
                traceback.print_exc()

    PeriodicCallback(sample, every_s * 1000).start()


def start_prebuilt_kernel(prebuilt, request, report, report_imports):
    """In the child: the rest of IPKernelApp.initialize, around the pre-built shell."""
    from IPython.core.history import HistoryManager
    app, shell = prebuilt.app, prebuilt.shell
    app.connection_file = request["connection_file"]
    app.argv = list(request["args"])
    app.init_pdb()
    app.init_blackhole()
    app.init_connection_file()
    # No parent poller: PR_SET_PDEATHSIG ends us with the zygote, and the zygote with kpoold.
    app.init_sockets()
    app.init_heartbeat()
    app.write_connection_file()
    app.log_connection_info()
    app.init_io()
    try:
        app.init_signal()
    except Exception:
        pass
    app.init_kernel()  # IPythonKernel gets the pre-built shell from ZMQInteractiveShell.instance()
    kernel = app.kernel
    kernel.dispatch_control = context_dispatch(kernel, kernel.dispatch_control)  # before start()
    shell.kernel = kernel
    shell.parent = kernel
    # This kernel's own history: sqlite connection, session number, _dh from its own cwd.
    shell.configurables.remove(shell.history_manager)
    shell.history_manager = HistoryManager(shell=shell, parent=shell)
    shell.configurables.append(shell.history_manager)
    shell.init_user_ns()
    shell.init_environment()
    app.init_path()
    app.init_shell()
    app.init_gui_pylab()
    app.init_extensions()
    app.init_code()
    sys.stdout.flush()
    sys.stderr.flush()
    if report is not None and report.first:
        pages.report_hot_pages_after_first(
            kernel, "execute_request" if prebuilt.prime else "kernel_info_request", report)
    if IMPORTS_EVERY_S > 0:
        sample_imports_while_running(shell, IMPORTS_EVERY_S, report_imports)
    app.start()


CONTEXT_REQUEST = b'"kpool_context_request"'


def context_dispatch(kernel, dispatch_control):
    """kpoold's kpool_context_request {cwd, env, python?}: a client's working directory and environment,
    applied as kpool's built-in Python snippet applies them (bytes, so any path and value
    works) but without running a cell through IPython's run_cell, which in a fresh fork made an
    acquire with cwd/env take 11.5 ms instead of 8.0. Answered with a kpool_context_reply shaped
    as an execute_reply.

    Taken off the control stream before ipykernel's own dispatch, which queues each message for
    its control loop, publishes busy and idle statuses, and flushes sys.stdout and sys.stderr,
    each flush a round trip to the IOPub thread and back: for a message that prints nothing and
    that no front end sees, that was half its cost (an acquire with a cwd, fork pool of 4, p50 of
    32 each in one run: 7.3 ms through ipykernel's dispatch, 4.7 ms here; 0.9 without a cwd).
    `dispatch_control` (ipykernel's) gets every other message, in order.
    kernel.start() binds the control stream to kernel.dispatch_control, so this must be in
    place before it."""
    def dispatch(msg):
        idents, parts = kernel.session.feed_identities(msg, copy=False)
        header = parts[1].bytes if len(parts) > 1 else b""
        if CONTEXT_REQUEST not in header:
            return dispatch_control(msg)
        try:
            request = kernel.session.deserialize(parts, content=True, copy=False)  # checks the signature
        except Exception:
            kernel.log.error("Invalid kpool_context_request", exc_info=True)
            return None
        if request["header"].get("msg_type") != "kpool_context_request":
            return dispatch_control(msg)
        content = request.get("content") or {}
        try:
            if content.get("cwd") is not None:
                os.chdir(content["cwd"].encode())
                preloading.unshadow(PRELOADED, os.getcwd())
            for name, value in (content.get("env") or {}).items():
                os.environb[name.encode()] = value.encode()
            if content.get("python"):  # kpoold's own setup code (in-memory history)
                exec(content["python"], {})
            reply = {"status": "ok"}
        except Exception as e:
            reply = {"status": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": []}
        kernel.session.send(kernel.control_stream, "kpool_context_reply", reply, request, idents)
        return None
    return dispatch


class Channel:
    """The line protocol to kpoold over its unix socket, and the wake-up pipe that SIGCHLD
    writes to, so that one select() waits for both."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the fd
        self.buffer = b""

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def drain_wakeups(self):
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def lines(self):
        """The complete lines received so far; None once kpoold has gone."""
        data = self.sock.recv(65536)
        if not data:
            return None
        self.buffer += data
        lines = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            lines.append(line)
        return lines

    def close_in_child(self):
        signal.set_wakeup_fd(-1)
        self.sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


def reap_children(channel):
    """Reports every child that has exited: kpoold is not their parent, we are."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel.send({"exited": pid,
                      "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0,
                      "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0})


class FastPathPolicy:
    """Whether a request may start from the pre-built app and shell (see the module docstring)."""

    def __init__(self, prebuilt, why_not, env_reads, env_at_start):
        self.prebuilt = prebuilt
        self.why_not = why_not
        self.env_reads = env_reads
        self.env_at_start = env_at_start

    def refused(self, request):
        """None when this request may take the fast path, else why not."""
        if self.why_not is not None:
            return self.why_not
        connection_file = request.get("connection_file")
        if not isinstance(connection_file, str) or \
                request["args"] != self.prebuilt.expected_args(connection_file):
            return "the kernel's arguments differ from the zygote's"
        env = request["env"]
        names = {n for n in self.env_reads if isinstance(n, str)} | {  # environb reads: bytes
            n for n in set(env) | set(self.env_at_start)
            if n in WATCHED_ENV or n.startswith(WATCHED_ENV_PREFIXES)}
        names.discard(ZYGOTE_ONLY_ENV)
        for name in sorted(names):
            if env.get(name) != self.env_at_start.get(name):
                return "environment variable %s differs from the zygote's" % name
        return None


def become_kernel(request, refused, report, zygote_pid, libc, prebuilt, env_set_by_imports, imports_sock,
                  base_modules, prefault):
    """The child's side of a fork: leave the zygote's plumbing (already closed by the caller)
    behind, take the request's process group, log, sandbox (zygote_sandbox.py; `prefault` is
    what its kernel pre-faults), limits, environment and cwd, and run the kernel, pre-built or
    not. Never returns."""
    code = 1
    if report is not None:
        report.zygote_ranges = pages.writable_private_ranges()  # as they were at fork: nothing added yet
    try:
        # A process group of its own (kpoold signals the group) in kpoold's session, so
        # that the scheduler weighs it against kpoold's other kernels (SCHED_IDLE while it
        # starts means something); a session of its own would be a scheduling group of its
        # own where autogroup is on.
        os.setpgid(0, 0)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != zygote_pid:
            os._exit(1)  # the zygote (and so kpoold) is already gone
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        # The log first: a sandbox's path to it is gone once the sandbox is made.
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        if request.get("sandbox") is not None:
            try:  # returns in the kernel's process (pid 2 of its own pid namespace)
                sandboxing.enter(request["sandbox"], request["sandbox_helper"], libc, AFTER_FORK, prefault)
            except (sandboxing.SandboxError, OSError) as e:
                print("kpool-sandbox: %s" % e, file=sys.stderr, flush=True)
                os._exit(125)
            if prebuilt.app is not None:  # its IPython profile is under the zygote's HOME, not this empty one
                try:
                    os.makedirs(prebuilt.app.profile_dir.location, mode=0o700, exist_ok=True)
                    prebuilt.app.profile_dir.check_dirs()
                except OSError as e:
                    print("kpool-sandbox: the IPython profile directory: %s" % e, file=sys.stderr, flush=True)
                    os._exit(125)
        for resource_id, value in request.get("limits", []):
            import resource
            resource.setrlimit(resource_id, (value, value))
        os.environ.clear()
        os.environ.update(request["env"])
        # What the imports set in the zygote (debugpy's PYDEVD_USE_FRAME_EVAL, ...), as a
        # spawned kernel's imports would have set it.
        for name, value in env_set_by_imports.items():
            os.environ.setdefault(name, value)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        preloading.unshadow(PRELOADED, os.getcwd())
        # Fresh random streams: a forked child would otherwise repeat its siblings'.
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        sys.argv = [sys.executable, "-m", "ipykernel_launcher"] + request["args"]
        if refused is None:
            start_prebuilt_kernel(prebuilt, request, report,
                                  lambda: report_used_modules(imports_sock, base_modules, running=True))
        else:
            if prebuilt.app is not None:
                prebuilt.discard()
            from ipykernel.kernelapp import IPKernelApp
            IPKernelApp.launch_instance(argv=request["args"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    # What this kernel used, for the pool to learn from.
    try:
        report_used_modules(imports_sock, base_modules, running=False)
    except Exception:
        traceback.print_exc()
    # A sample's whole life, if its user ran a cell (priming stores no history): what it wrote.
    if report is not None:
        try:
            if prebuilt.shell is not None and prebuilt.shell.execution_count > 1:
                pages.send_page_report(report, "life")
        except Exception:
            traceback.print_exc()
        os.close(report.fd)
    # As an interpreter that ends normally would: atexit functions (IPython's history
    # end_session, ipykernel's connection file cleanup), then the final flush.
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def may_leave_sched_idle():
    """Whether this process may return from SCHED_IDLE to SCHED_OTHER (sched(7))."""
    import resource
    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20


class Zygote:
    """Serves fork requests: reads them from the channel, forks (the policy decides fast or
    slow path, the learner whether this child reports its hot pages), reaps and reports."""

    def __init__(self, channel, policy, learner, after_fork, env_set_by_imports, preload_report):
        self.pid = os.getpid()
        self.preload_report = preload_report
        # Each kernel's datagram of the modules it used (used_modules), sent as it ends.
        self.imports_r, self.imports_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.imports_r.setblocking(False)
        self.base_modules = {n.partition(".")[0] for n in list(sys.modules)}
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.channel = channel
        self.policy = policy
        self.learner = learner
        self.after_fork = after_fork
        self.env_set_by_imports = env_set_by_imports
        self.idle_forks = may_leave_sched_idle()
        madvise = self.libc.madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        after_fork.populate = lambda address, length: madvise(address, length, pages.MADV_POPULATE_WRITE)

    def serve(self):
        # A zygote built in the background (a rebuild with what the pool learned) started at
        # SCHED_IDLE; serving forks is foreground work.
        if os.sched_getscheduler(0) == os.SCHED_IDLE and self.idle_forks:
            self.back_to_normal_priority()
        self.channel.send({"ready": self.pid, "threads": threading.active_count(),
                           "prebuilt": self.policy.why_not is None, "why_not": self.policy.why_not,
                           "preload": self.preload_report})
        if self.learner.initial() is not None:
            self.channel.send(self.learner.initial())
        while True:
            watched = [self.channel.sock, self.channel.wake_r, self.imports_r] + self.learner.fds()
            readable, _, _ = select.select(watched, [], [])
            if self.imports_r in readable:
                self.forward_imports()
            if self.channel.wake_r in readable:
                self.channel.drain_wakeups()
                reap_children(self.channel)
            for fd in self.learner.fds():
                if fd in readable:
                    learned = self.learner.read(fd)
                    if learned is not None:
                        self.channel.send(learned)
            if self.channel.sock in readable:
                lines = self.channel.lines()
                if lines is None:
                    return  # kpoold is gone; our children die with us (parent-death signal)
                for line in lines:
                    self.handle(line)

    def forward_imports(self):
        while True:
            try:
                data = self.imports_r.recv(1 << 20)
            except BlockingIOError:
                return
            try:
                used = json.loads(data)
                self.channel.send({"imports": int(used["pid"]), "modules": used["modules"], "other": used["other"],
                                   "running": bool(used.get("running", False))})
            except (ValueError, KeyError, TypeError):
                pass  # a kernel's (not ours to trust blindly): dropped

    def handle(self, line):
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("fork"), int):
                raise ValueError("not a fork request")
            for key, kind in (("args", list), ("env", dict), ("log", str)):
                if not isinstance(request.get(key), kind):
                    raise ValueError("'%s' missing or not a %s" % (key, kind.__name__))
        except ValueError as e:
            self.channel.send({"error": "unreadable request (%s): %.200r" % (e, line)})
            return
        try:
            self.fork(request)
        except Exception as e:  # a bug of ours fails one kernel, not the zygote and its kernels
            traceback.print_exc()
            self.channel.send({"failed": request["fork"], "error": "%s: %s" % (type(e).__name__, e)})

    def back_to_normal_priority(self):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError as e:  # not expected after may_leave_sched_idle(); stop dropping
            self.idle_forks = False
            print("zygote: cannot leave SCHED_IDLE (%s): forks stay at this priority" % e,
                  file=sys.stderr, flush=True)

    def fork(self, request):
        refused = self.policy.refused(request)
        report = self.learner.ask() if refused is None else None
        at_idle = bool(request.get("idle")) and self.idle_forks
        # Forked at SCHED_IDLE, the child inherits it; setting it again in the child could undo
        # kpoold's return to SCHED_OTHER (hurry) made between the pid's report and the child's
        # first step. Only a zygote that may not leave SCHED_IDLE lets the child drop alone.
        self.after_fork.sched_idle = bool(request.get("idle")) and not at_idle
        saved_prefault = self.after_fork.prefault
        if refused is not None:
            self.after_fork.prefault = []
        elif report is not None:  # a sample: what it writes, it reports
            self.after_fork.prefault = self.learner.start_prefault
        # A sandboxed kernel is the child's child: that fork pre-faults (zygote_sandbox.py).
        prefault = self.after_fork.prefault
        if request.get("sandbox") is not None:
            self.after_fork.prefault = []
        if at_idle:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        try:
            pid = os.fork()
        except OSError as e:
            if at_idle:
                self.back_to_normal_priority()
            self.channel.send({"failed": request["fork"], "error": "fork: %s" % e})
            if report is not None:
                self.learner.fork_failed(report)
            return
        finally:
            self.after_fork.prefault = saved_prefault
        if pid == 0:
            try:  # nothing of the zygote's plumbing survives into the kernel
                self.channel.close_in_child()
                self.learner.close_in_child()
                self.imports_r.close()
            except BaseException:
                os._exit(1)  # never back into the zygote's loop
            become_kernel(request, refused, report, self.pid, self.libc, self.policy.prebuilt,
                          self.env_set_by_imports, self.imports_w, self.base_modules, prefault)
        if at_idle:
            self.back_to_normal_priority()
        if report is not None:
            os.close(report.fd)
        self.channel.send({"forked": request["fork"], "pid": pid, "prebuilt": refused is None,
                           "why_not": refused, "at_idle": at_idle})


def main():
    global PRELOADED, IMPORTS_EVERY_S
    path, startup_code = sys.argv[1], sys.argv[2]
    template = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    prime = len(sys.argv) > 4 and sys.argv[4] == "prime"
    plan = json.loads(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else None
    prefault = plan.get("prefault", "learn") if isinstance(plan, dict) else "learn"
    if prefault not in ("learn", "start", "off"):
        prefault = "learn"
    if isinstance(plan, dict) and isinstance(plan.get("imports_every_s"), (int, float)):
        IMPORTS_EVERY_S = max(0, plan["imports_every_s"])
    env_at_start = dict(os.environ)
    own = ZYGOTE_ONLY_ENV not in os.environ
    if own:
        os.environ[ZYGOTE_ONLY_ENV] = "1"
    preloader = preloading.Preloader(plan if isinstance(plan, dict) else {},
                                     HELPER_SOURCES.get("zygote_warm_ups.py", ""))
    limit = preloading.BackgroundLimit(BACKGROUND_LIMIT_S, may_leave_sched_idle())
    with preloading.EnvironmentReads() as reads:
        preload(startup_code)
        prebuilt = Prebuilt(template or [], prime)
        why_not = "no argument template" if template is None else prebuilt.build()
        threads, fds = threading.active_count(), preloading.open_fds()
        cwd = os.getcwd()
        preloader.run(prebuilt.shell if why_not is None else None)
        limit.disarm()
        os.chdir(cwd)
        if why_not is None and threading.active_count() != threads:
            why_not = "pre-importing the learned modules started a thread"
        elif why_not is None and preloading.open_fds() - fds:
            why_not = "pre-importing the learned modules left file descriptor(s) open"
    PRELOADED = tuple(preloader.names)
    if own:
        del os.environ[ZYGOTE_ONLY_ENV]
    if why_not is not None and prebuilt.app is not None:
        prebuilt.discard()
    env_set_by_imports = {k: v for k, v in os.environ.items() if env_at_start.get(k) != v}
    gc.collect()
    gc.freeze()  # the first full collection in a kernel would touch (and copy) every object
    Zygote(Channel(path), FastPathPolicy(prebuilt, why_not, reads.names, env_at_start),
           pages.HotPageLearner(AFTER_FORK, prefault, nothing_to_learn=why_not is not None), AFTER_FORK,
           env_set_by_imports, preloader.report).serve()


main()
