"""bench/run.py's scenario 14: the first result as fast as the hundredth (issue #23).

A pooled kernel is handed out warm, but its first execute used to pay for the kernel's lazy
set-up. For each kernel (python3 forked and spawned, xpython, ir), with the pool's `prime` off and
on in the same run: acquire a warm kernel while the pool refills behind, connect a
jupyter_client BlockingKernelClient, read kernel_info, then run ten one-line cells and compare
the first round trip (execute_request to the idle status that ends it) with the median of the
next nine. Each cell waits PAUSE seconds before it is sent, the first one included, so that all
ten meet the same conditions (a person types between cells; back to back, later cells would also
win from caches still warm from the previous one)."""
import queue
import statistics
import time

from jupyter_client import BlockingKernelClient

from benchlib import Daemon

PAUSE = 0.2
CELLS = 10
CASES = [  # label, pool table, one-line cell
    ("python3, fork", '[pools.k]\nkernelspec = "python3"\nlauncher = "fork"\nsize = 2\n', "1+1"),
    ("python3, spawn", '[pools.k]\nkernelspec = "python3"\nlauncher = "spawn"\nsize = 2\n', "1+1"),
    ("xpython", '[pools.k]\nkernelspec = "xpython"\nsize = 2\n', "1+1"),
    ("ir", '[pools.k]\nkernelspec = "ir"\nsize = 2\n', "1+1"),
]
# Primed only: a spawned pool's refill 50 ms after the acquire (a fork pool's delay) instead of
# its own default of 1 s, for the A/B of that default (daemon/core/refill_delay.hpp).
EARLY_REFILL = [
    ("xpython, refill_delay_s = 0.05",
     '[pools.k]\nkernelspec = "xpython"\nsize = 2\nrefill_delay_s = 0.05\n', "1+1"),
]


def round_trip(kc, code):
    """Seconds from sending an execute_request to the kernel's idle status for it."""
    t = time.perf_counter()
    msg_id = kc.execute(code)
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            return time.perf_counter() - t


def drain_iopub(kc):
    try:
        while True:
            kc.get_iopub_msg(timeout=0.05)
    except queue.Empty:
        pass


def one_kernel(d, code):
    """(first, median of the rest) in ms, and the first cell's execution_count."""
    r = d.rpc(op="acquire", pool="k", timeout_ms=120000)
    assert r["ok"], r
    kc = BlockingKernelClient()
    kc.load_connection_file(r["connection_file"])
    kc.start_channels()
    try:
        kc.kernel_info(reply=True, timeout=60)
        drain_iopub(kc)
        times = []
        for _ in range(CELLS):
            time.sleep(PAUSE)
            times.append(round_trip(kc, code) * 1000)
        return times[0], statistics.median(times[1:])
    finally:
        kc.stop_channels()
        kc.context.destroy(linger=0)
        d.rpc(op="release", kernel_id=r["kernel_id"])


def measure(b, table, code, prime, kernels):
    d = Daemon(b.kpoold, table + "prime = %s\n" % ("true" if prime else "false"))
    firsts, rests = [], []
    try:
        for _ in range(kernels):
            d.wait_warm("k", 2, timeout=300)
            time.sleep(0.5)  # the refill behind the last acquire has settled
            first, rest = one_kernel(d, code)
            firsts.append(first)
            rests.append(rest)
    finally:
        d.close()
    return statistics.median(firsts), statistics.median(rests)


def first_result(b):
    kernels = 4 if b.args.quick else 7
    rows, results = [], {}
    runs = [(case, prime) for case in CASES for prime in (False, True)]
    runs += [(case, True) for case in EARLY_REFILL]
    for (label, table, code), prime in runs:
        first, rest = measure(b, table, code, prime, kernels)
        ratio = first / rest
        results["%s prime=%s" % (label, prime)] = {"first_ms": first, "next_ms": rest, "ratio": ratio}
        rows.append("| %s | %s | %d | %.1f | %.1f | **%.2f** |"
                    % (label, "on" if prime else "off", kernels, first, rest, ratio))
    b.md("## 14. The first result on a pooled kernel", "",
         "Per kernel: the first `1+1` round trip (execute_request to its idle status, through "
         "jupyter_client) against the median of the next nine, cells %.1f s apart; medians over "
         "the kernels. `prime` is the pool option (on by default). The refill behind each acquire "
         "starts 50 ms after it in the fork pool and 1 s after it in the spawned ones (their "
         "default); the last row starts xpython's after 50 ms too." % PAUSE, "",
         "| kernel | prime | kernels | first ms | next nine ms | first / next |",
         "| --- | --- | --- | --- | --- | --- |", *rows, "")
    b.results["first_result"] = results
