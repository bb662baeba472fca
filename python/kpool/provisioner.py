"""A jupyter_client kernel provisioner that takes warm kernels from kpoold.

A kernelspec whose metadata says
    "kernel_provisioner": {"provisioner_name": "kpool-provisioner",
                           "config": {"pool": "python3", "endpoint": "ipc://..."}}
makes KernelManager.start_kernel() acquire a ready kernel from that pool instead of spawning one
(`python3 -m kpool install-kernelspec` writes such a kernelspec). Interrupts, signals, kill and
poll go through the daemon, which owns the kernel process; shutdown and restart work as with a
local kernel, restart taking a fresh kernel from the pool.
"""
import asyncio
import os
import signal
from typing import Any, Dict, List, Optional

from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Float, Unicode

from .client import AsyncClient, Error

# Variables that describe the client's own process, not what the kernel should see.
_NOT_FORWARDED = {"JPY_PARENT_PID"}


class KpoolProvisioner(KernelProvisionerBase):
    pool = Unicode("", config=True, help="The kpoold pool to take kernels from.")
    endpoint = Unicode(None, allow_none=True, config=True,
                       help="kpoold's control endpoint, or several (comma-separated, or "
                            "dns:NAME:PORT): acquires go to the daemon most likely to have a warm "
                            "kernel and fail over; default $KPOOL_ENDPOINT or kpoold's default.")
    acquire_timeout_s = Float(60.0, config=True,
                              help="How long to wait for a warm kernel when the pool is empty.")
    lease_s = Float(None, allow_none=True, config=True,
                    help="Lease of each kernel in seconds; default: the pool's lease_s.")

    pooled_kernel_id: Optional[str] = None  # kpoold's id of the kernel we hold
    kernel_endpoint: Optional[str] = None  # the daemon that handed it out
    pid: Optional[int] = None
    _last_exit_code: Optional[int] = None

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
        kwargs.pop("extra_arguments", None)
        return kwargs

    async def launch_kernel(self, cmd: List[str], **kwargs: Any) -> Dict[str, Any]:
        if not self.pool:
            raise ValueError("kpool-provisioner: the kernelspec's provisioner config names no 'pool'")
        # The kernel already runs with the daemon's environment: send only what this client
        # adds or changes (the kernelspec's env, JPY_SESSION_NAME, nbclient's extras).
        env = kwargs.get("env") or {}
        extra = {k: v for k, v in env.items()
                 if os.environ.get(k) != v and k not in _NOT_FORWARDED}
        kernel = await AsyncClient(self.endpoint or None).acquire(
            self.pool, timeout_ms=int(self.acquire_timeout_s * 1000), lease_s=self.lease_s,
            cwd=kwargs.get("cwd"), env=extra)
        self.pooled_kernel_id = kernel.kernel_id
        self.kernel_endpoint = kernel.endpoint
        self.pid = kernel.pid
        self._last_exit_code = None
        self.connection_info = kernel.connection_info()  # all nine keys, key as bytes
        self.log.info("kpool: kernel %s (pid %d) from pool %s", kernel.kernel_id, kernel.pid, self.pool)
        return self.connection_info

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
