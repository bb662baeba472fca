"""Several kpoolds as one: endpoint lists, and which daemon to ask for a kernel.

Pure code (no sockets), shared by Client and AsyncClient. An endpoint setting may name one
daemon, several separated by commas, or `dns:NAME:PORT` (every A record of NAME, e.g. a
Kubernetes headless Service). The client keeps a short-lived view of each daemon's warm kernels
per pool, from `status` (refreshed at most every `ttl_ms`) and from every acquire reply
(`pool_warm`), and asks the daemon most likely to have one first."""
import random
import socket
import time
from typing import Dict, Iterable, List, Optional, Union

# Errors after which an acquire tries the next daemon: this one cannot serve it now.
FAILOVER_CODES = frozenset({"unreachable", "refused", "capacity", "unavailable", "unknown_pool",
                            "shutting_down"})


def parse_endpoints(setting: Union[str, Iterable[str]]) -> List[str]:
    """'ipc://a,tcp://h:5555' or a list of them; 'dns:NAME:PORT' becomes tcp://IP:PORT for every
    IPv4 address NAME resolves to (sorted, so every client sees the same list)."""
    items = setting.split(",") if isinstance(setting, str) else list(setting)
    endpoints: List[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item.startswith("dns:"):
            name, _, port = item[len("dns:"):].rpartition(":")
            if not name or not port.isdigit():
                raise ValueError("%r: expected dns:NAME:PORT" % item)
            try:
                infos = socket.getaddrinfo(name, int(port), socket.AF_INET, socket.SOCK_STREAM)
            except socket.gaierror as e:
                raise ValueError("%r: cannot resolve %s: %s" % (item, name, e)) from None
            endpoints.extend("tcp://%s:%s" % (ip, port) for ip in sorted({i[4][0] for i in infos}))
        else:
            endpoints.append(item)
    if not endpoints:
        raise ValueError("no endpoint in %r" % (setting,))
    return list(dict.fromkeys(endpoints))  # each daemon once, order kept


class Views:
    """What this client believes about each daemon: warm kernels per pool (and when it learnt
    them), and whether the daemon was unreachable lately."""

    def __init__(self, endpoints: List[str], ttl_ms: int = 1000, down_ms: int = 2000,
                 rng: Optional[random.Random] = None, clock=time.monotonic):
        self.endpoints = list(endpoints)
        self.ttl = ttl_ms / 1000.0
        self.down_for = down_ms / 1000.0
        self.rng = rng or random.Random()
        self.clock = clock
        self.warm: Dict[str, Dict[str, int]] = {e: {} for e in self.endpoints}
        self.learnt: Dict[str, float] = {}  # endpoint -> when its status was last read
        self.down_until: Dict[str, float] = {}

    def stale(self) -> List[str]:
        """Daemons whose view is older than ttl (and not known to be down)."""
        now = self.clock()
        return [e for e in self.endpoints if not self.is_down(e, now)
                and now - self.learnt.get(e, float("-inf")) >= self.ttl]

    def is_down(self, endpoint: str, now: Optional[float] = None) -> bool:
        return self.down_until.get(endpoint, float("-inf")) > (self.clock() if now is None else now)

    def from_status(self, endpoint: str, status: Dict) -> None:
        self.warm[endpoint] = {p["name"]: int(p.get("warm", 0)) for p in status.get("pools", [])
                               if not p.get("removed") and not p.get("drained")}
        self.learnt[endpoint] = self.clock()
        self.down_until.pop(endpoint, None)

    def from_acquire(self, endpoint: str, pool: str, pool_warm: Optional[int]) -> None:
        if pool_warm is not None:
            self.warm[endpoint][pool] = int(pool_warm)
        self.down_until.pop(endpoint, None)

    def failed(self, endpoint: str, pool: Optional[str], code: str) -> None:
        """A request to `endpoint` failed with `code`: it has nothing for `pool` now, or (when
        unreachable) nothing at all for a while."""
        if code in ("unreachable", "refused"):
            self.down_until[endpoint] = self.clock() + self.down_for
        elif pool is not None:
            self.warm[endpoint][pool] = 0

    def order(self, pool: str) -> List[str]:
        """Every daemon, the one to ask first first: most warm kernels of `pool` (random among
        equals); when the views are stale, the better of two picked at random (power of two
        choices) goes first. Daemons down lately come last, in case all others fail."""
        now = self.clock()
        up = [e for e in self.endpoints if not self.is_down(e, now)]
        down = [e for e in self.endpoints if self.is_down(e, now)]
        self.rng.shuffle(up)
        self.rng.shuffle(down)
        warm = lambda e: self.warm[e].get(pool, 0)  # noqa: E731
        fresh = all(now - self.learnt.get(e, float("-inf")) < self.ttl for e in up)
        if fresh or len(up) < 2:
            up.sort(key=warm, reverse=True)  # stable: the shuffle breaks ties
        else:
            a, b = up[0], up[1]
            first = a if warm(a) >= warm(b) else b
            rest = sorted((e for e in up if e != first), key=warm, reverse=True)
            up = [first] + rest
        return up + down


class Owners:
    """Which daemon handed out which kernel, for release, signal and poll (bounded: the oldest
    are forgotten; a forgotten kernel is looked for on every daemon)."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self.by_kernel: Dict[str, str] = {}

    def remember(self, kernel_id: str, endpoint: str) -> None:
        self.by_kernel[kernel_id] = endpoint
        while len(self.by_kernel) > self.capacity:
            self.by_kernel.pop(next(iter(self.by_kernel)))

    def candidates(self, kernel_id: str, endpoints: List[str]) -> List[str]:
        """The owner first if known, then every other daemon."""
        owner = self.by_kernel.get(kernel_id)
        return ([owner] if owner else []) + [e for e in endpoints if e != owner]
