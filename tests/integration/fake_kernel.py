"""A tiny Jupyter kernel for fault injection: it speaks just enough of the wire protocol
(kernel_info, execute, shutdown) and misbehaves on request.

Usage: fake_kernel.py MODE -f CONNECTION_FILE
MODE: ok | hang (never answers) | crash (exits 3 at once, after printing to stderr)
      | slow (ready after 0.7 s) | deaf (answers, but ignores SIGTERM and shutdown)
Like ipykernel, ports that are 0 in the connection file are bound at random and written back.
"""
import hashlib
import hmac
import json
import os
import signal
import sys
import time
import uuid

import zmq


def main():
    mode = sys.argv[1]
    path = sys.argv[sys.argv.index("-f") + 1]
    if mode == "crash":
        print("fake kernel: crashing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    with open(path) as f:
        info = json.load(f)
    key = info["key"].encode()
    ctx = zmq.Context()
    sockets = {}
    for name, kind in [("shell", zmq.ROUTER), ("control", zmq.ROUTER), ("stdin", zmq.ROUTER),
                       ("iopub", zmq.PUB), ("hb", zmq.REP)]:
        s = ctx.socket(kind)
        s.linger = 0
        port = info[name + "_port"]
        if info["transport"] == "ipc":
            s.bind("ipc://%s-%d" % (info["ip"], port))
        elif port:
            s.bind("tcp://%s:%d" % (info["ip"], port))
        else:
            info[name + "_port"] = s.bind_to_random_port("tcp://" + info["ip"])
        sockets[name] = s
    if mode == "slow":
        time.sleep(0.7)
    info.pop("kernel_name", None)
    with open(path, "w") as f:
        json.dump(info, f)
    if mode == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def sign(parts):
        h = hmac.new(key, digestmod=hashlib.sha256)
        for p in parts:
            h.update(p)
        return h.hexdigest().encode()

    def reply(sock, idents, parent, msg_type, content):
        header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": "fake",
                  "username": "fake", "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"}
        parts = [json.dumps(x).encode() for x in (header, parent, {}, content)]
        sock.send_multipart(idents + [b"<IDS|MSG>", sign(parts)] + parts)

    poller = zmq.Poller()
    for name in ("shell", "control", "hb"):
        poller.register(sockets[name], zmq.POLLIN)
    while True:
        for sock, _ in poller.poll():
            frames = sock.recv_multipart()
            if sock is sockets["hb"]:
                sock.send_multipart(frames)
                continue
            if mode == "hang":
                continue
            i = frames.index(b"<IDS|MSG>")
            idents, sig, parts = frames[:i], frames[i + 1], frames[i + 2:i + 6]
            if not hmac.compare_digest(sig, sign(parts)):
                continue
            header = json.loads(parts[0])
            msg_type = header["msg_type"]
            if msg_type == "kernel_info_request":
                reply(sock, idents, header, "kernel_info_reply",
                      {"status": "ok", "protocol_version": "5.3", "implementation": "fake",
                       "language_info": {"name": "fake"}})
            elif msg_type == "shutdown_request" and mode != "deaf":
                reply(sock, idents, header, "shutdown_reply", {"status": "ok", "restart": False})
                return


if __name__ == "__main__":
    main()
