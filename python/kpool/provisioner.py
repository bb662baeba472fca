"""A jupyter_client kernel provisioner that takes warm kernels from kpoold.

A kernelspec whose metadata says
    "kernel_provisioner": {"provisioner_name": "kpool-provisioner",
                           "config": {"pool": "python3", "endpoint": "ipc://..."}}
makes KernelManager.start_kernel() acquire a ready kernel from that pool instead of spawning one
(`python3 -m kpool install-kernelspec` writes such a kernelspec). Interrupts, signals, kill and
poll go through the daemon, which owns the kernel process; shutdown and restart work as with a
local kernel, restart taking a fresh kernel from the pool.

The kernel gets what a launched one would: the client's whole environment (the kernel's own is
the daemon's, so sending only what differs from the client's would lose what the client itself
set), and an in-memory history when the arguments ask for one (nbclient's default). It is held on
a short lease renewed while this process lives, so the kernel of a client that dies without
shutting it down (a crash, a killed notebook server) goes back within the lease, not the pool's.
"""
import asyncio
import os
import signal
import threading
from typing import Any, Dict, List, Optional

from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Float, Unicode

from .client import AsyncClient, Client, Error

# Variables that describe the client's own process, not what the kernel should see: the same
# list as `kpool run`'s (runner/notebook_runner.cpp, caller_environment).
_NOT_FORWARDED = {"JPY_PARENT_PID", "KPOOL_INSTANCE", "PWD", "OLDPWD", "SHLVL", "_"}
# The argument with which nbclient and papermill ask IPython for a history kept in memory.
_HIST_FILE_ARG = "--HistoryManager.hist_file="


def history_of(arguments: List[str]) -> Optional[str]:
    """acquire's `history` for a launch's extra arguments: "memory" for nbclient's
    `--HistoryManager.hist_file=:memory:`, else None (the kernel's own history file)."""
    for arg in arguments:
        if arg.startswith(_HIST_FILE_ARG) and arg[len(_HIST_FILE_ARG):] == ":memory:":
            return "memory"
    return None


def forwarded_env(env: Dict[str, str]) -> Dict[str, str]:
    return {k: v for k, v in env.items() if k not in _NOT_FORWARDED}


class _LeaseKeeper(threading.Thread):
    """Renews one kernel's lease every `every_s` until stopped or the kernel is gone. A thread,
    not an asyncio task: a blocking KernelManager runs its loop only inside its own calls."""

    def __init__(self, endpoint: Optional[str], kernel_id: str, lease_s: float, every_s: float, log):
        super().__init__(name="kpool-lease-" + kernel_id[:8], daemon=True)
        self._endpoint, self._kernel_id = endpoint, kernel_id
        self._lease_s, self._every_s = lease_s, every_s
        self._log = log
        self._stopped = threading.Event()

    def run(self) -> None:
        client = Client(self._endpoint)
        while not self._stopped.wait(self._every_s):
            try:
                client.renew(self._kernel_id, self._lease_s)
            except Error as e:
                if e.code == "unknown_kernel":  # released, exited or expired: nothing to hold
                    return
                # The daemon unreachable for a moment: the lease still has two renewals' time.
                self._log.warning("kpool: lease of kernel %s not renewed: %s", self._kernel_id, e)

    def stop(self) -> None:
        self._stopped.set()


class KpoolProvisioner(KernelProvisionerBase):
    pool = Unicode("", config=True, help="The kpoold pool to take kernels from.")
    endpoint = Unicode(None, allow_none=True, config=True,
                       help="kpoold's control endpoint, or several (comma-separated, or "
                            "dns:NAME:PORT): acquires go to the daemon most likely to have a warm "
                            "kernel and fail over; default $KPOOL_ENDPOINT or kpoold's default.")
    acquire_timeout_s = Float(60.0, config=True,
                              help="How long to wait for a warm kernel when the pool is empty.")
    lease_s = Float(None, allow_none=True, config=True,
                    help="A fixed lease for each kernel in seconds, never renewed; default: a "
                         "short lease (held_lease_s) renewed while this process lives.")
    held_lease_s = Float(30.0, config=True,
                         help="The lease held and renewed every third of it while this process "
                              "lives: how long a dead client's kernel stays taken.")

    pooled_kernel_id: Optional[str] = None  # kpoold's id of the kernel we hold
    kernel_endpoint: Optional[str] = None  # the daemon that handed it out
    pid: Optional[int] = None
    _last_exit_code: Optional[int] = None
    _history: Optional[str] = None
    _lease_keeper: Optional[_LeaseKeeper] = None

    def _client(self) -> AsyncClient:
        """The daemon that holds our kernel, else the configured daemon(s)."""
        return AsyncClient(self.kernel_endpoint or self.endpoint or None)

    @property
    def has_process(self) -> bool:
        return self.pooled_kernel_id is not None

    async def pre_launch(self, **kwargs: Any) -> Dict[str, Any]:
        kwargs = await super().pre_launch(**kwargs)  # env with the kernelspec's env applied
        # KernelManager pops "cmd"; nothing is executed here: the daemon owns the process.
        kwargs["cmd"] = list(self.kernel_spec.argv)
        self._history = history_of(list(self.kernel_spec.argv) + kwargs.pop("extra_arguments", []))
        return kwargs

    async def launch_kernel(self, cmd: List[str], **kwargs: Any) -> Dict[str, Any]:
        if not self.pool:
            raise ValueError("kpool-provisioner: the kernelspec's provisioner config names no 'pool'")
        # The kernel runs with the daemon's environment: it gets the whole of the one
        # jupyter_client made for a launch (this process's, the kernelspec's env, nbclient's).
        env = forwarded_env(kwargs.get("env") or dict(os.environ))
        kernel = await AsyncClient(self.endpoint or None).acquire(
            self.pool, timeout_ms=int(self.acquire_timeout_s * 1000),
            lease_s=self.held_lease_s if self.lease_s is None else self.lease_s,
            cwd=kwargs.get("cwd"), env=env, history=self._history)
        self.pooled_kernel_id = kernel.kernel_id
        self.kernel_endpoint = kernel.endpoint
        self.pid = kernel.pid
        self._last_exit_code = None
        self.connection_info = kernel.connection_info()  # all nine keys, key as bytes
        self._hold()
        self.log.info("kpool: kernel %s (pid %d) from pool %s", kernel.kernel_id, kernel.pid, self.pool)
        return self.connection_info

    def _hold(self) -> None:
        """Starts renewing the lease of the kernel we hold, unless a fixed lease was asked for."""
        if self.lease_s is None and self.pooled_kernel_id is not None and self._lease_keeper is None:
            self._lease_keeper = _LeaseKeeper(self.kernel_endpoint or self.endpoint or None,
                                              self.pooled_kernel_id, self.held_lease_s,
                                              self.held_lease_s / 3, self.log)
            self._lease_keeper.start()

    async def poll(self) -> Optional[int]:
        if self.pooled_kernel_id is None:
            return self._last_exit_code if self._last_exit_code is not None else 0
        try:
            code = await self._client().poll(self.pooled_kernel_id)
        except Error as e:
            if e.code != "unknown_kernel":
                raise
            code = 0  # forgotten by the daemon: long gone
        if code is not None:
            self._last_exit_code = code
        return code

    async def wait(self) -> Optional[int]:
        while self.pooled_kernel_id is not None:
            code = await self.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.1)
        return self._last_exit_code

    async def send_signal(self, signum: int) -> None:
        if self.pooled_kernel_id is None:
            return
        try:
            await self._client().signal(self.pooled_kernel_id, signum)
        except Error as e:
            if e.code != "unknown_kernel":  # already exited: nothing to signal
                raise

    async def kill(self, restart: bool = False) -> None:
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart: bool = False) -> None:
        if self.pooled_kernel_id is None:
            return
        kernel_id, self.pooled_kernel_id = self.pooled_kernel_id, None
        if self._lease_keeper is not None:
            self._lease_keeper.stop()
            self._lease_keeper = None
        try:
            await self._client().release(kernel_id)
        except Error as e:
            if e.code != "unknown_kernel":  # it exited on its own (shutdown_request): fine
                raise
        finally:
            self.kernel_endpoint = None

    async def get_provisioner_info(self) -> Dict[str, Any]:
        info = await super().get_provisioner_info()
        info.update(pooled_kernel_id=self.pooled_kernel_id, pid=self.pid, pool=self.pool,
                    endpoint=self.endpoint, kernel_endpoint=self.kernel_endpoint)
        return info

    async def load_provisioner_info(self, provisioner_info: Dict[str, Any]) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.pooled_kernel_id = provisioner_info.get("pooled_kernel_id")
        self.pid = provisioner_info.get("pid")
        self.pool = provisioner_info.get("pool") or self.pool
        self.endpoint = provisioner_info.get("endpoint") or self.endpoint
        self.kernel_endpoint = provisioner_info.get("kernel_endpoint")
        self._hold()  # a notebook server that restarted holds its kernels again
