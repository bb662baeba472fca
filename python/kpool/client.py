"""Clients for kpoold's control socket (protocol v1), synchronous and asyncio.

An endpoint may also be a list of daemons (comma-separated, or `dns:NAME:PORT`): acquires go to
the daemon most likely to have a warm kernel and fail over to the next one (kpool/spread.py);
release, signal and poll go to the daemon that handed the kernel out."""
import dataclasses
import functools
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple, Union

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message, recv_monitor_message

from .spread import FAILOVER_CODES, Owners, Views, parse_endpoints

DEFAULT_TIMEOUT_MS = 5000
# A daemon that has not completed the connection handshake by then is unreachable (a host that
# drops packets); one that refuses the connection or drops it mid-request is so at once.
CONNECT_TIMEOUT_MS = 1000
# An acquire may wait for a kernel this long on the daemon's side when no timeout is given.
DAEMON_DEFAULT_ACQUIRE_MS = 30000


class Error(Exception):
    """A request kpoold refused (code from the protocol); client-side: "unreachable" (no
    answer), "refused" (the daemon would not let this client in: uid or CURVE key), "usage"."""

    def __init__(self, code: str, message: str):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


@dataclasses.dataclass
class Kernel:
    """A kernel acquired from a pool."""
    kernel_id: str
    pool: str
    pid: int
    connection: Dict[str, Any]  # the nine connection-file fields, key as a str
    connection_file: str  # on the daemon's host
    endpoint: str = ""  # the daemon that handed it out

    def connection_info(self) -> Dict[str, Any]:
        """The connection info as jupyter_client wants it: key as bytes."""
        info = dict(self.connection)
        info["key"] = info["key"].encode()
        return info


def default_runtime_dir() -> str:
    """kpoold's runtime directory for this user: $XDG_RUNTIME_DIR/kpool, /run/kpool as root,
    else /tmp/kpool-<uid> (the same rule as the daemon's)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/") and os.path.isdir(xdg):
        return os.path.join(xdg, "kpool")
    if os.geteuid() == 0:
        return "/run/kpool"
    return "/tmp/kpool-%d" % os.geteuid()


def default_endpoint() -> str:
    """$KPOOL_ENDPOINT, else kpoold's default: its control socket in default_runtime_dir()."""
    env = os.environ.get("KPOOL_ENDPOINT")
    if env:
        return env
    return "ipc://%s/control" % default_runtime_dir()


# Handshake failures the monitor socket reports: the daemon refused us.
_REFUSALS = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "not an allowed uid or CURVE key",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "CURVE on one side only, or a wrong server key?",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "the security handshake failed",
}
_REFUSAL_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
# Only events that mean "no reply will come": an event on every request (handshake succeeded)
# would cost each one a wake-up. A daemon that does not complete the handshake within
# CONNECT_TIMEOUT_MS has its connection dropped by libzmq (handshake_ivl): a disconnect.
_WATCHED_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_DISCONNECTED)


class _Exchange:
    """One request's wait: the reply, or what the monitor socket says first (refused, connection
    refused or dropped), or the timeout."""

    def __init__(self, endpoint: str, timeout_ms: int):
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000.0

    def wait_ms(self) -> int:
        """How long to poll next; raises once the wait is over."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(self.endpoint, self.timeout_ms)
        return max(1, int(left * 1000))

    def event(self, event: Dict[str, Any]) -> None:
        """A monitor event: each means no reply will come."""
        kind = event["event"]
        if kind & _REFUSAL_EVENTS:
            raise _refused(self.endpoint, event)
        if kind == zmq.EVENT_CONNECT_RETRIED:
            raise Error("unreachable", "kpoold at %s refused the connection (is it running?)"
                        % self.endpoint)
        raise Error("unreachable", "the connection to kpoold at %s was dropped before a reply "
                    "(kpoold went away, or did not complete the handshake within %d ms)"
                    % (self.endpoint, CONNECT_TIMEOUT_MS))


def _curve_keys(server_key: Optional[str], client_key_file: Optional[str]):
    """(server public, client public, client secret) as bytes, or None without CURVE.
    Defaults: $KPOOL_SERVER_KEY and $KPOOL_CLIENT_KEY_FILE (a file holding a Z85 secret key,
    as `kpool keygen` writes)."""
    server_key = server_key or os.environ.get("KPOOL_SERVER_KEY")
    client_key_file = client_key_file or os.environ.get("KPOOL_CLIENT_KEY_FILE")
    if not server_key and not client_key_file:
        return None
    if not server_key or not client_key_file:
        raise Error("usage", "CURVE needs both server_key ($KPOOL_SERVER_KEY) and "
                    "client_key_file ($KPOOL_CLIENT_KEY_FILE)")
    mode = os.stat(client_key_file).st_mode & 0o7777
    if mode & 0o077:  # as ssh refuses a private key others may read
        raise Error("usage", "the client key file %s may be read by others (mode %04o): chmod 600 it"
                    % (client_key_file, mode))
    with open(client_key_file, "rb") as f:
        secret = f.read().strip()
    return server_key.strip().encode(), zmq.curve_public(secret), secret


def _new_socket(ctx, keys):
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    sock.handshake_ivl = CONNECT_TIMEOUT_MS
    sock.connect_timeout = CONNECT_TIMEOUT_MS
    if keys is not None:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = keys
    return sock


def _refused(endpoint: str, event: Dict[str, Any]) -> Error:
    return Error("refused", "kpoold at %s refused this client: %s"
                 % (endpoint, _REFUSALS.get(event["event"], "handshake failed")))


def _timed_out(endpoint: str, timeout_ms: int) -> Error:
    return Error("unreachable", "no reply from kpoold at %s within %d ms" % (endpoint, timeout_ms))


def _check_reachable(endpoint: str) -> None:
    if endpoint.startswith("ipc://") and not os.path.exists(endpoint[len("ipc://"):]):
        raise Error("unreachable", "no kpoold socket at %s (is kpoold running?)" % endpoint)


def _result(reply: Dict[str, Any]) -> Dict[str, Any]:
    if not reply.get("ok"):
        err = reply.get("error") or {}
        raise Error(err.get("code", "internal"), err.get("message", "(no message)"))
    return reply


def _context_fields(req: Dict[str, Any], cwd, env, history) -> Dict[str, Any]:
    """acquire's and context's cwd, env and history (PROTOCOL.md): absent when not given."""
    if cwd is not None:
        req["cwd"] = os.path.abspath(cwd)
    if env:
        req["env"] = dict(env)
    if history is not None:
        req["history"] = history
    return req


def _acquire_request(pool, timeout_ms, lease_s, cwd, env, history):
    req: Dict[str, Any] = {"op": "acquire", "pool": pool}
    if timeout_ms is not None:
        req["timeout_ms"] = int(timeout_ms)
    if lease_s is not None:
        req["lease_s"] = lease_s
    _context_fields(req, cwd, env, history)
    wait = (timeout_ms if timeout_ms is not None else DAEMON_DEFAULT_ACQUIRE_MS) + DEFAULT_TIMEOUT_MS
    return req, wait


def _kernel(reply: Dict[str, Any], endpoint: str) -> Kernel:
    return Kernel(reply["kernel_id"], reply["pool"], reply["pid"], reply["connection"],
                  reply["connection_file"], endpoint)


Endpoints = Union[str, List[str], None]


class _Daemons:
    """The daemons a client talks to, what it believes about them, and who owns which kernel.
    The requests several daemons need are written once, as plans: generators that yield
    (request, timeout_ms, endpoint) and are sent back the reply or the Error, for Client and
    AsyncClient to carry out with their own sockets."""

    def __init__(self, endpoint: Endpoints, view_ttl_ms: int):
        try:
            self.endpoints = parse_endpoints(endpoint or default_endpoint())
        except ValueError as e:
            raise Error("usage", str(e)) from None
        self.views = Views(self.endpoints, ttl_ms=view_ttl_ms)
        self.owners = Owners()

    def acquired(self, endpoint: str, reply: Dict[str, Any]) -> Kernel:
        kernel = _kernel(reply, endpoint)
        self.views.from_acquire(endpoint, kernel.pool, reply.get("pool_warm"))
        self.owners.remember(kernel.kernel_id, endpoint)
        return kernel

    def acquire_plan(self, req: Dict[str, Any], wait: int):
        """Fresh views first (a short wait per daemon), then the daemons in order, failing over."""
        pool = req["pool"]
        if len(self.endpoints) == 1:
            reply = yield req, wait, self.endpoints[0]
            if isinstance(reply, Error):
                raise reply
            return self.acquired(self.endpoints[0], reply)
        deadline = time.monotonic() + wait / 1000.0
        for endpoint in self.views.stale():
            status = yield {"op": "status"}, max(1, min(200, wait // 4)), endpoint
            if isinstance(status, Error):
                self.views.failed(endpoint, None, status.code)
            else:
                self.views.from_status(endpoint, status)
        last: Optional[Error] = None
        for endpoint in self.views.order(pool):
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            # The daemon waits for a kernel only as long as this client still does.
            attempt = dict(req, timeout_ms=max(0, min(req.get("timeout_ms", remaining),
                                                      remaining - DEFAULT_TIMEOUT_MS)))
            reply = yield attempt, remaining, endpoint
            if not isinstance(reply, Error):
                return self.acquired(endpoint, reply)
            if reply.code not in FAILOVER_CODES:
                raise reply
            self.views.failed(endpoint, pool, reply.code)
            last = reply
        raise last or _timed_out(",".join(self.endpoints), wait)

    def owner_plan(self, kernel_id: str, req: Dict[str, Any]):
        """A request about a kernel: to the daemon that handed it out, else to every daemon
        until one knows it (the others answer unknown_kernel)."""
        last: Optional[Error] = None
        for endpoint in self.owners.candidates(kernel_id, self.endpoints):
            reply = yield req, None, endpoint
            if not isinstance(reply, Error):
                self.owners.remember(kernel_id, endpoint)
                return reply
            if reply.code not in ("unknown_kernel", "unreachable", "refused"):
                raise reply
            if last is None or last.code != "unknown_kernel":
                last = reply
        assert last is not None
        raise last

    def statuses_plan(self):
        """Every daemon's status, or the Error it gave."""
        out: List[Tuple[str, Union[Dict[str, Any], Error]]] = []
        for endpoint in self.endpoints:
            status = yield {"op": "status"}, None, endpoint
            if isinstance(status, Error):
                self.views.failed(endpoint, None, status.code)
            else:
                self.views.from_status(endpoint, status)
            out.append((endpoint, status))
        return out


def _first_status(statuses: List[Tuple[str, Union[Dict[str, Any], Error]]]) -> Dict[str, Any]:
    """The first daemon's status that answered, else the last error."""
    for _, status in statuses:
        if not isinstance(status, Error):
            return status
    raise statuses[-1][1]


class _Operations:
    """Every public operation of Client and AsyncClient, written once as a plan (a generator
    that yields (request, timeout_ms, endpoint or None for the first daemon) and is sent back the
    reply or the Error). Client carries plans out with blocking sockets, AsyncClient with
    zmq.asyncio; _driven() below makes each operation a method of both."""

    _daemons: _Daemons

    def ping(self) -> Dict[str, Any]:
        return (yield from _single({"op": "ping"}))

    def status(self) -> Dict[str, Any]:
        """The first daemon's status that answers (see statuses() for all of them)."""
        return _first_status((yield from self._daemons.statuses_plan()))

    def statuses(self) -> List[Tuple[str, Union[Dict[str, Any], Error]]]:
        """(endpoint, status or the Error it gave) for every daemon."""
        return (yield from self._daemons.statuses_plan())

    def kernelspecs(self) -> Dict[str, Any]:
        return (yield from _single({"op": "kernelspecs"}))["kernelspecs"]

    def acquire(self, pool: str, timeout_ms: Optional[int] = None, lease_s: Optional[float] = None,
                cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                history: Optional[str] = None) -> Kernel:
        """`history`: "memory" gives an IPython kernel an in-memory history (as
        `--HistoryManager.hist_file=:memory:` does a launched one), "file" or None its file."""
        req, wait = _acquire_request(pool, timeout_ms, lease_s, cwd, env, history)
        return (yield from self._daemons.acquire_plan(req, wait))

    def release(self, kernel_id: str) -> None:
        yield from self._daemons.owner_plan(kernel_id, {"op": "release", "kernel_id": kernel_id})

    def signal(self, kernel_id: str, signum: int) -> None:
        yield from self._daemons.owner_plan(kernel_id, {"op": "signal", "kernel_id": kernel_id,
                                                        "signum": int(signum)})

    def poll(self, kernel_id: str) -> Optional[int]:
        """None while the kernel runs, else its exit code (minus the signal that killed it)."""
        reply = yield from self._daemons.owner_plan(kernel_id, {"op": "poll", "kernel_id": kernel_id})
        return None if reply["alive"] else reply["exit_code"]

    def renew(self, kernel_id: str, lease_s: float) -> float:
        """The kernel's lease now ends lease_s from now; returns the seconds left."""
        reply = yield from self._daemons.owner_plan(
            kernel_id, {"op": "renew", "kernel_id": kernel_id, "lease_s": lease_s})
        return reply["lease_remaining_s"]

    def context(self, kernel_id: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                history: Optional[str] = None) -> None:
        """Applies a working directory, environment and history in a kernel this client holds,
        as acquire's do (for a kernel taken before they were known)."""
        req = _context_fields({"op": "context", "kernel_id": kernel_id}, cwd, env, history)
        yield from self._daemons.owner_plan(kernel_id, req)

    def resize(self, pool: str, size: int) -> Dict[str, Any]:
        """Keeps `size` warm kernels in `pool` from now on (until the next config reload)."""
        return (yield from _single({"op": "resize", "pool": pool, "size": int(size)}))

    def drain(self, pool: str) -> Dict[str, Any]:
        """Stops the pool's unleased kernels; acquires get "unavailable" until a resize."""
        return (yield from _single({"op": "drain", "pool": pool}))


# Every public method of _Operations is a plan that both clients carry out.
_OPERATIONS = tuple(name for name, value in vars(_Operations).items()
                    if not name.startswith("_") and callable(value))


def _single(req: Dict[str, Any]):
    """A plan of one request to the first daemon."""
    reply = yield req, None, None
    if isinstance(reply, Error):
        raise reply
    return reply


def _run_plan(plan, carry):
    """Steps a plan: `carry(req, timeout_ms, endpoint)` gives the reply or the Error."""
    try:
        step = next(plan)
        while True:
            step = plan.send(carry(*step))
    except StopIteration as done:
        return done.value


def _driven(cls):
    """Adds every operation of _Operations to `cls`, carried out by its _carry (blocking) or as
    coroutines (when cls.asynchronous)."""
    for name in _OPERATIONS:
        plan = getattr(_Operations, name)
        if cls.asynchronous:
            async def method(self, *args, _plan=plan, **kwargs):
                gen = _plan(self, *args, **kwargs)
                try:
                    step = next(gen)
                    while True:
                        req, timeout_ms, endpoint = step
                        try:
                            result: Any = await self.request(req, timeout_ms, endpoint)
                        except Error as e:
                            result = e
                        step = gen.send(result)
                except StopIteration as done:
                    return done.value
        else:
            def method(self, *args, _plan=plan, **kwargs):
                return _run_plan(_plan(self, *args, **kwargs), self._carry)
        functools.update_wrapper(method, plan)
        setattr(cls, name, method)
    return cls


class _Base(_Operations):
    def __init__(self, endpoint: Endpoints, timeout_ms: int, server_key: Optional[str],
                 client_key_file: Optional[str], view_ttl_ms: int, ctx):
        self._daemons = _Daemons(endpoint, view_ttl_ms)
        self.endpoints = self._daemons.endpoints
        self.endpoint = self.endpoints[0]
        self.timeout_ms = timeout_ms
        self._keys = _curve_keys(server_key, client_key_file)
        self._ctx = ctx


@_driven
class Client(_Base):
    """Blocking client. Each request uses its own REQ socket, so a timeout never leaves the
    client stuck waiting for a stale reply. `endpoint` may name several daemons (see the module
    docstring); `endpoint` the attribute is then the first of them."""

    asynchronous = False

    def __init__(self, endpoint: Endpoints = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 server_key: Optional[str] = None, client_key_file: Optional[str] = None,
                 view_ttl_ms: int = 1000):
        super().__init__(endpoint, timeout_ms, server_key, client_key_file, view_ttl_ms,
                         zmq.Context.instance())

    def request(self, req: Dict[str, Any], timeout_ms: Optional[int] = None,
                endpoint: Optional[str] = None) -> Dict[str, Any]:
        """Sends one request to one daemon (the first, unless `endpoint`); returns the reply if
        ok, else raises Error."""
        endpoint = endpoint or self.endpoint
        _check_reachable(endpoint)
        exchange = _Exchange(endpoint, timeout_ms or self.timeout_ms)
        sock = _new_socket(self._ctx, self._keys)
        monitor = sock.get_monitor_socket(_WATCHED_EVENTS)
        try:
            sock.connect(endpoint)
            sock.send(json.dumps(req).encode())
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            poller.register(monitor, zmq.POLLIN)
            while True:
                ready = dict(poller.poll(exchange.wait_ms()))
                if sock in ready:
                    return _result(json.loads(sock.recv()))
                if monitor in ready:
                    exchange.event(recv_monitor_message(monitor))
        finally:
            sock.disable_monitor()
            monitor.close()
            sock.close()

    def _carry(self, req, timeout_ms, endpoint):
        try:
            return self.request(req, timeout_ms, endpoint)
        except Error as e:
            return e


@_driven
class AsyncClient(_Base):
    """The same as Client, with coroutines (zmq.asyncio), for servers."""

    asynchronous = True

    def __init__(self, endpoint: Endpoints = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 server_key: Optional[str] = None, client_key_file: Optional[str] = None,
                 view_ttl_ms: int = 1000):
        super().__init__(endpoint, timeout_ms, server_key, client_key_file, view_ttl_ms,
                         zmq.asyncio.Context.instance())

    async def request(self, req: Dict[str, Any], timeout_ms: Optional[int] = None,
                      endpoint: Optional[str] = None) -> Dict[str, Any]:
        endpoint = endpoint or self.endpoint
        _check_reachable(endpoint)
        exchange = _Exchange(endpoint, timeout_ms or self.timeout_ms)
        sock = _new_socket(self._ctx, self._keys)
        monitor = sock.get_monitor_socket(_WATCHED_EVENTS)
        try:
            sock.connect(endpoint)
            await sock.send(json.dumps(req).encode())
            poller = zmq.asyncio.Poller()
            poller.register(sock, zmq.POLLIN)
            poller.register(monitor, zmq.POLLIN)
            while True:
                ready = dict(await poller.poll(exchange.wait_ms()))
                if sock in ready:
                    return _result(json.loads(await sock.recv()))
                if monitor in ready:
                    exchange.event(parse_monitor_message(await monitor.recv_multipart()))
        finally:
            sock.disable_monitor()
            monitor.close()
            sock.close()
