"""kpool serve at kpoold's kernel limit: a refused caller's Retry-After is its turn
(serve/wait_estimate.hpp; issue #53 item 1). A load test of its own, beside test_serve_exec.py."""
import json
import threading
import time

import requests

from serve_fixtures import JSON, Serve


def test_at_the_kernel_limit_retry_after_is_a_polite_callers_turn(kpoold):
    """Issue #53 item 1: at kpoold's max_kernels, with cells that take a while, callers are
    refused; one that waits the Retry-After it was given should come back about when a kernel
    is free for it: the median Retry-After within 2x of the median wait the refused jobs then
    saw (from their first 429 to their kernel), and a job refused about once, not again and
    again (Retry-After: 1 at every refusal before: 3 to 4 refusals a job, 4x under the wait)."""
    d = kpoold('[pools.python3]\nkernelspec = "python3"\nsize = 2\n', daemon_toml="max_kernels = 4")
    d.wait_warm("python3", 2, timeout=60)
    s = Serve(d.endpoint, "--queue-timeout", "3")
    cell_s, jobs, clients = 1.5, 32, 16
    remaining = list(range(jobs))
    lock = threading.Lock()
    done = []  # per job: (start, end, refusals, first Retry-After, its time, status)

    def client():
        while True:
            with lock:
                if not remaining:
                    return
                remaining.pop()
            first, refusals, told, refused_at = time.monotonic(), 0, None, None
            while True:
                r = requests.post(s.url + "/v1/exec", data=json.dumps({"code": "import time; time.sleep(%s)" % cell_s}),
                                  headers=JSON, timeout=120)
                if r.status_code != 429:
                    break
                refusals += 1
                if told is None:
                    told, refused_at = int(r.headers["retry-after"]), time.monotonic()
                time.sleep(int(r.headers["retry-after"]))
            with lock:
                done.append((first, time.monotonic(), refusals, told, refused_at, r.status_code))

    try:
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        assert s.stop() == 0, s.log_text()
    assert [job[-1] for job in done] == [200] * jobs
    refused = [(end - refused_at - cell_s, n, told) for _, end, n, told, refused_at, _ in done if n]
    assert len(refused) >= 5, done  # the limit was reached: callers were refused

    def median(values):
        return sorted(values)[len(values) // 2]

    waited, refusals, told = (median([r[i] for r in refused]) for i in range(3))
    print("\nkernel limit: Retry-After %s s, waited %.1f s, refusals %s" % (told, waited, refusals))
    assert waited / 2 <= told <= waited * 2, (told, waited, refused)
    assert refusals <= 2, refused
