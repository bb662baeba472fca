"""kpool's notebook server extension, for jupyter_server 1.x and 2.x and classic Notebook 6:
TCP_NODELAY on every websocket the server opens or accepts, and (jupyter_server 1.x) a gateway
websocket that keeps the messages a front end sends before it is connected.

jupyter_server (1.x and 2.x) and classic Notebook write each kernel message to a websocket as
its own small write, on sockets that keep Nagle's algorithm on: Tornado leaves TCP_NODELAY to
the application, and neither server sets it. So every message of a burst after the first
(an execute's status, its input, its output, its reply) waits for the peer's delayed ACK,
about 40 ms on Linux, once on the browser's websocket and once more on a gateway client's
websocket to the Kernel Gateway (kpool serve). This extension turns Nagle off on both, in the
one place both pass through whatever the server's version: Tornado's websocket protocol, once
its stream is connected (server side: the accepted handshake; client side: the gateway
client's connection), before the first message.

With --gateway-url, jupyter_server 1.x opens its websocket to the gateway on the loop turn after
the front end's websocket opened; a message the front end sends before that (a notebook's first
execute, often) waits on a future that never completes and is lost, and the front end waits
for an answer that never comes (fixed in jupyter_server 2.6). Here such messages are kept and
sent, in order, once the gateway websocket is connected.

Installing the kpool package enables it for jupyter_server and classic Notebook (config files
in etc/jupyter/jupyter_server_config.d and jupyter_notebook_config.d); turn it off with
`jupyter server extension disable kpool.server_extension` (Notebook: `jupyter serverextension
disable kpool.server_extension`). Loading it is logged: "kpool.server_extension: TCP_NODELAY on
websockets" (and "... messages sent before the gateway websocket connects are kept")."""
import logging

_installed = False
_gateway_fixed = False


def install(log=None):
    """Both changes (each idempotent); what was done is logged."""
    log = log or logging.getLogger(__name__)
    install_nodelay(log)
    install_gateway_fix(log)


def install_gateway_fix(log):
    """jupyter_server 1.x's GatewayWebSocketClient: messages before the connection is begun are
    kept and written once it is. False where there is nothing to fix (2.x, Notebook)."""
    global _gateway_fixed
    if _gateway_fixed:
        return True
    try:
        import jupyter_server
        from jupyter_server.gateway import handlers
    except ImportError:
        return False
    client = getattr(handlers, "GatewayWebSocketClient", None)
    if not jupyter_server.__version__.startswith("1.") or client is None or \
            not all(hasattr(client, name) for name in ("_connect", "on_message", "_write_message")):
        return False
    from tornado.ioloop import IOLoop
    connect, on_message = client._connect, client.on_message

    async def _connect(self, *args, **kwargs):
        await connect(self, *args, **kwargs)
        # self.ws_future is the connection's from here on: what came before follows it, in order.
        self._kpool_connecting = True
        for message in self.__dict__.pop("_kpool_early", []):
            IOLoop.current().add_future(self.ws_future, lambda _, m=message: self._write_message(m))

    def keep_early(self, message):
        if self.ws is None and not getattr(self, "_kpool_connecting", False):
            self.__dict__.setdefault("_kpool_early", []).append(message)
        else:
            on_message(self, message)

    client._connect = _connect
    client.on_message = keep_early
    _gateway_fixed = True
    log.info("kpool.server_extension: messages sent before the gateway websocket connects are kept")
    return True


def install_nodelay(log=None):
    """Turns Nagle's algorithm off on every Tornado websocket from now on (idempotent). False
    when this Tornado's websocket protocol has not the shape it needs (then nothing changes)."""
    global _installed
    log = log or logging.getLogger(__name__)
    if _installed:
        return True
    from tornado import websocket
    protocol = getattr(websocket, "WebSocketProtocol13", None)
    start_pinging = getattr(protocol, "start_pinging", None)
    if protocol is None or start_pinging is None or not hasattr(protocol, "set_nodelay"):
        log.warning("kpool.server_extension: this Tornado's websockets are not the kind it knows: Nagle stays on")
        return False

    def start_pinging_without_nagle(self, *args, **kwargs):
        # Called by both sides once self.stream is the connected socket, before any message.
        if self.stream is not None and not self.stream.closed():
            self.set_nodelay(True)
        return start_pinging(self, *args, **kwargs)

    protocol.start_pinging = start_pinging_without_nagle
    _installed = True
    log.info("kpool.server_extension: TCP_NODELAY on websockets")
    return True


# jupyter_server 1.x and 2.x.
def _jupyter_server_extension_points():
    return [{"module": "kpool.server_extension"}]


def _load_jupyter_server_extension(serverapp):
    install(serverapp.log)


# Classic Notebook (6.x) and jupyter_server's legacy names.
def _jupyter_server_extension_paths():
    return [{"module": "kpool.server_extension"}]


def load_jupyter_server_extension(app):
    install(app.log)
