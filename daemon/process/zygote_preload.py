"""What a kpool zygote pre-imports beyond ipykernel (daemon/process/zygote.py runs this file in a
namespace of its own; kpoold passes its source, compiled in, as it does zygote.py's).

Preloader takes the pool's plan (the modules it learned its kernels import, or those its
`preload` lists) and tries each first in a probe child forked from the zygote: it must be an
installed module (ModuleOrigins: the standard library or the interpreter's site directories;
not a user's site directory, a kernel's cwd, a notebook's folder or a path added at run time),
import without error, start no thread, leave no file descriptor open and read no environment
variable that requests set. Those that pass are imported in the zygote while its growth stays
under the plan's `max_mb`, then warmed by the warm-ups table (zygote_warm_ups.py), each tried in
a probe for traces first (Traces). BackgroundLimit lifts a zygote rebuilt at SCHED_IDLE, and
its probes, to normal priority when idle CPU never comes.

In a kernel: unshadow drops a pre-imported module that the kernel's own directory shadows
(./utils.py), and used_modules says which top-level modules the kernel used, for the pool to
learn from.
"""
import importlib
import json
import os
import select
import signal
import site
import sys
import sysconfig
import tempfile
import threading
import types

PROBE_TIMEOUT = 120  # seconds a probe child may take to import a module and warm it
MAX_REPORTED_OTHER = 64  # modules a kernel reports as not installed, at most
PROBES = set()  # probe children running: raised from SCHED_IDLE with the zygote (BackgroundLimit)


class EnvironmentReads:
    """Records every name read through os.environ while installed."""

    def __init__(self):
        self.names = set()
        self._original = os._Environ.__getitem__

    def __enter__(self):
        names, original = self.names, self._original

        def recording_getitem(environ, key):
            names.add(key)
            return original(environ, key)

        os._Environ.__getitem__ = recording_getitem
        return self

    def __exit__(self, *exc):
        os._Environ.__getitem__ = self._original


def open_fds():
    """This process's open file descriptors (not the one listing them, closed by then)."""
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
            fds.add(int(name))
        except OSError:
            pass
    return fds


class ModuleOrigins:
    """Where a top-level module comes from: the interpreter's own (the standard library, its
    site directories: what its packages installed) or anywhere else (a user's site directory,
    a kernel's cwd, a notebook's folder, PYTHONPATH, a path added at run time)."""

    def __init__(self):
        paths = sysconfig.get_paths()
        self.installed = sorted({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
                                | {os.path.realpath(p) for p in site.getsitepackages()})
        try:
            self.user_site = os.path.realpath(site.getusersitepackages())
        except Exception:
            self.user_site = None

    @staticmethod
    def _under(path, directory):
        return path == directory or path.startswith(directory.rstrip("/") + "/")

    def why_not_installed(self, spec):
        """None for an installed module (its importlib spec), else why it does not count."""
        if spec is None:
            return "not found"
        if spec.origin in ("built-in", "frozen") or spec.origin is None and not spec.submodule_search_locations:
            return None
        places = list(spec.submodule_search_locations or []) or [spec.origin]
        for place in places:
            real = os.path.realpath(place)
            if self.user_site and self._under(real, self.user_site):
                return "in a user's site directory (%s)" % os.path.dirname(real)
            if not any(self._under(real, d) for d in self.installed):
                return "not an installed module (found in %s)" % os.path.dirname(real)
        return None

    def of_imported(self, name):
        module = sys.modules.get(name)
        return self.why_not_installed(getattr(module, "__spec__", None)) if module is not None else "not imported"


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Traces:
    """What a piece of code left behind in this process: threads, file descriptors, output on
    fds 1 and 2, files in the working directory, pyplot figures, names in the shell's user
    namespace. Used in probe children only (it moves the cwd and the output fds)."""

    def __init__(self, shell):
        self.shell = shell
        self.dir = tempfile.mkdtemp(prefix="kpool-probe-")
        os.chdir(self.dir)
        self.out = tempfile.TemporaryFile()
        os.dup2(self.out.fileno(), 1)
        os.dup2(self.out.fileno(), 2)
        self.reset()

    def reset(self):
        self.threads, self.fds = threading.active_count(), open_fds()
        self.names = set(self.shell.user_ns) if self.shell is not None else set()
        self.count = self.shell.execution_count if self.shell is not None else None
        sys.stdout.flush()
        sys.stderr.flush()
        self.out.seek(0, os.SEEK_END)
        self.out_at = self.out.tell()

    def remove_dir(self):
        for entry in os.listdir(self.dir):
            try:
                os.unlink(os.path.join(self.dir, entry))
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass

    def left(self, output_matters):
        """None, or what was left behind since the last reset."""
        if threading.active_count() != self.threads:
            return "starts a thread"
        opened = open_fds() - self.fds
        if opened:
            where = []
            for fd in sorted(opened):
                try:
                    where.append(os.readlink("/proc/self/fd/%d" % fd))
                except OSError:
                    where.append(str(fd))
            return "leaves file descriptor(s) open (%s)" % ", ".join(where)
        sys.stdout.flush()
        sys.stderr.flush()
        self.out.seek(0, os.SEEK_END)
        if output_matters and self.out.tell() != self.out_at:
            self.out.seek(self.out_at)
            return "prints %r" % self.out.read(120).decode(errors="replace")
        if os.listdir(self.dir):
            return "leaves a file (%s)" % sorted(os.listdir(self.dir))[0]
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and pyplot.get_fignums():
            return "leaves a figure open"
        if self.shell is not None and (set(self.shell.user_ns) != self.names or
                                       self.shell.execution_count != self.count):
            return "leaves a trace in the shell (names or execution count)"
        return None


def probe_in_child(name, warm_up, shell, request_env):
    """In a probe child: import `name` (and warm it) as the zygote would; what happened."""
    traces = Traces(shell)
    try:
        return try_import(name, warm_up, shell, request_env, traces)
    finally:
        traces.remove_dir()


def try_import(name, warm_up, shell, request_env, traces):
    before = rss_kb()
    with EnvironmentReads() as reads:
        try:
            importlib.import_module(name)
        except BaseException as e:
            return {"why": "import failed: %s: %s" % (type(e).__name__, str(e)[:200])}
    left = traces.left(output_matters=False)
    if left is not None:
        return {"why": left + " at import"}
    read = sorted(n for n in reads.names if isinstance(n, str) and n in request_env)
    if read:
        return {"why": "reads $%s at import, which requests set" % read[0]}
    result = {"kb": rss_kb() - before, "warm_up": None}
    if warm_up is not None:
        traces.reset()
        try:
            warm_up(shell)
            result["warm_up"] = traces.left(output_matters=True)
        except BaseException as e:
            result["warm_up"] = "failed: %s: %s" % (type(e).__name__, str(e)[:200])
    return result


class BackgroundLimit:
    """A zygote rebuilt in the background starts at SCHED_IDLE; on a host with no idle CPU it
    would never get there. After `seconds` it (and the probe it waits for) go on at normal
    priority, as kpoold's starting kernels do after background_limit_s."""

    def __init__(self, seconds, may_leave_sched_idle):
        self.armed = os.sched_getscheduler(0) == os.SCHED_IDLE and may_leave_sched_idle
        if self.armed:
            signal.signal(signal.SIGALRM, self.escalate)
            signal.setitimer(signal.ITIMER_REAL, seconds)

    @staticmethod
    def escalate(*_):
        for pid in [0] + sorted(PROBES):
            try:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
            except OSError:
                pass

    def disarm(self):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


def probe(name, warm_up, shell, request_env):
    """Forks a probe child for `name`; its findings, or why it gave none."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            found = probe_in_child(name, warm_up, shell, request_env)
        except BaseException as e:
            found = {"why": "probe failed: %s: %s" % (type(e).__name__, e)}
        try:
            os.write(w, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(w)
    PROBES.add(pid)
    data, deadline = b"", PROBE_TIMEOUT
    try:
        while True:
            readable, _, _ = select.select([r], [], [], deadline)
            if not readable:
                os.kill(pid, signal.SIGKILL)
                return {"why": "took over %d s to import" % PROBE_TIMEOUT}
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
        PROBES.discard(pid)
    try:
        return json.loads(data)
    except ValueError:
        return {"why": "the probe child died importing it"}


class Preloader:
    """The learned (or listed) modules, tried in probes, imported here under the size cap, then
    warmed (see the module docstring); `report` is what the ready message says of it."""

    def __init__(self, plan, warm_ups_source):
        self.modules = [m for m in plan.get("modules", []) if isinstance(m, str) and module_name(m)]
        self.max_kb = int(plan.get("max_mb", 0)) * 1024
        self.request_env = set(plan.get("request_env", []))
        self.warm_ups = {}
        if warm_ups_source:
            namespace = {}
            exec(compile(warm_ups_source, "<zygote_warm_ups.py>", "exec"), namespace)
            self.warm_ups = namespace.get("WARM_UPS", {})
        self.names = []  # pre-imported here
        self.report = {"preloaded": [], "refused": [], "warmed": [], "warm_ups_refused": [],
                       "growth_mb": 0.0, "rss_mb": round(rss_kb() / 1024, 1)}

    def refuse(self, name, why):
        self.report["refused"].append([name, why])

    def record(self, name, module):
        self.names.append(name)
        path = getattr(module, "__file__", None) or ""
        try:
            mtime = os.stat(path).st_mtime if path else 0
        except OSError:
            mtime = 0
        self.report["preloaded"].append({"name": name, "file": path, "mtime": mtime})

    def run(self, shell):
        origins = ModuleOrigins()
        start = rss_kb()
        to_warm = []
        for name in self.modules:
            top = name.partition(".")[0]
            # Imported already: by an earlier one (pandas brings numpy) or by ipykernel.
            already = name in sys.modules
            if not already:
                # The top level's spec: finding a submodule's would import its package here.
                why = origins.why_not_installed(importlib.util.find_spec(top)) if top not in sys.modules else None
                if why is not None:
                    self.refuse(name, why)
                    continue
            # One warm-up per library.
            warm_up = self.warm_ups.get(top) if top not in {t for t, _ in to_warm} else None
            if already and warm_up is None:
                self.record(name, sys.modules[name])
                continue
            found = probe(name, warm_up, shell, self.request_env)
            if found.get("why"):
                self.refuse(name, found["why"])
                continue
            if already:
                module = sys.modules[name]
            else:
                grown = rss_kb() - start
                if self.max_kb and grown + found.get("kb", 0) > self.max_kb:
                    self.refuse(name, "over the zygote's size cap (%d MB: %.0f MB used, it takes %.0f)"
                                % (self.max_kb // 1024, grown / 1024, found.get("kb", 0) / 1024))
                    continue
                try:
                    module = importlib.import_module(name)
                except BaseException as e:  # passed its probe: not expected
                    self.refuse(name, "import failed: %s: %s" % (type(e).__name__, e))
                    continue
            self.record(name, module)
            if warm_up is not None:
                if found.get("warm_up"):
                    self.report["warm_ups_refused"].append([top, found["warm_up"]])
                else:
                    to_warm.append((top, warm_up))
        for name, warm_up in to_warm:
            try:
                warm_up(shell)
                self.report["warmed"].append(name)
            except BaseException as e:  # passed its probe: not expected, never fatal
                self.report["warm_ups_refused"].append([name, "failed: %s: %s" % (type(e).__name__, e)])
        self.report["growth_mb"] = round((rss_kb() - start) / 1024, 1)
        self.report["rss_mb"] = round(rss_kb() / 1024, 1)


def module_name(name):
    """Whether `name` is a module's dotted name (pandas, matplotlib.pyplot)."""
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def unshadow(preloaded, directory):
    """Drops the pre-imported modules that `directory` (a kernel's cwd, first on its sys.path)
    has a module of the same name for, so that an import finds that one, as in a fresh kernel."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    here = set()
    for entry in entries:
        base, _, ext = entry.partition(".")
        if ext in ("", "py", "pyc") or ext.endswith("so"):
            here.add(base)
    for top in {name.partition(".")[0] for name in preloaded}:
        if top in here:
            for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                del sys.modules[loaded]


def used_modules(base, learned):
    """In a kernel that ends: the modules it used, as {"modules": installed ones, "other":
    [[name, where]]}: the top-level modules it imported beyond the zygote's `base`, and what
    its user namespace holds that is not `base`'s or is one of the `learned` the zygote
    pre-imported: modules by their full name (`plt` is matplotlib.pyplot, the part worth
    pre-importing), and the top-level modules of its objects."""
    names = {n.partition(".")[0] for n in list(sys.modules)} - base
    try:
        from IPython import get_ipython
        shell = get_ipython()
        values = list(shell.user_ns.values()) if shell is not None else []
    except Exception:
        values = []
    learned_tops = {n.partition(".")[0] for n in learned}
    for value in values:
        whole = isinstance(value, types.ModuleType)
        if whole:
            module = getattr(value, "__name__", None)
        else:
            module = getattr(value, "__module__", None)
            if not isinstance(module, str):
                module = getattr(type(value), "__module__", None)
        if not isinstance(module, str):
            continue
        top = module.partition(".")[0]
        if top not in base or top in learned_tops:
            names.update((module, top) if whole else (top,))
    names -= {"__main__", "builtins", "__mp_main__"}
    origins = ModuleOrigins()
    modules, other = [], []
    for name in sorted(names):
        if not module_name(name):
            continue
        top = name.partition(".")[0]
        why = origins.of_imported(top) if top in sys.modules else "not imported"
        if why is None:
            modules.append(name)
        elif len(other) < MAX_REPORTED_OTHER:
            other.append([name, why])
    return {"modules": modules, "other": other}
