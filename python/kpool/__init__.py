"""kpool: take warm Jupyter kernels from kpoold.

    import kpool
    client = kpool.Client()                   # $KPOOL_ENDPOINT or kpoold's default endpoint
    kernel = client.acquire("python3", timeout_ms=5000)
    kernel.connection_file                    # for jupyter console --existing, BlockingKernelClient
    client.release(kernel.kernel_id)

AsyncClient has the same methods as coroutines (zmq.asyncio), for use inside servers.
ServeClient and AsyncServeClient speak to a kpool serve over HTTP instead (serve_client.py):
exec, run and map, under kpool feed's policy.
Failures raise kpool.Error with the daemon's code and message (see protocol/PROTOCOL.md);
a daemon that cannot be reached gives the code "unreachable".
"""
from .client import AsyncClient, Client, Error, Kernel, default_endpoint
from .feed import Result
from .serve_client import AsyncServeClient, ServeClient, ServeError

__all__ = ["AsyncClient", "AsyncServeClient", "Client", "Error", "Kernel", "Result", "ServeClient", "ServeError",
           "default_endpoint"]
__version__ = "0.1.0"
