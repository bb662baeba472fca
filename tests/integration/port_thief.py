"""Fault injection for the port registry: the first time it runs, another process (a detached
child) binds one of the kernel's ports (the shell port, or PORT_NAME's) before the kernel can, as
can happen in the moment between kpoold choosing a port and the kernel binding it. Then it runs
the real kernel, which fails to bind: it exits (the fake kernel; ipykernel for its shell port) or
says so and stays up (ipykernel 6 for its iopub or heartbeat port); kpoold must start it again
with fresh ports. Later runs just run the kernel.

Usage: port_thief.py FLAG_FILE [--port PORT_NAME] KERNEL_ARGV... (KERNEL_ARGV holds
"-f CONNECTION_FILE"). FLAG_FILE receives the thief's pid, for the test to end it."""
import json
import os
import socket
import sys
import time


def main():
    flag, argv = sys.argv[1], sys.argv[2:]
    port_name = "shell_port"
    if argv[0] == "--port":
        port_name, argv = argv[1], argv[2:]
    if not os.path.exists(flag):
        with open(argv[argv.index("-f") + 1]) as f:
            info = json.load(f)
        ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            os.setsid()  # out of the kernel's process group: kpoold's kill does not reach it
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # not holding the kernel's output pipes open
                os.dup2(null, fd)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as libzmq binds
            sock.bind((info["ip"], info[port_name]))
            sock.listen()
            with open(flag, "w") as f:
                f.write(str(os.getpid()))
            os.write(ready_w, b"x")
            time.sleep(120)
            os._exit(0)
        os.read(ready_r, 1)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
