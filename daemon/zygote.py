"""kpool's fork server ("zygote") for pools with launcher = "fork".

kpoold compiles this file in and starts it with the kernelspec's own interpreter:

    PYTHON -c <this file> SOCKET_PATH STARTUP_CODE

It imports ipykernel and IPython (and the import statements of the pool's startup_code) once,
connects to kpoold's Unix socket, then forks one kernel per request: the expensive imports are
paid once instead of per kernel. The zygote holds no ZeroMQ context and starts no threads, so a
fork copies nothing that could be shared by mistake; each child sets itself up as a fresh
process and only then initialises an ordinary IPKernelApp, with its own connection file, key,
ports and random state.

Protocol, one JSON object per line:
  kpoold -> zygote  {"fork": ID, "args": [...], "env": {...}, "cwd": DIR or "", "log": PATH,
                     "limits": [[RESOURCE, VALUE], ...]}
  zygote -> kpoold  {"ready": PID, "threads": N}            once, after the imports
                    {"forked": ID, "pid": PID}  or  {"failed": ID, "error": TEXT}
                    {"exited": PID, "code": CODE, "signal": SIGNUM}
The zygote reaps its children and reports their exits: kpoold is not their parent.
"""
import ast
import ctypes
import json
import os
import random
import select
import signal
import socket
import sys
import threading
import traceback

PR_SET_PDEATHSIG = 1


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


class Zygote:
    def __init__(self, path):
        self.pid = os.getpid()
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the fd

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.send({"exited": pid,
                       "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0,
                       "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0})

    def serve(self):
        self.send({"ready": self.pid, "threads": threading.active_count()})
        buffer = b""
        while True:
            readable, _, _ = select.select([self.sock, self.wake_r], [], [])
            if self.wake_r in readable:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                self.reap()
            if self.sock in readable:
                data = self.sock.recv(65536)
                if not data:
                    return  # kpoold is gone; our children die with us (parent-death signal)
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self.fork(json.loads(line))

    def fork(self, request):
        try:
            pid = os.fork()
        except OSError as e:
            self.send({"failed": request["fork"], "error": "fork: %s" % e})
            return
        if pid == 0:
            self.become_kernel(request)  # never returns
        self.send({"forked": request["fork"], "pid": pid})

    def become_kernel(self, request):
        code = 1
        try:
            # Nothing of the zygote's plumbing survives into the kernel.
            signal.set_wakeup_fd(-1)
            self.sock.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            os.setsid()  # a session of its own: kpoold signals the kernel's process group
            if self.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != self.pid:
                os._exit(1)  # the zygote (and so kpoold) is already gone
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for resource_id, value in request.get("limits", []):
                import resource
                resource.setrlimit(resource_id, (value, value))
            os.environ.clear()
            os.environ.update(request["env"])
            if request.get("cwd"):
                os.chdir(request["cwd"])
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(null)
            os.close(log)
            # Fresh random streams: a forked child would otherwise repeat its siblings'.
            random.seed()
            if "numpy" in sys.modules:
                sys.modules["numpy"].random.seed()
            sys.argv = [sys.executable, "-m", "ipykernel_launcher"] + request["args"]
            from ipykernel.kernelapp import IPKernelApp
            IPKernelApp.launch_instance(argv=request["args"])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def main():
    path, startup_code = sys.argv[1], sys.argv[2]
    preload(startup_code)
    Zygote(path).serve()


main()
