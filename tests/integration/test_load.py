"""50 clients acquiring, releasing, abandoning and hanging up on real ipykernel (and fake,
ipc) pools for KPOOL_LOAD_SECONDS (default 60): afterwards status matches the live processes,
no file is left for a released kernel, and the daemon's fds and memory are back where they
were. bench/run.py --only 7 runs the same population for longer (the soak)."""
import os
import sys

from conftest import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import loadgen  # noqa: E402

SECONDS = float(os.environ.get("KPOOL_LOAD_SECONDS", "60"))
# Allocator caches and libzmq's per-peer buffers may keep some memory after a storm of 50
# clients; what matters is that it does not grow with the number of requests served.
RSS_SLACK_KIB = 16 * 1024


def test_fifty_clients_for_a_minute_leave_nothing_behind(kpoold):
    d = kpoold("""
        [pools.python3]
        kernelspec = "python3"
        size = 2
        max_starting = 2
        [pools.fake]
        kernelspec = "fake"
        size = 4
        max_starting = 4
        transport = "ipc"
    """, daemon_toml="max_kernels = 24")
    d.wait_warm("python3", 2, timeout=60)
    d.wait_warm("fake", 4)
    pid = d.proc.pid
    kernels_dir = os.path.join(d.runtime_dir, "kernels")
    loadgen.run_load(d.endpoint, ["fake"], clients=4, duration=1)  # first-use allocations
    loadgen.settle(d.endpoint)
    fds_before, rss_before = loadgen.fd_count(pid), loadgen.rss_kib(pid)
    targets_before = loadgen.fd_targets(pid)

    result = loadgen.run_load(d.endpoint, ["python3", "fake", "fake"], clients=50, duration=SECONDS)
    outcomes = result["outcomes"]
    print("outcomes:", outcomes, "p50 acquire ms:",
          result["acquire_ms"][len(result["acquire_ms"]) // 2] if result["acquire_ms"] else None)
    unexpected = {k: v for k, v in outcomes.items()
                  if k.startswith("error:") and k not in ("error:timeout", "error:capacity")}
    assert not unexpected, outcomes
    assert outcomes.get("released", 0) > 100 and outcomes.get("abandoned", 0) > 0
    assert outcomes.get("hung_up", 0) > 0

    loadgen.settle(d.endpoint)
    assert loadgen.audit(pid, d.endpoint, kernels_dir, ipc_pools={"fake"}) == []
    assert d.rpc(op="ping")["ok"]
    fds_after = loadgen.wait_fds(pid, fds_before)
    assert fds_after <= fds_before, (fds_before, fds_after, loadgen.fd_difference(
        targets_before, loadgen.fd_targets(pid)))
    rss_after = loadgen.rss_kib(pid)
    if os.environ.get("KPOOL_SANITIZED") != "1":  # ASan's quarantine holds freed memory
        assert rss_after <= rss_before + RSS_SLACK_KIB, (rss_before, rss_after)
    print("fds %d -> %d, rss %d -> %d KiB" % (fds_before, fds_after, rss_before, rss_after))
