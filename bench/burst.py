"""bench/run.py's scenario 16: an acquire burst from 50 processes while the pool refills behind it
(issue #23).

50 client processes (each its own interpreter and DEALER socket, as 50 notebook servers or
serverless callers would be) wait at a barrier, then each sends one request at once and times its
reply. Against a fork pool of 50 warm real ipykernels, each acquire takes a kernel the pool starts
replacing at once, so the burst's replies race the refill (the zygote's forks and the new kernels'
start-up) for the 2 cores. Baseline, in the same run and from the same processes: the same burst
against a bare ZeroMQ ROUTER echo server (`kpool-bench echo-server`). Medians over the bursts of
each burst's p50 and p99."""
import multiprocessing
import os
import statistics
import subprocess
import tempfile
import time

from benchlib import Daemon, percentile

CLIENTS = 50


def client(endpoint, request, barrier, results):
    import json
    import zmq
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    barrier.wait()
    t = time.perf_counter()
    sock.send_multipart([b"", json.dumps(request).encode()])
    ok = sock.poll(60000)
    elapsed = time.perf_counter() - t
    reply = json.loads(sock.recv_multipart()[-1]) if ok else None
    results.put((elapsed * 1000, reply))
    sock.close()


def burst(endpoint, request):
    """Latencies (ms) of CLIENTS processes sending `request` at once; and their replies."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(CLIENTS + 1), ctx.Queue()
    procs = [ctx.Process(target=client, args=(endpoint, request, barrier, results)) for _ in range(CLIENTS)]
    for p in procs:
        p.start()
    barrier.wait()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    return [ms for ms, _ in got], [reply for _, reply in got]


def acquire_burst(b):
    rounds = 3 if b.args.quick else 5
    echo_endpoint = "ipc://%s/echo" % tempfile.mkdtemp(prefix="kpool-echo-")
    echo = subprocess.Popen([b.tool, "echo-server", echo_endpoint])
    d = Daemon(b.kpoold, '[pools.python3]\nsize = %d\nlauncher = "fork"\n' % CLIENTS, max_kernels=3 * CLIENTS)
    rows = {"echo": [], "acquire": []}
    refilling = []
    try:
        for _ in range(rounds):
            d.wait_warm("python3", CLIENTS, timeout=600)
            time.sleep(2.0)  # the last refill's CPU has settled
            latencies, _ = burst(echo_endpoint, {"op": "ping"})
            rows["echo"].append((percentile(latencies, 50), percentile(latencies, 99)))
            time.sleep(0.5)
            latencies, replies = burst(d.endpoint, {"op": "acquire", "pool": "python3", "timeout_ms": 0})
            assert all(r and r["ok"] for r in replies), [r for r in replies if not (r and r["ok"])][:3]
            refilling.append(d.pool("python3")["starting"])
            rows["acquire"].append((percentile(latencies, 50), percentile(latencies, 99)))
            for r in replies:
                d.rpc(op="release", kernel_id=r["kernel_id"])
    finally:
        d.close()
        echo.kill()
    p50 = {k: statistics.median(x[0] for x in v) for k, v in rows.items()}
    p99 = {k: statistics.median(x[1] for x in v) for k, v in rows.items()}
    ratio = p50["acquire"] / p50["echo"]
    b.md("## 16. An acquire burst from %d processes while the pool refills" % CLIENTS, "",
         "%d client processes send one request each at once: acquires from a fork pool of %d warm "
         "ipykernels (the taken kernels replaced from 50 ms after the first acquire; kernels still starting right after each "
         "burst: %s), and the same burst against a bare ZeroMQ echo server. Medians over %d bursts."
         % (CLIENTS, CLIENTS, refilling, rounds), "",
         "| server | p50 ms | p99 ms |", "| --- | --- | --- |",
         "| echo (bare ROUTER) | %.2f | %.2f |" % (p50["echo"], p99["echo"]),
         "| kpoold acquire, refill behind | %.2f | %.2f |" % (p50["acquire"], p99["acquire"]), "",
         "Ratio (p50): **%.2fx** the echo server's." % ratio, "")
    b.results["acquire_burst"] = {"rows": rows, "ratio": ratio, "starting_after": refilling}
