"""bench/run.py's scenario 15: a notebook server's first result (issue #23).

Debian's jupyter_server 1.23 with two kernelspecs: the pooled one (`python3 -m kpool
install-kernelspec`, kernels from a kpoold pool of 4 that refills behind) and the plain python3.
Each run is what a person opening a notebook waits for: POST /api/kernels, open the kernel's
websocket, send `1+1` and read its execute_result. The steps are timed apart (the POST, which holds
the provisioner's acquire; the websocket, which the server opens with its own kernel_info round
trip; the execute) so that what is ours shows. Runs alternate between the two kernelspecs, and
each kernel is deleted (not timed) before the next run.

Beside the server as Debian ships it, the same server with kpool's notebook server extension
(kpool.server_extension, which installing the kpool package enables: TCP_NODELAY on its websockets): the
difference between the two is jupyter_server's own wait for the front end's delayed ACK, the
same for every kernelspec."""
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
import uuid

from benchlib import PYTHON, Daemon

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A jupyter_server on a loopback port with a token, in its own directories."""

    def __init__(self, work, env, extra_args=(), nodelay=False):
        self.port, self.token = free_port(), uuid.uuid4().hex
        self.base = "http://127.0.0.1:%d" % self.port
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "work"), exist_ok=True)
        env = dict(env, JUPYTER_CONFIG_DIR=os.path.join(work, "cfg"),
                   JUPYTER_DATA_DIR=os.path.join(work, "data"), HOME=work)
        self.log = open(os.path.join(work, "server.log"), "wb")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
             "--ServerApp.port=%d" % self.port, "--ServerApp.port_retries=0",
             # The extension as installing the package enables it (python/jupyter-config).
             *(["--ServerApp.jpserver_extensions=kpool.server_extension=True"] if nodelay else []),
             "--ServerApp.token=" + self.token, "--ServerApp.root_dir=" + root, *extra_args],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        end = time.monotonic() + 60
        while True:
            try:
                self.call("GET", "/api/status")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("jupyter_server did not start (see %s)" % self.log.name)
                time.sleep(0.1)
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            if nodelay and "kpool.server_extension: TCP_NODELAY on websockets" not in f.read():
                raise RuntimeError("jupyter_server did not load kpool.server_extension (see %s)" % self.log.name)

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method,
                                     headers={"Authorization": "token " + self.token},
                                     data=json.dumps(body).encode() if body is not None else None)
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read() or b"null")

    def close(self):
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()


async def first_result(server, kernelspec, restart_id=None):
    """Seconds for each step: POST (a start, or a restart of `restart_id`), websocket open,
    execute -> execute_result; the kernel id; and how many times the execute was sent again."""
    from tornado.websocket import websocket_connect
    t0 = time.perf_counter()
    if restart_id:
        kernel = server.call("POST", "/api/kernels/%s/restart" % restart_id, {})
    else:
        # With a path, as a notebook's session has: the kernel's cwd (an acquire with cwd/env).
        kernel = server.call("POST", "/api/kernels", {"name": kernelspec, "path": "work"})
    t1 = time.perf_counter()
    ws = await websocket_connect("ws://127.0.0.1:%d/api/kernels/%s/channels?token=%s"
                                 % (server.port, kernel["id"], server.token))
    t2 = time.perf_counter()
    _, resent = await execute(ws, "1+1")
    t3 = time.perf_counter()
    ws.close()
    return (t1 - t0, t2 - t1, t3 - t2, t3 - t0), kernel["id"], resent


# A request sent before jupyter_server 1.23's own websocket to a gateway is open is dropped (its
# GatewayWebSocketClient.on_message waits on a future that never completes when the message
# comes before the connect has even started): with a gateway behind it, a front end's first
# message is lost now and then. As front ends repeat an unanswered first request, so does this
# client: again after RESEND_AFTER seconds without the request's busy status, then after twice
# as long each time (a kernel that is still starting answers late, and copies would only queue),
# and the first execute_result of any copy counts. Each copy is `1+1`: a duplicate changes nothing.
RESEND_AFTER = 0.1


async def execute(ws, code):
    """Sends an execute_request over a kernel websocket until the kernel says busy for one of
    the copies; returns that copy's execute_result and the number of copies sent again."""
    sent, resent, acknowledged, wait = set(), -1, False, RESEND_AFTER
    while True:
        if not acknowledged:
            msg_id = uuid.uuid4().hex
            sent.add(msg_id)
            resent += 1
            ws.write_message(json.dumps({
                "header": {"msg_id": msg_id, "username": "bench", "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False}}))
        end = time.monotonic() + (wait if not acknowledged else 120)
        wait *= 2
        try:
            while True:
                msg = json.loads(await asyncio.wait_for(ws.read_message(), max(0.001, end - time.monotonic())))
                if msg.get("parent_header", {}).get("msg_id") not in sent:
                    continue
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "busy" and not acknowledged:
                    acknowledged, end = True, time.monotonic() + 120
                if msg["msg_type"] == "execute_result":
                    return msg, resent
        except asyncio.TimeoutError:
            if acknowledged:
                raise


def notebook_server(b):
    runs = 5 if b.args.quick else 11
    work = tempfile.mkdtemp(prefix="kpool-bench-server-")
    d = Daemon(b.kpoold, '[pools.python3]\nsize = 4\n')
    plain, nodelay = "jupyter_server 1.23", "jupyter_server 1.23 + kpool.server_extension"
    servers = {}
    # (server, kernelspec) -> [[POST, websocket, execute, total] per run]
    steps = {(server, spec): [] for server in (plain, nodelay) for spec in ("python3", "python3-pooled")}
    resent = {key: 0 for key in steps}
    try:
        env = dict(os.environ, PYTHONPATH=b.site, JUPYTER_PATH=os.path.join(work, "share", "jupyter"))
        subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3", "--prefix", work,
                        "--endpoint", d.endpoint], check=True, env=env, capture_output=True)
        d.wait_warm("python3", 4, timeout=300)
        for i, name in enumerate((plain, nodelay)):
            sub = os.path.join(work, str(i))
            os.makedirs(sub)
            servers[name] = Server(sub, env, nodelay=name == nodelay)

        async def all_runs():  # one event loop: the client's own first-use costs paid once
            for server, spec in steps:  # one unmeasured run each: the server's first-use costs
                _, kid, _ = await first_result(servers[server], spec)
                servers[server].call("DELETE", "/api/kernels/" + kid)
            for _ in range(runs):
                for server, spec in steps:
                    d.wait_warm("python3", 4, timeout=300)
                    await asyncio.sleep(0.5)
                    times, kid, again = await first_result(servers[server], spec)
                    steps[server, spec].append([t * 1000 for t in times])
                    resent[server, spec] += again
                    servers[server].call("DELETE", "/api/kernels/" + kid)
        asyncio.run(all_runs())
    finally:
        for server in servers.values():
            server.close()
        d.close()
        shutil.rmtree(work, ignore_errors=True)

    def p50(key, i):
        return statistics.median(s[i] for s in steps[key])

    rows = ["| %s | %s | %d | %.1f | %.1f | %.1f | **%.1f** |" % (server, spec, runs, p50((server, spec), 0),
                                                                  p50((server, spec), 1), p50((server, spec), 2),
                                                                  p50((server, spec), 3))
            for server, spec in steps]
    ratio = p50((plain, "python3"), 3) / p50((plain, "python3-pooled"), 3)
    b.md("## 15. jupyter_server: POST /api/kernels to the first result", "",
         "Debian's jupyter_server 1.23; the pooled kernelspec (kpool-provisioner, a pool of 4 refilling "
         "behind) against the plain python3 kernelspec, runs alternating; beside it the same server with "
         "kpool's extension (kpool.server_extension: TCP_NODELAY on its websockets, enabled when the kpool package "
         "is installed), which takes jupyter_server's wait for the client's delayed ACK out of the execute "
         "step. Medians in ms.", "",
         "| server | kernelspec | runs | POST | websocket open | execute -> result | total |",
         "| --- | --- | --- | --- | --- | --- | --- |", *rows, "",
         "Ratio (total p50, jupyter_server as shipped): **%.1fx** faster with the pool. The pooled total "
         "with kpool.server_extension: **%.1f** ms." % (ratio, p50((nodelay, "python3-pooled"), 3)), "")
    b.results["notebook_server"] = {"steps_ms": {"%s / %s" % k: v for k, v in steps.items()}, "ratio": ratio,
                                    "resent": {"%s / %s" % k: v for k, v in resent.items()}}
