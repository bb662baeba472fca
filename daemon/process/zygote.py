"""kpool's fork server ("zygote") for pools with launcher = "fork".

kpoold compiles this file in and starts it with the kernelspec's own interpreter:

    PYTHON -c <this file> SETTINGS_JSON

SETTINGS_JSON is one object (protocol/zygote_protocol.hpp's zygote::settings): "pool" (whose
zygote it is), "socket" (where kpoold listens), "startup_code" (the pool's), "args" (the kernelspec's arguments with
`{connection_file}` unexpanded, or null), "prime" (the pool's `prime`), "preload" (PRELOAD,
below) and "helpers", which maps the zygote's other files to their sources, compiled into kpoold
as this one is: zygote_kernel.py (the child's side of a fork: what a child does to become its
kernel), zygote_preload.py (what it pre-imports, and what a kernel used), zygote_pages.py (the
pages kernels write, pre-faulted), zygote_warm_ups.py (first-use set-up), zygote_sandbox.py (the
sandbox a child makes before it becomes the kernel, for a request that carries one),
zygote_title.py (what ps and top show: that command line replaced by a short title). This file
is the zygote's side.

It imports ipykernel and IPython (and the import statements of the pool's startup_code) once,
then pre-builds what every kernel would build the same way and that holds no thread, socket,
file descriptor or per-kernel identity: the IPKernelApp's configuration (parsed from the
kernelspec's arguments, with `{connection_file}` left as a placeholder) and the
ZMQInteractiveShell (magics, formatters, completer, ...; its history disabled while pre-built).
With "prime" (the pool's `prime`, on by default) a cell then runs through the pre-built
shell as kpoold's priming execute runs in each kernel (languages/python.cpp): silently,
with its value formatted as a user expression, so that the display formatters, the input
transformers and the compiler's caches are built here once; it leaves no trace (execution
count, In/Out, `_`, history are untouched, and the child builds its own history and namespace).
gc.freeze() then keeps the inherited objects out of each kernel's collections, whose first full
pass would otherwise touch (and copy) all of them.

PRELOAD ({"modules": [...], "max_mb": N, "request_env": [...], "prefault": MODE,
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
import random  # noqa: E402,F401  (its at-fork hook after ours; zygote_kernel.py reseeds it)
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402


def helper(name, **given):
    """One of the zygote's other files, whose source kpoold passes as it passes this one's
    (compiled in): run in a namespace of its own, as a module would be, but not importable
    (nothing of kpool's in a kernel's sys.modules). `given`: names it uses from here, set once
    it has run (over its placeholders)."""
    if name not in SETTINGS["helpers"]:
        sys.exit("zygote: its settings have no helper %s" % name)
    namespace = {"__name__": "kpool_" + name.partition(".")[0]}
    exec(compile(SETTINGS["helpers"][name], "<%s>" % name, "exec"), namespace)
    namespace.update(given)
    return types.SimpleNamespace(**namespace)


# SETTINGS_JSON (the module docstring): kpoold's protocol::zygote::settings.
SETTINGS = json.loads(sys.argv[1])
preloading = helper("zygote_preload.py")
pages = helper("zygote_pages.py")
sandboxing = helper("zygote_sandbox.py")
titles = helper("zygote_title.py")
child = helper("zygote_kernel.py", preloading=preloading, pages=pages, sandboxing=sandboxing, titles=titles,
               AFTER_FORK=AFTER_FORK)
PREFAULT_MODES = ("learn", "start", "off")  # config.hpp's prefault_mode
# Read by Python's start-up, by C libraries or lazily by IPython rather than through os.environ
# during our imports: a request must agree on these too before taking the fast path.
WATCHED_ENV = ("HOME", "IPYTHONDIR", "PATH", "LANG", "MPLBACKEND")
WATCHED_ENV_PREFIXES = ("JUPYTER_", "XDG_", "PYTHON", "LC_")
# Set by the zygote for itself only (silences debugpy's frozen-modules warning at import).
ZYGOTE_ONLY_ENV = "PYDEVD_DISABLE_FILE_VALIDATION"
BACKGROUND_LIMIT_S = 5  # a rebuild at SCHED_IDLE goes on at normal priority after this long


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


FIRST_CELL_TRAITS = ("input_hist_raw", "db_input_cache", "db_output_cache", "db_cache_size",
                     "db_log_output", "_i", "_ii", "_iii", "_i00")


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
    # What a loud cell reads first and a silent one never does: traitlets makes these defaults
    # on first use, in every forked kernel's first cell unless made here (kpoold's priming
    # reads the same in a spawned kernel: languages/python.cpp, first_cell_traits_python).
    shell.ast_node_interactivity
    for name in FIRST_CELL_TRAITS:
        getattr(shell.history_manager, name)
    return None


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


def may_leave_sched_idle():
    """Whether this process may return from SCHED_IDLE to SCHED_OTHER (sched(7))."""
    import resource
    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20


class Zygote:
    """Serves fork requests: reads them from the channel, forks (the policy decides fast or
    slow path, the learner whether this child reports its hot pages), reaps and reports."""

    def __init__(self, channel, policy, learner, after_fork, env_set_by_imports, preload_report, preloaded,
                 imports_every_s):
        self.pid = os.getpid()
        self.preload_report = preload_report
        # Each kernel's datagram of the modules it used (used_modules), sent as it ends.
        self.imports_r, imports_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.imports_r.setblocking(False)
        self.libc = ctypes.CDLL(None, use_errno=True)
        # ps and top tell it from its kernels, and say its pool (zygote_title.py).
        titles.set_title(self.libc, ["kpool-zygote", "pool=%s" % SETTINGS.get("pool", "?"), "(%s)" % sys.executable],
                         "kpool-zygote")
        self.channel = channel
        self.policy = policy
        self.learner = learner
        self.after_fork = after_fork
        self.inheritance = child.Inheritance(
            self.pid, self.libc, policy.prebuilt, env_set_by_imports, imports_w,
            {n.partition(".")[0] for n in list(sys.modules)}, preloaded, imports_every_s)
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
            child.become_kernel(request, refused, report, prefault, self.inheritance)
        if at_idle:
            self.back_to_normal_priority()
        if report is not None:
            os.close(report.fd)
        self.channel.send({"forked": request["fork"], "pid": pid, "prebuilt": refused is None,
                           "why_not": refused, "at_idle": at_idle})


def main():
    startup_code, template, prime = SETTINGS["startup_code"], SETTINGS["args"], SETTINGS["prime"]
    plan = SETTINGS["preload"]
    if plan["prefault"] not in PREFAULT_MODES:  # kpoold's config checked it: a mismatch is a bug
        sys.exit("zygote: prefault %r is none of %s" % (plan["prefault"], ", ".join(PREFAULT_MODES)))
    env_at_start = dict(os.environ)
    own = ZYGOTE_ONLY_ENV not in os.environ
    if own:
        os.environ[ZYGOTE_ONLY_ENV] = "1"
    preloader = preloading.Preloader(plan, SETTINGS["helpers"].get("zygote_warm_ups.py", ""))
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
    if own:
        del os.environ[ZYGOTE_ONLY_ENV]
    if why_not is not None and prebuilt.app is not None:
        prebuilt.discard()
    env_set_by_imports = {k: v for k, v in os.environ.items() if env_at_start.get(k) != v}
    gc.collect()
    gc.freeze()  # the first full collection in a kernel would touch (and copy) every object
    Zygote(Channel(SETTINGS["socket"]), FastPathPolicy(prebuilt, why_not, reads.names, env_at_start),
           pages.HotPageLearner(AFTER_FORK, plan["prefault"], nothing_to_learn=why_not is not None), AFTER_FORK,
           env_set_by_imports, preloader.report, tuple(preloader.names), max(0, plan["imports_every_s"])).serve()


main()
