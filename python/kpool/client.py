"""Clients for kpoold's control socket (protocol v1), synchronous and asyncio."""
import dataclasses
import json
import os
from typing import Any, Dict, Optional

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message, recv_monitor_message

DEFAULT_TIMEOUT_MS = 5000
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
    connection_file: str

    def connection_info(self) -> Dict[str, Any]:
        """The connection info as jupyter_client wants it: key as bytes."""
        info = dict(self.connection)
        info["key"] = info["key"].encode()
        return info


def default_endpoint() -> str:
    """$KPOOL_ENDPOINT, else kpoold's default: $XDG_RUNTIME_DIR/kpool, /run/kpool as root,
    else /tmp/kpool-<uid> (the same rule as the daemon's)."""
    env = os.environ.get("KPOOL_ENDPOINT")
    if env:
        return env
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/") and os.path.isdir(xdg):
        runtime = os.path.join(xdg, "kpool")
    elif os.geteuid() == 0:
        runtime = "/run/kpool"
    else:
        runtime = "/tmp/kpool-%d" % os.geteuid()
    return "ipc://%s/control" % runtime


# Handshake failures the monitor socket reports: the daemon refused us.
_REFUSALS = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "not an allowed uid or CURVE key",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "CURVE on one side only, or a wrong server key?",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "the security handshake failed",
}
_REFUSAL_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


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
    with open(client_key_file, "rb") as f:
        secret = f.read().strip()
    return server_key.strip().encode(), zmq.curve_public(secret), secret


def _new_socket(ctx, keys):
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
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


def _acquire_request(pool, timeout_ms, lease_s, cwd, env):
    req: Dict[str, Any] = {"op": "acquire", "pool": pool}
    if timeout_ms is not None:
        req["timeout_ms"] = int(timeout_ms)
    if lease_s is not None:
        req["lease_s"] = lease_s
    if cwd is not None:
        req["cwd"] = os.path.abspath(cwd)
    if env:
        req["env"] = dict(env)
    wait = (timeout_ms if timeout_ms is not None else DAEMON_DEFAULT_ACQUIRE_MS) + DEFAULT_TIMEOUT_MS
    return req, wait


def _kernel(reply: Dict[str, Any]) -> Kernel:
    return Kernel(reply["kernel_id"], reply["pool"], reply["pid"], reply["connection"],
                  reply["connection_file"])


class Client:
    """Blocking client. Each request uses its own REQ socket, so a timeout never leaves the
    client stuck waiting for a stale reply."""

    def __init__(self, endpoint: Optional[str] = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 server_key: Optional[str] = None, client_key_file: Optional[str] = None):
        self.endpoint = endpoint or default_endpoint()
        self.timeout_ms = timeout_ms
        self._keys = _curve_keys(server_key, client_key_file)
        self._ctx = zmq.Context.instance()

    def request(self, req: Dict[str, Any], timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Sends one request; returns the reply if ok, else raises Error."""
        _check_reachable(self.endpoint)
        timeout_ms = timeout_ms or self.timeout_ms
        sock = _new_socket(self._ctx, self._keys)
        monitor = sock.get_monitor_socket(_REFUSAL_EVENTS)
        try:
            sock.connect(self.endpoint)
            sock.send(json.dumps(req).encode())
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            poller.register(monitor, zmq.POLLIN)
            ready = dict(poller.poll(timeout_ms))
            if sock in ready:
                return _result(json.loads(sock.recv()))
            if monitor in ready:
                raise _refused(self.endpoint, recv_monitor_message(monitor))
            raise _timed_out(self.endpoint, timeout_ms)
        finally:
            sock.disable_monitor()
            monitor.close()
            sock.close()

    def ping(self) -> Dict[str, Any]:
        return self.request({"op": "ping"})

    def status(self) -> Dict[str, Any]:
        return self.request({"op": "status"})

    def kernelspecs(self) -> Dict[str, Any]:
        return self.request({"op": "kernelspecs"})["kernelspecs"]

    def acquire(self, pool: str, timeout_ms: Optional[int] = None, lease_s: Optional[float] = None,
                cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> Kernel:
        req, wait = _acquire_request(pool, timeout_ms, lease_s, cwd, env)
        return _kernel(self.request(req, wait))

    def release(self, kernel_id: str) -> None:
        self.request({"op": "release", "kernel_id": kernel_id})

    def signal(self, kernel_id: str, signum: int) -> None:
        self.request({"op": "signal", "kernel_id": kernel_id, "signum": int(signum)})

    def poll(self, kernel_id: str) -> Optional[int]:
        """None while the kernel runs, else its exit code (minus the signal that killed it)."""
        reply = self.request({"op": "poll", "kernel_id": kernel_id})
        return None if reply["alive"] else reply["exit_code"]

    def resize(self, pool: str, size: int) -> Dict[str, Any]:
        """Keeps `size` warm kernels in `pool` from now on (until the next config reload)."""
        return self.request({"op": "resize", "pool": pool, "size": int(size)})

    def drain(self, pool: str) -> Dict[str, Any]:
        """Stops the pool's idle kernels; acquires get "unavailable" until a resize."""
        return self.request({"op": "drain", "pool": pool})


class AsyncClient:
    """The same as Client, with coroutines (zmq.asyncio), for servers."""

    def __init__(self, endpoint: Optional[str] = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 server_key: Optional[str] = None, client_key_file: Optional[str] = None):
        self.endpoint = endpoint or default_endpoint()
        self.timeout_ms = timeout_ms
        self._keys = _curve_keys(server_key, client_key_file)
        self._ctx = zmq.asyncio.Context.instance()

    async def request(self, req: Dict[str, Any], timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        _check_reachable(self.endpoint)
        timeout_ms = timeout_ms or self.timeout_ms
        sock = _new_socket(self._ctx, self._keys)
        monitor = sock.get_monitor_socket(_REFUSAL_EVENTS)
        try:
            sock.connect(self.endpoint)
            await sock.send(json.dumps(req).encode())
            poller = zmq.asyncio.Poller()
            poller.register(sock, zmq.POLLIN)
            poller.register(monitor, zmq.POLLIN)
            ready = dict(await poller.poll(timeout_ms))
            if sock in ready:
                return _result(json.loads(await sock.recv()))
            if monitor in ready:
                raise _refused(self.endpoint, parse_monitor_message(await monitor.recv_multipart()))
            raise _timed_out(self.endpoint, timeout_ms)
        finally:
            sock.disable_monitor()
            monitor.close()
            sock.close()

    async def ping(self) -> Dict[str, Any]:
        return await self.request({"op": "ping"})

    async def status(self) -> Dict[str, Any]:
        return await self.request({"op": "status"})

    async def kernelspecs(self) -> Dict[str, Any]:
        return (await self.request({"op": "kernelspecs"}))["kernelspecs"]

    async def acquire(self, pool: str, timeout_ms: Optional[int] = None,
                      lease_s: Optional[float] = None, cwd: Optional[str] = None,
                      env: Optional[Dict[str, str]] = None) -> Kernel:
        req, wait = _acquire_request(pool, timeout_ms, lease_s, cwd, env)
        return _kernel(await self.request(req, wait))

    async def release(self, kernel_id: str) -> None:
        await self.request({"op": "release", "kernel_id": kernel_id})

    async def signal(self, kernel_id: str, signum: int) -> None:
        await self.request({"op": "signal", "kernel_id": kernel_id, "signum": int(signum)})

    async def poll(self, kernel_id: str) -> Optional[int]:
        reply = await self.request({"op": "poll", "kernel_id": kernel_id})
        return None if reply["alive"] else reply["exit_code"]

    async def resize(self, pool: str, size: int) -> Dict[str, Any]:
        return await self.request({"op": "resize", "pool": pool, "size": int(size)})

    async def drain(self, pool: str) -> Dict[str, Any]:
        return await self.request({"op": "drain", "pool": pool})
