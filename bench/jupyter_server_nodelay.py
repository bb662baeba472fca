"""jupyter_server 1.23 with TCP_NODELAY on its kernel websockets: a diagnostic for scenarios 15
and 18, never a way to serve. jupyter_server writes every kernel message to the front end as its
own small write on a socket that keeps Nagle's algorithm (tornado leaves TCP_NODELAY to the
application, and jupyter_server 1.23 does not set it), so each message after the first of a burst
waits for the front end's delayed ACK, about 40 ms on Linux. Run side by side with the unpatched
server, this shows how much of POST -> first result is that wait, for every kernelspec alike.

    /usr/bin/python3 bench/jupyter_server_nodelay.py [jupyter_server's arguments]"""
import sys

from jupyter_server.gateway import handlers as gateway_handlers
from jupyter_server.serverapp import main
from jupyter_server.services.kernels import handlers as kernel_handlers


def with_nodelay(cls):
    open_websocket = cls.open

    def open(self, *args, **kwargs):
        self.set_nodelay(True)
        return open_websocket(self, *args, **kwargs)
    cls.open = open


with_nodelay(kernel_handlers.ZMQChannelsHandler)
with_nodelay(gateway_handlers.WebSocketChannelsHandler)

if __name__ == "__main__":
    sys.exit(main())
