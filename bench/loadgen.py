"""A mixed, misbehaving client population for kpoold, shared by the load test
(tests/integration/test_load.py) and the soak scenario of bench/run.py (scenario 7).

Each client thread loops until the time is up, against a random pool each time:
  88%  acquire, hold the kernel a few milliseconds, release it;
   6%  acquire with a 1 s lease and never release (the lease must expire);
   6%  send an acquire (1 s lease) and hang up at once: a reply that finds the client gone
       gives the kernel back to warm, one that reached its connection first ends with the lease.
Afterwards `settle` waits for the pools to refill and `audit` checks that nothing leaked."""
import collections
import json
import os
import re
import random
import threading
import time

import zmq


def _rpc(ctx, endpoint, request, timeout_ms):
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    try:
        sock.connect(endpoint)
        sock.send(json.dumps(request).encode())
        if not sock.poll(timeout_ms):
            return {"ok": False, "error": {"code": "no_reply", "message": "no reply"}}
        return json.loads(sock.recv())
    finally:
        sock.close()


def run_load(endpoint, pools, clients=50, duration=60.0, seed=1):
    """Runs the client population; returns outcome counts and acquire latencies (ms)."""
    ctx = zmq.Context.instance()
    end = time.monotonic() + duration
    lock = threading.Lock()
    outcomes = collections.Counter()
    latencies = []

    def count(what, latency=None):
        with lock:
            outcomes[what] += 1
            if latency is not None:
                latencies.append(latency)

    def client(i):
        rnd = random.Random(seed * 1000 + i)
        while time.monotonic() < end:
            pool = rnd.choice(pools)
            dice = rnd.random()
            if dice < 0.06:
                sock = ctx.socket(zmq.DEALER)
                sock.linger = 0
                sock.connect(endpoint)
                # With a lease: when the reply reaches the client's connection before the
                # hang-up, libzmq gives kpoold no notice that nobody read it, and the kernel
                # counts as handed out until its lease expires.
                sock.send_multipart([b"", json.dumps(
                    {"op": "acquire", "pool": pool, "timeout_ms": 2000, "lease_s": 1.0}).encode()])
                time.sleep(rnd.uniform(0, 0.005))
                sock.close()
                count("hung_up")
                continue
            request = {"op": "acquire", "pool": pool, "timeout_ms": 10000}
            if dice < 0.12:
                request["lease_s"] = 1.0
            start = time.perf_counter()
            reply = _rpc(ctx, endpoint, request, 20000)
            if not reply.get("ok"):
                count("error:" + reply["error"]["code"])
                continue
            count("acquired", (time.perf_counter() - start) * 1000)
            if "lease_s" in request:
                count("abandoned")
                continue
            time.sleep(rnd.uniform(0, 0.02))
            released = _rpc(ctx, endpoint, {"op": "release", "kernel_id": reply["kernel_id"]}, 20000)
            count("released" if released.get("ok") else "error:release_" + released["error"]["code"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"outcomes": dict(outcomes), "acquire_ms": sorted(latencies)}


def status(endpoint):
    reply = _rpc(zmq.Context.instance(), endpoint, {"op": "status"}, 10000)
    assert reply.get("ok"), reply
    return reply


def settle(endpoint, timeout=180.0):
    """Waits until every pool is full and quiet: nothing leased, starting, stopping or waiting."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = status(endpoint)
        if all(p["warm"] == p["size"] and p["leased"] == p["starting"] == p["stopping"] ==
               p["waiting"] == 0 for p in st["pools"]):
            return st
        time.sleep(0.2)
    raise AssertionError("the pools did not settle: %r" % status(endpoint)["pools"])


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_fds(pid, at_most, timeout=10.0):
    """The fd count once it is at most `at_most`, or when the timeout ends: libzmq closes a
    departed client's connection on its own thread, a moment after the client left."""
    end = time.monotonic() + timeout
    while fd_count(pid) > at_most and time.monotonic() < end:
        time.sleep(0.1)
    return fd_count(pid)


def fd_targets(pid):
    """{fd: what it is}: the readlink target, with sockets named by what /proc/net says of
    their inode (unix path or peer, tcp local/remote address), so a count that differs can be
    explained instead of only reported."""
    sockets = _socket_table()
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue  # closed meanwhile
        inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
        out[int(fd)] = target + (" " + sockets.get(inode, "?") if inode else "")
    return out


def _socket_table():
    table = {}
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                fields = line.split()
                table[fields[6]] = "unix " + (fields[7] if len(fields) > 7 else "(unnamed)")
    except OSError:
        pass
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/net/" + name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    table[fields[9]] = "%s %s -> %s" % (name, _address(fields[1]), _address(fields[2]))
        except OSError:
            pass
    return table


def _address(hex_address):
    host, port = hex_address.split(":")
    if len(host) == 8:
        host = ".".join(str(int(host[i:i + 2], 16)) for i in (6, 4, 2, 0))
    return "%s:%d" % (host, int(port, 16))


def fd_difference(before, after):
    """What `after` holds more of than `before`, by kind ("+2 anon_inode:[eventfd]"), then
    the fds of `after` that were not there before, by number: kernels come and go, so the
    numbers move while the kinds say what grew."""
    def kinds(fds):
        return collections.Counter(_kind(what) for what in fds.values())
    grown = kinds(after) - kinds(before)
    new_fds = ["fd %d: %s" % (fd, what) for fd, what in sorted(after.items())
               if before.get(fd) != what]
    return ["+%d %s" % (n, kind) for kind, n in sorted(grown.items())] + new_fds


def _kind(target):
    if target.startswith("socket:["):
        described = target.split("] ", 1)[1] if "] " in target else "?"
        return "socket " + described.split(" ", 1)[0]
    if target.startswith("pipe:["):
        return "pipe"
    return target


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child_pids(pid):
    """Live (non-zombie) children of pid."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            children.append(int(entry))
    return children


def audit(pid, endpoint, kernels_dir, ipc_pools=()):
    """After settle(): every kernel status counts is a live process and vice versa, and the
    only files left are those of the warm kernels. Returns a list of problems (empty: none)."""
    problems = []
    st = status(endpoint)
    counted = sum(p["warm"] + p["starting"] + p["leased"] + p["stopping"] for p in st["pools"])
    # Kernels are kpoold's children, or its zygotes' children for fork pools.
    zygotes = {p["zygote"]["pid"] for p in st["pools"] if (p.get("zygote") or {}).get("pid")}
    live = [k for k in child_pids(pid) if k not in zygotes]
    for zygote in zygotes:
        live += child_pids(zygote)
    if counted != len(live) or sorted(live) != sorted(k["pid"] for k in st["kernels"]):
        problems.append("status counts %d kernels %s, live children %s"
                        % (counted, sorted(k["pid"] for k in st["kernels"]), sorted(live)))
    files = []
    for root, _, names in os.walk(kernels_dir):
        files += [os.path.join(root, n) for n in names]
    json_files = sorted(os.path.basename(f) for f in files if f.endswith(".json"))
    expected = sorted("kernel-%s.json" % k["id"] for k in st["kernels"])
    if json_files != expected:
        problems.append("connection files %s, expected %s" % (json_files, expected))
    ipc_kernels = sum(1 for k in st["kernels"] if k["pool"] in ipc_pools)
    # Sockets live in the run's directory, or in the short directories its <run>.ipc lists.
    socket_dirs = []
    for listing in (f for f in files if f.endswith(".ipc")):
        with open(listing) as f:
            socket_dirs += f.read().split()
    for socket_dir in socket_dirs:
        for root, _, names in os.walk(socket_dir):
            files += [os.path.join(root, n) for n in names]
    # A fork pool's zygote listens on <run>/zN and logs each live kernel it forked to zN-ID.log.
    zygote_files = [f for f in files if re.search(r"/z[0-9]+(-[0-9]+\.log)?$", f)]
    forked = sum(len(child_pids(z)) for z in zygotes)
    logs = [f for f in zygote_files if f.endswith(".log")]
    if len(logs) != forked or len(zygote_files) - len(logs) != len(zygotes):
        problems.append("zygote files %s for %d zygote(s) and %d forked kernels" % (zygote_files, len(zygotes), forked))
    sockets = [f for f in files if not f.endswith((".json", ".lock", ".ipc")) and f not in zygote_files]
    if len(sockets) != 5 * ipc_kernels:
        problems.append("%d ipc socket files for %d ipc kernels: %s" % (len(sockets), ipc_kernels, sockets))
    return problems
