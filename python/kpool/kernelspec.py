"""Writes a kernelspec that takes its kernels from a kpoold pool through kpool-provisioner."""
import json
import os
import tempfile
from typing import Optional

from jupyter_client.kernelspec import KernelSpecManager


def pooled_kernelspec(pool: str, display_name: str, language: str,
                      endpoint: Optional[str]) -> dict:
    config = {"pool": pool}
    if endpoint:
        config["endpoint"] = endpoint
    return {
        # Never executed (kpoold starts the kernels); jupyter_client requires an argv.
        "argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": language,
        "interrupt_mode": "signal",
        "metadata": {"kernel_provisioner": {"provisioner_name": "kpool-provisioner",
                                            "config": config}},
    }


def install_kernelspec(pool: str, name: str, display_name: str, language: str,
                       endpoint: Optional[str] = None, user: bool = False,
                       prefix: Optional[str] = None) -> str:
    """Installs the kernelspec like `jupyter kernelspec install` and returns its directory."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel.json"), "w") as f:
            json.dump(pooled_kernelspec(pool, display_name, language, endpoint), f, indent=1)
        return KernelSpecManager().install_kernel_spec(tmp, kernel_name=name, user=user,
                                                       prefix=prefix)
