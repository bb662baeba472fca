"""The child's side of a zygote's fork (zygote.py is the zygote's side): what a forked child does
to become its kernel. It leaves the zygote's plumbing behind, takes a process group of its own,
opens its log, enters its sandbox (zygote_sandbox.py, for a request that carries one), applies
its limits, environment and cwd, and starts its kernel: from the pre-built app and shell (the
rest of IPKernelApp.initialize, with a history, a namespace and sockets of its own, and kpoold's
kpool_context_request answered on its control channel) or, refused, through
IPKernelApp.launch_instance. As it ends it reports the modules it used (and, a sample, the pages
it wrote) to the zygote.

zygote.py loads this file as it loads its other helpers, giving it `preloading`, `pages`,
`sandboxing` and `titles` (those helpers) and `AFTER_FORK` (its at-fork hook); what each child
takes from its zygote comes in one Inheritance."""
import atexit
import json
import os
import random
import signal
import sys
import traceback

# Given by zygote.py once this file has run (see above).
preloading = pages = sandboxing = titles = AFTER_FORK = None

PR_SET_PDEATHSIG = 1
CONTEXT_REQUEST = b'"kpool_context_request"'


def _launcher_file():
    """ipykernel_launcher's file: what `python -m ipykernel_launcher` makes sys.argv[0]."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("ipykernel_launcher")
    except (ImportError, ValueError):
        spec = None
    return spec.origin if spec is not None and spec.origin else "ipykernel_launcher"


# Looked up once, in the zygote, as this file is loaded: every child has it.
LAUNCHER_FILE = _launcher_file()


class Inheritance:
    """What every child of a zygote takes from it, made once the zygote is built."""

    def __init__(self, zygote_pid, libc, prebuilt, env_set_by_imports, imports_sock, base_modules, preloaded,
                 imports_every_s):
        self.zygote_pid = zygote_pid
        self.libc = libc
        self.prebuilt = prebuilt  # zygote.py's Prebuilt: its app and shell, or None for each
        self.env_set_by_imports = env_set_by_imports  # set by the zygote's imports, as a kernel's would
        self.imports_sock = imports_sock  # where the modules used go, one datagram
        self.base_modules = base_modules  # top-level modules the zygote had before any kernel
        self.preloaded = preloaded  # the modules pre-imported: what a kernel's cwd may shadow
        self.imports_every_s = imports_every_s  # a running kernel's imports report, at most this often


def report_used_modules(inherited, running):
    """One datagram to the zygote (lost if it is gone): the modules this kernel used."""
    used = preloading.used_modules(inherited.base_modules, set(inherited.preloaded))
    inherited.imports_sock.send(json.dumps(dict(used, pid=os.getpid(), running=running)).encode())


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


def start_prebuilt_kernel(request, report, inherited):
    """In the child: the rest of IPKernelApp.initialize, around the pre-built shell."""
    from IPython.core.history import HistoryManager
    prebuilt = inherited.prebuilt
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
    prepared = {}
    kernel.dispatch_control = context_dispatch(kernel, kernel.dispatch_control, inherited.preloaded,
                                               prepared)  # before start()
    shell.kernel = kernel
    shell.parent = kernel
    # This kernel's own history: sqlite connection, session number, _dh from its own cwd.
    shell.configurables.remove(shell.history_manager)
    shell.history_manager = HistoryManager(shell=shell, parent=shell)
    shell.configurables.append(shell.history_manager)
    # The in-memory history a one-shot run's acquire moves the kernel to (kpoold's setup code,
    # languages/python.cpp), made now rather than on the request's path (about 2 ms).
    prepared["kpool_prepared_history"] = HistoryManager(shell=shell, parent=shell, hist_file=":memory:")
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
    if inherited.imports_every_s > 0:
        sample_imports_while_running(shell, inherited.imports_every_s,
                                     lambda: report_used_modules(inherited, running=True))
    app.start()



def context_dispatch(kernel, dispatch_control, preloaded, prepared):
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
    `dispatch_control` (ipykernel's) gets every other message, in order. `prepared` holds what
    kpoold's setup code may use, made while the kernel started (its in-memory history).
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
                preloading.unshadow(preloaded, os.getcwd())
            for name, value in (content.get("env") or {}).items():
                os.environb[name.encode()] = value.encode()
            if content.get("python"):  # kpoold's own setup code (in-memory history)
                exec(content["python"], dict(prepared))
                prepared.clear()  # used once
            reply = {"status": "ok"}
        except Exception as e:
            reply = {"status": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": []}
        kernel.session.send(kernel.control_stream, "kpool_context_reply", reply, request, idents)
        return None
    return dispatch


def become_kernel(request, refused, report, prefault, inherited):
    """The child's side of a fork: leave the zygote's plumbing (already closed by the caller)
    behind, take the request's process group, log, sandbox (zygote_sandbox.py; `prefault` is
    what its kernel pre-faults), limits, environment and cwd, and run the kernel, pre-built or
    not. Never returns."""
    code = 1
    prebuilt, libc = inherited.prebuilt, inherited.libc
    if report is not None:
        report.zygote_ranges = pages.writable_private_ranges()  # as they were at fork: nothing added yet
    try:
        # A process group of its own (kpoold signals the group) in kpoold's session, so
        # that the scheduler weighs it against kpoold's other kernels (SCHED_IDLE while it
        # starts means something); a session of its own would be a scheduling group of its
        # own where autogroup is on.
        os.setpgid(0, 0)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != inherited.zygote_pid:
            os._exit(1)  # the zygote (and so kpoold) is already gone
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        # What a launched kernel has (`PYTHON -m ipykernel_launcher ARGS`): its command line in
        # ps and /proc (not the zygote's title), sys.orig_argv, and sys.argv as -m makes it.
        launched = [sys.executable, "-m", "ipykernel_launcher"] + request["args"]
        titles.set_title(libc, launched, os.path.basename(sys.executable))
        sys.orig_argv = launched
        sys.argv = [LAUNCHER_FILE] + request["args"]
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
        for name, value in inherited.env_set_by_imports.items():
            os.environ.setdefault(name, value)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        preloading.unshadow(inherited.preloaded, os.getcwd())
        # Fresh random streams: a forked child would otherwise repeat its siblings'.
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if refused is None:
            start_prebuilt_kernel(request, report, inherited)
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
        report_used_modules(inherited, running=False)
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
