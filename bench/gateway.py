"""bench/run.py's scenario 18: kpool serve as the Kernel Gateway of a notebook server (issue #22).

Three jupyter_server 1.23 instances side by side in one run: one with a local plain python3
kernelspec, one with `--gateway-url` pointing at kpool serve (in front of a kpoold pool of 4 that
refills behind), one pointing at Jupyter Kernel Gateway 2.5.2 (../shared/anchors, its
jupyter_websocket mode, which starts a kernel per request). Each run is what a person opening a
notebook waits for: POST /api/kernels, the kernel websocket, `1+1` to its execute_result; then
a restart of that kernel to its next result; runs alternate between the servers. A fourth
jupyter_server, pointing at kpool serve too, runs kpool's notebook server extension
(kpool.server_extension, which installing the kpool package enables: TCP_NODELAY on its websockets
to the front end and to the gateway, and jupyter_server 1.x's gateway websocket keeping what the
front end sends before it connects): what it saves is jupyter_server's own wait for the peer's
delayed ACK and its lost first messages, which every other server here pays alike. Last, an
execute round trip over kpool serve's websocket against the same over ZeroMQ to a pooled
kernel directly (jupyter_client), both from one synchronous client; and what kpool serve's spare
kernels take out of a start and a restart, measured without a notebook server in between: a
plain websocket client against two kpool serves on the same pool, `--spares 1` and
`--spares 0`, request by request in turn."""
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid

from benchlib import PYTHON, Daemon
from notebook_server import RESEND_AFTER, Server, first_result, free_port
from serve import stop_peer

ANCHORS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "shared", "anchors")


# Longer than kpool serve's once-a-second check, which replaces a spare a gateway start took.
SPARE_BACK = 1.1

JSON = {"Content-Type": "application/json"}  # kpool serve answers 415 to a POST without it
NODELAY = "gateway: kpool serve, jupyter_server + kpool.server_extension"


def start_kpool_serve(b, endpoint, *args):
    proc = subprocess.Popen([os.path.join(b.args.build, "kpool"), "--endpoint", endpoint, "serve",
                             "--no-token", "--listen", "127.0.0.1:0", "--queue-timeout", "60", *args],
                            stderr=subprocess.PIPE, text=True)
    url = "http://" + re.search(r"://(127\.0\.0\.1:\d+)/", proc.stderr.readline()).group(1)
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, url


def start_kernel_gateway(work, env):
    port = free_port()
    log = open(os.path.join(work, "kg.log"), "wb")
    proc = subprocess.Popen([PYTHON, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                             "--KernelGatewayApp.port=%d" % port,
                             "--JupyterWebsocketPersonality.list_kernels=True"],
                            env=dict(env, PYTHONPATH=os.path.join(ANCHORS, "kernel_gateway")),
                            stdout=subprocess.DEVNULL, stderr=log, cwd=work)
    import urllib.request
    end = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api" % port, timeout=2)
            return proc, "http://127.0.0.1:%d" % port
        except OSError:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("Kernel Gateway did not start (see %s)" % log.name)
            time.sleep(0.2)


def ws_execute(ws, until):
    """`1+1` over a kernel websocket (websocket-client), read until its message of type `until`."""
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": "b",
                                   "username": "b", "version": "5.3", "date": ""},
                        "parent_header": {}, "metadata": {}, "channel": "shell",
                        "content": {"code": "1+1", "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False}}))
    while True:
        m = json.loads(ws.recv())
        if m["msg_type"] == until and m["parent_header"]["msg_id"] == msg_id:
            return


def round_trips(b, d, serve_url, n):
    """Milliseconds per execute round trip (request -> execute_reply): over kpool serve's
    websocket, and over ZeroMQ to a pooled kernel with jupyter_client."""
    import jupyter_client
    import urllib.request
    import websocket
    req = urllib.request.Request(serve_url + "/api/kernels", method="POST", data=b"{}", headers=JSON)
    kid = json.loads(urllib.request.urlopen(req, timeout=60).read())["id"]
    ws = websocket.create_connection(serve_url.replace("http", "ws") + "/api/kernels/%s/channels" % kid, timeout=60)
    over_ws = []
    for i in range(n + 3):
        t0 = time.perf_counter()
        ws_execute(ws, "execute_reply")
        if i >= 3:
            over_ws.append((time.perf_counter() - t0) * 1000)
    ws.close()
    urllib.request.urlopen(urllib.request.Request(serve_url + "/api/kernels/" + kid, method="DELETE"), timeout=60)

    lease = d.rpc(op="acquire", pool="python3", timeout_ms=60000)
    client = jupyter_client.BlockingKernelClient()
    client.load_connection_info(lease["connection"])
    client.start_channels()
    client.wait_for_ready(timeout=30)
    over_zmq = []
    for i in range(n + 3):
        t0 = time.perf_counter()
        msg_id = client.execute("1+1")
        while client.get_shell_msg(timeout=30)["parent_header"].get("msg_id") != msg_id:
            pass
        if i >= 3:
            over_zmq.append((time.perf_counter() - t0) * 1000)
    client.stop_channels()
    d.rpc(op="release", kernel_id=lease["kernel_id"])
    return over_ws, over_zmq


def direct_first_result(url, work, restart_id=None):
    """Milliseconds from a start (POST /api/kernels with KERNEL_WORKING_DIR, as jupyter_server
    sends it) or a restart to the execute_result of `1+1`, over a plain websocket; the kernel id."""
    import urllib.request
    import websocket
    t0 = time.perf_counter()
    if restart_id:
        req = urllib.request.Request(url + "/api/kernels/%s/restart" % restart_id, method="POST", data=b"{}", headers=JSON)
    else:
        body = {"name": "python3", "env": {"KERNEL_WORKING_DIR": work, "KERNEL_USERNAME": "bench"}}
        req = urllib.request.Request(url + "/api/kernels", method="POST", data=json.dumps(body).encode(),
                                     headers=JSON)
    kid = json.loads(urllib.request.urlopen(req, timeout=60).read())["id"]
    ws = websocket.create_connection(url.replace("http", "ws") + "/api/kernels/%s/channels" % kid, timeout=60)
    ws.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ws_execute(ws, "execute_result")
    elapsed = (time.perf_counter() - t0) * 1000
    ws.close()
    return elapsed, kid


def spares_ab(b, d, urls, work, runs):
    """{label: {"start": [ms], "restart": [ms]}} for each kpool serve in `urls`, in turn."""
    import urllib.request
    out = {label: {"start": [], "restart": []} for label in urls}
    for i in range(runs + 1):  # the first round unmeasured: first-use costs
        for label, url in urls.items():
            d.wait_warm("python3", 4, timeout=300)
            # A start or restart that takes the spare has it replaced at kpool serve's next
            # once-a-second check: a person restarts a kernel seconds after starting it.
            time.sleep(SPARE_BACK)
            ms, kid = direct_first_result(url, work)
            d.wait_warm("python3", 4, timeout=300)
            time.sleep(SPARE_BACK)
            ms_restart, _ = direct_first_result(url, work, restart_id=kid)
            urllib.request.urlopen(urllib.request.Request(url + "/api/kernels/" + kid, method="DELETE"), timeout=60)
            if i > 0:
                out[label]["start"].append(ms)
                out[label]["restart"].append(ms_restart)
    return out


def gateway_bench(b):
    runs = 5 if b.args.quick else 11
    work = tempfile.mkdtemp(prefix="kpool-bench-gateway-")
    d = Daemon(b.kpoold, '[pools.python3]\nsize = 4\n')
    procs, servers = [], {}
    steps = {}
    try:
        # PYTHONPATH: the kpool package, for the kpool.server_extension server.
        env = dict(os.environ, JUPYTER_PATH=os.path.join(work, "share", "jupyter"), PYTHONPATH=b.site)
        d.wait_warm("python3", 4, timeout=300)
        serve, serve_url = start_kpool_serve(b, d.endpoint)
        procs.append(serve)
        targets = {"local kernelspec (no gateway)": None, "gateway: kpool serve": serve_url}
        if os.path.isdir(os.path.join(ANCHORS, "kernel_gateway")):
            kg_dir = os.path.join(work, "kg")
            os.makedirs(kg_dir)
            kg, kg_url = start_kernel_gateway(kg_dir, env)
            procs.append(kg)
            targets["gateway: Kernel Gateway 2.5.2"] = kg_url
        targets[NODELAY] = serve_url
        for name, url in targets.items():
            sub = os.path.join(work, str(len(servers)))
            os.makedirs(sub)
            servers[name] = Server(sub, env, ["--gateway-url=" + url] if url else [], nodelay=name == NODELAY)
            steps[name] = {"start": [], "restart": [], "resent": 0}

        async def all_runs():
            for name, server in servers.items():  # one unmeasured run each: first-use costs
                _, kid, _ = await first_result(server, "python3")
                server.call("DELETE", "/api/kernels/" + kid)
            for _ in range(runs):
                for name, server in servers.items():
                    d.wait_warm("python3", 4, timeout=300)
                    await asyncio.sleep(SPARE_BACK)
                    times, kid, again = await first_result(server, "python3")
                    steps[name]["start"].append(times[3] * 1000)
                    steps[name]["resent"] += again
                    d.wait_warm("python3", 4, timeout=300)
                    await asyncio.sleep(SPARE_BACK)
                    times, kid, again = await first_result(server, "python3", restart_id=kid)
                    steps[name]["restart"].append(times[3] * 1000)
                    steps[name]["resent"] += again
                    server.call("DELETE", "/api/kernels/" + kid)
        asyncio.run(all_runs())
        d.wait_warm("python3", 4, timeout=300)
        over_ws, over_zmq = round_trips(b, d, serve_url, 20 if b.args.quick else 50)
        bare, bare_url = start_kpool_serve(b, d.endpoint, "--spares", "0")
        procs.append(bare)
        ab = spares_ab(b, d, {"--spares 1": serve_url, "--spares 0": bare_url}, work, 10 if b.args.quick else 25)
    finally:
        for server in servers.values():
            server.close()
        for p in procs:
            stop_peer(p)
        d.close()
        shutil.rmtree(work, ignore_errors=True)

    p50 = statistics.median
    rows = ["| %s | %d | **%.1f** | %.1f | %d |" % (name, runs, p50(s["start"]), p50(s["restart"]), s["resent"])
            for name, s in steps.items()]
    ws50, zmq50 = p50(over_ws), p50(over_zmq)
    kpool = p50(steps["gateway: kpool serve"]["start"])
    lines = ["| what | runs | POST -> first result p50 ms | restart -> first result p50 ms | executes sent again |",
             "| --- | --- | --- | --- | --- |", *rows, ""]
    ratios = ["Start: the local kernelspec takes %.1fx as long as kpool serve's gateway"
              % (p50(steps["local kernelspec (no gateway)"]["start"]) / kpool)]
    if "gateway: Kernel Gateway 2.5.2" in steps:
        ratios.append("Kernel Gateway %.1fx" % (p50(steps["gateway: Kernel Gateway 2.5.2"]["start"]) / kpool))
    b.md("## 18. jupyter_server with --gateway-url: kpool serve against Kernel Gateway", "",
         "jupyter_server 1.23 four times: a local plain kernelspec, `--gateway-url` to kpool serve (pool of 4 "
         "refilling behind), `--gateway-url` to Kernel Gateway 2.5.2. Each run: POST /api/kernels, the "
         "websocket, `1+1` to its result; then a restart to the next result. Runs alternate. Medians in ms. "
         "The last row is jupyter_server with kpool's extension (kpool.server_extension: TCP_NODELAY on its "
         "websockets, both ends, and no message lost before its gateway websocket connects): the rest pay "
         "its wait for the peer's delayed ACK and its lost first messages alike. An "
         "execute is sent again when no busy status answers it within %d ms, then twice as long each time "
         "(jupyter_server 1.23 drops a message that comes before its own websocket to the gateway is being "
         "opened)." % (RESEND_AFTER * 1000),
         "", *lines, "; ".join(ratios) + ".", "",
         "Execute round trip (`1+1` to its execute_reply, %d each): over kpool serve's websocket p50 %.2f ms, "
         "over ZeroMQ to a pooled kernel p50 %.2f ms: **%.2fx**." % (len(over_ws), ws50, zmq50, ws50 / zmq50), "",
         "Spare kernels, without a notebook server: a plain websocket client (TCP_NODELAY) against kpool "
         "serve `--spares 1` and `--spares 0` on the same pool, in turn; POST /api/kernels (with "
         "KERNEL_WORKING_DIR, as jupyter_server sends it) or a restart, then the websocket and `1+1` to its "
         "execute_result. Medians in ms:", "",
         "| kpool serve | runs | start -> first result | restart -> first result |", "| --- | --- | --- | --- |",
         *["| %s | %d | **%.1f** | **%.1f** |" % (label, len(v["start"]), p50(v["start"]), p50(v["restart"]))
           for label, v in ab.items()], "")
    b.results["gateway"] = {"steps_ms": steps, "ws_round_trip_ms": over_ws, "zmq_round_trip_ms": over_zmq,
                            "spares_ab_ms": ab}
