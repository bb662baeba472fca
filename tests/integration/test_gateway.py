"""kpool serve's Kernel Gateway API (issue #22) against a real kpoold, with a plain websocket
client (python3-websocket): kernelspecs, starting, listing and deleting kernels, executing over
the kernel websocket in both of jupyter_server's formats (legacy JSON and binary frames, and the
v1.kernel.websocket.jupyter.org subprotocol), comms with binary buffers both ways, interrupt,
restart (a warm kernel under the same id), a websocket dropped and reopened mid-execution,
many kernels at once, a kernel that dies, culling, the token and CORS, and a stop that
releases every kernel. test_gateway_servers.py drives the same through jupyter_server and
classic Notebook with --gateway-url."""
import json
import re
import struct
import threading
import time
import uuid

import pytest
import requests
import websocket

from conftest import module_daemon, wait_until
from serve_fixtures import JSON, Serve, serve_processes

POOLS = """
[pools.python3]
size = 2
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "gateway-daemon")


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)  # and at the end: kpool serve gave every kernel back


def start_kernel(s, headers=None, **body):
    r = requests.post(s.url + "/api/kernels", json=body, headers=headers, timeout=60)
    assert r.status_code == 201, r.text
    return r.json()


def legacy_decode(data):
    """A binary frame of the legacy format: u32 count, u32 offsets (big-endian), JSON, buffers."""
    n = struct.unpack("!I", data[:4])[0]
    offsets = list(struct.unpack("!" + "I" * n, data[4:4 * (n + 1)])) + [len(data)]
    pieces = [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    msg = json.loads(pieces[0])
    msg["buffers"] = pieces[1:]
    return msg


def legacy_encode(msg, buffers):
    body = json.dumps(msg).encode()
    pieces = [body] + list(buffers)
    offsets = [4 * (len(pieces) + 1)]
    for p in pieces[:-1]:
        offsets.append(offsets[-1] + len(p))
    return struct.pack("!" + "I" * (len(pieces) + 1), len(pieces), *offsets) + b"".join(pieces)


def v1_encode(channel, msg, buffers=()):
    parts = [json.dumps(msg[k]).encode() for k in ("header", "parent_header", "metadata", "content")]
    parts += list(buffers)
    offsets = [8 * (len(parts) + 3), 8 * (len(parts) + 3) + len(channel)]
    for p in parts:
        offsets.append(offsets[-1] + len(p))
    return struct.pack("<Q", len(offsets)) + b"".join(struct.pack("<Q", o) for o in offsets) + \
        channel.encode() + b"".join(parts)


def v1_decode(data):
    n = struct.unpack("<Q", data[:8])[0]
    offsets = [struct.unpack("<Q", data[8 * (i + 1):8 * (i + 2)])[0] for i in range(n)]
    channel = data[offsets[0]:offsets[1]].decode()
    parts = [data[offsets[i]:offsets[i + 1]] for i in range(1, n - 1)]
    msg = {k: json.loads(p) for k, p in zip(("header", "parent_header", "metadata", "content"), parts)}
    msg.update(channel=channel, msg_type=msg["header"]["msg_type"], buffers=parts[4:])
    return msg


class KernelSocket:
    """A kernel websocket as a notebook front end uses it."""

    def __init__(self, s, kernel_id, v1=False, query="", **kw):
        url = s.url.replace("http://", "ws://") + "/api/kernels/%s/channels%s" % (kernel_id, query)
        self.v1 = v1
        self.ws = websocket.create_connection(
            url, timeout=30, subprotocols=["v1.kernel.websocket.jupyter.org"] if v1 else None, **kw)
        self.session = uuid.uuid4().hex
        self.backlog = []  # what wait_ready read that was not its own

    def send(self, msg_type, content, channel="shell", buffers=()):
        msg = {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": self.session,
                          "username": "test", "version": "5.3", "date": ""},
               "parent_header": {}, "metadata": {}, "content": content, "channel": channel}
        if self.v1:
            self.ws.send_binary(v1_encode(channel, msg, buffers))
        elif buffers:
            self.ws.send_binary(legacy_encode(msg, buffers))
        else:
            self.ws.send(json.dumps(msg))
        return msg["header"]["msg_id"]

    def recv(self):
        return self.backlog.pop(0) if self.backlog else self.read()

    def read(self):
        opcode, data = self.ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            raise websocket.WebSocketConnectionClosedException("closed: %r" % data)
        if self.v1:
            assert opcode == websocket.ABNF.OPCODE_BINARY
            return v1_decode(data)
        if opcode == websocket.ABNF.OPCODE_BINARY:
            return legacy_decode(data)
        msg = json.loads(data)
        assert msg["msg_id"] == msg["header"]["msg_id"] and msg["buffers"] == []
        return msg

    def wait_ready(self, attempts=40):
        """kernel_info_request until one is answered, as notebook front ends start a connection:
        jupyter_server's gateway client drops what a browser sends before its own websocket to
        the gateway is open (the message waits on a future that is replaced, never resolved).
        Other messages read meanwhile are kept for recv."""
        self.ws.settimeout(0.5)
        asked = set()
        try:
            for _ in range(attempts):
                asked.add(self.send("kernel_info_request", {}))
                try:
                    while True:
                        msg = self.read()
                        if msg["parent_header"].get("msg_id") not in asked:
                            self.backlog.append(msg)
                        elif msg["msg_type"] == "kernel_info_reply":
                            return
                except websocket.WebSocketTimeoutException:
                    continue
            raise AssertionError("no kernel_info_reply over the websocket")
        finally:
            self.ws.settimeout(30)

    def until(self, done):
        got = []
        while True:
            got.append(self.recv())
            if done(got[-1]):
                return got

    def execute(self, code):
        msg_id = self.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                               "user_expressions": {}, "allow_stdin": False,
                                               "stop_on_error": True})
        msgs = self.until(lambda m: m["msg_type"] == "status" and m["parent_header"].get("msg_id") == msg_id
                          and m["content"]["execution_state"] == "idle")
        mine = [m for m in msgs if m["parent_header"].get("msg_id") == msg_id]
        reply = [m for m in mine if m["msg_type"] == "execute_reply"]
        if not reply:  # the reply may come after the idle status
            reply = self.until(lambda m: m["msg_type"] == "execute_reply" and m["parent_header"]["msg_id"] == msg_id)[-1:]
        return [m for m in mine if m["channel"] == "iopub"], reply[0]["content"]

    def close(self):
        self.ws.close()


def stdout_of(iopub):
    return "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream")


def test_input_and_getpass_prompts_reach_the_websocket_and_are_answered(serve):
    """Issue #37: ipykernel sends input_request on stdin to the identity of the shell request's
    sender; kpool serve's shell and stdin sockets had different ones, and input() hung."""
    s = serve()
    ks = KernelSocket(s, start_kernel(s)["id"])
    ks.wait_ready()
    for code, prompt, password in (("x = input('name? ')\nprint('hello', x)", "name? ", False),
                                   ("import getpass\nx = getpass.getpass('pw: ')\nprint('hello', x)", "pw: ", True)):
        msg_id = ks.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": True, "stop_on_error": True})
        request = ks.until(lambda m: m["msg_type"] == "input_request")[-1]
        assert request["channel"] == "stdin" and request["parent_header"]["msg_id"] == msg_id
        assert request["content"] == {"prompt": prompt, "password": password}
        ks.send("input_reply", {"value": "kpool"}, channel="stdin")
        msgs = ks.until(lambda m: m["msg_type"] == "execute_reply" and m["parent_header"].get("msg_id") == msg_id)
        assert msgs[-1]["content"]["status"] == "ok"
        assert "hello kpool" in stdout_of(msgs)
    ks.close()


def test_a_notebook_servers_kernel_keeps_the_real_history_and_a_v1_exec_does_not(serve):
    """Issue #38: one-shot runs (/v1, kpool run, kpool exec) keep IPython's history in memory
    as papermill does; a notebook server's kernel keeps the user's history file."""
    s = serve()
    ks = KernelSocket(s, start_kernel(s)["id"])
    ks.wait_ready()
    iopub, reply = ks.execute("print(get_ipython().history_manager.hist_file)")
    assert reply["status"] == "ok" and stdout_of(iopub).strip().endswith("history.sqlite")
    ks.close()
    spares = lambda: int(re.search(r"^kpool_serve_spare_kernels (\d+)", s.get("/metrics").text, re.M).group(1))
    for spare in (False, True):  # a fresh kernel (history moved by the acquire), then a spare (by a context op)
        if spare:
            wait_until(lambda: spares() == 1, timeout=60, what="a spare kernel")
        r = requests.post(s.url + "/v1/exec", json={"code": "print(get_ipython().history_manager.hist_file)"},
                          timeout=60)
        assert r.status_code == 200 and r.json()["outputs"][0]["text"] == [":memory:\n"], r.text


def test_kernelspecs_are_the_pools_with_their_specs_and_resources(serve):
    s = serve()
    specs = requests.get(s.url + "/api/kernelspecs", timeout=30).json()
    assert specs["default"] == "python3" and list(specs["kernelspecs"]) == ["python3"]
    python3 = specs["kernelspecs"]["python3"]
    assert python3["spec"]["language"] == "python" and python3["spec"]["display_name"]
    assert python3["spec"]["argv"][:3] == ["/usr/bin/python3", "-m", "ipykernel_launcher"]
    assert requests.get(s.url + "/api/kernelspecs/python3", timeout=30).json() == python3
    assert requests.get(s.url + "/api/kernelspecs/cobol", timeout=30).status_code == 404
    logo = python3["resources"]["logo-64x64"]
    r = requests.get(s.url + logo, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content[:4] == b"\x89PNG"
    assert requests.get(s.url + "/kernelspecs/python3/kernel.json.bak", timeout=30).status_code == 404


def test_two_pools_of_one_kernelspec_are_told_apart_by_display_name(kpoold):
    """Issue #53 item 7: a notebook's kernel menu shows display names; the second pool of a
    kernelspec says which pool it is."""
    from serve_fixtures import Serve
    d = kpoold("[pools.python3]\nsize = 0\n[pools.untrusted]\nkernelspec = \"python3\"\nsize = 0\n"
               "[pools.fake]\nsize = 0\n")
    s = Serve(d.endpoint)
    try:
        specs = requests.get(s.url + "/api/kernelspecs", timeout=30).json()["kernelspecs"]
        names = {name: spec["spec"]["display_name"] for name, spec in specs.items()}
        plain = names["python3"]
        assert names["untrusted"] == plain + " (untrusted)" and "untrusted" not in plain, names
        assert names["fake"] == "Fake fake"  # alone with its kernelspec: as it is
    finally:
        assert s.stop() == 0, s.log_text()


def test_a_kernel_starts_warm_runs_code_over_its_websocket_and_is_deleted(serve, daemon, tmp_path):
    # It counts kpoold's leases: no spare (--spares 0; test_serve_spares.py has the gateway's).
    s = serve("--spares", "0")
    # The bound below is for a warm kernel; a loaded machine may still be refilling the pool.
    wait_until(lambda: daemon.pool("python3")["warm"] >= 1, timeout=60, what="a warm kernel")
    started = time.monotonic()
    model = start_kernel(s, name="python3",
                         env={"KERNEL_WORKING_DIR": str(tmp_path), "KERNEL_USERNAME": "ada", "SECRET": "x"})
    assert time.monotonic() - started < 5
    assert re.fullmatch(r"\w{8}-\w{4}-4\w{3}-\w{4}-\w{12}", model["id"])
    assert model["name"] == "python3" and model["execution_state"] == "idle" and model["connections"] == 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", model["last_activity"])
    assert daemon.pool("python3")["leased"] == 1
    ks = KernelSocket(s, model["id"])
    iopub, reply = ks.execute("import os; print(os.getcwd(), os.environ.get('KERNEL_USERNAME'), "
                              "os.environ.get('SECRET'))\n6 * 7")
    # KERNEL_WORKING_DIR is the cwd, KERNEL_* reach the kernel, other variables do not.
    assert stdout_of(iopub) == "%s ada None\n" % tmp_path
    assert reply["status"] == "ok" and reply["execution_count"] == 1  # the priming left no trace
    assert [m["content"]["data"]["text/plain"] for m in iopub if m["msg_type"] == "execute_result"] == ["42"]
    listed = requests.get(s.url + "/api/kernels", timeout=30).json()
    assert [k["id"] for k in listed] == [model["id"]] and listed[0]["connections"] == 1
    assert requests.get(s.url + "/api/kernels/" + model["id"], timeout=30).json()["last_activity"] > model["last_activity"]
    r = requests.delete(s.url + "/api/kernels/" + model["id"], timeout=30)
    assert r.status_code == 204
    with pytest.raises(websocket.WebSocketException):
        ks.until(lambda m: False)  # the websocket is closed with the kernel
    assert requests.get(s.url + "/api/kernels/" + model["id"], timeout=30).status_code == 404
    assert requests.delete(s.url + "/api/kernels/" + model["id"], timeout=30).status_code == 404
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, timeout=10, what="the kernel released")


def test_the_v1_subprotocol_carries_the_wire_frames(serve):
    s = serve()
    model = start_kernel(s)
    ks = KernelSocket(s, model["id"], v1=True)
    assert ks.ws.getsubprotocol() == "v1.kernel.websocket.jupyter.org"
    iopub, reply = ks.execute("print('v1')")
    assert stdout_of(iopub) == "v1\n" and reply["status"] == "ok"
    ks.close()


COMM_ECHO = """
def _target(comm, open_msg):
    @comm.on_msg
    def _echo(msg):
        comm.send(data={"n": len(msg["buffers"])}, buffers=[bytes(b)[::-1] for b in msg["buffers"]])
get_ipython().kernel.comm_manager.register_target("echo", _target)
"""


@pytest.mark.parametrize("v1", [False, True], ids=["legacy", "v1"])
def test_comms_round_trip_with_binary_buffers(serve, v1):
    s = serve()
    ks = KernelSocket(s, start_kernel(s)["id"], v1=v1)
    assert ks.execute(COMM_ECHO)[1]["status"] == "ok"
    comm_id = uuid.uuid4().hex
    ks.send("comm_open", {"comm_id": comm_id, "target_name": "echo", "data": {}})
    ks.send("comm_msg", {"comm_id": comm_id, "data": {"hello": 1}}, buffers=[b"abc", b"\x00\x01\xff"])
    echo = ks.until(lambda m: m["msg_type"] == "comm_msg")[-1]
    assert echo["content"]["data"] == {"n": 2}
    assert [bytes(b) for b in echo["buffers"]] == [b"cba", b"\xff\x01\x00"]
    ks.close()


def test_interrupt_stops_a_running_cell(serve):
    s = serve()
    kid = start_kernel(s)["id"]
    ks = KernelSocket(s, kid)
    msg_id = ks.send("execute_request", {"code": "import time; print('sleeping', flush=True); time.sleep(60)",
                                         "silent": False, "store_history": True, "user_expressions": {},
                                         "allow_stdin": False, "stop_on_error": True})
    ks.until(lambda m: m["msg_type"] == "stream")
    assert requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "busy"
    started = time.monotonic()
    assert requests.post(s.url + "/api/kernels/%s/interrupt" % kid, json={}, timeout=30).status_code == 204
    reply = ks.until(lambda m: m["msg_type"] == "execute_reply" and m["parent_header"]["msg_id"] == msg_id)[-1]
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    assert time.monotonic() - started < 10
    ks.close()


def test_restart_puts_a_warm_kernel_under_the_same_id(serve, daemon):
    # It counts kpoold's leases: no spare (--spares 0; test_serve_spares.py has the gateway's).
    s = serve("--spares", "0")
    kid = start_kernel(s)["id"]
    ks = KernelSocket(s, kid)
    ks.execute("x = 1")
    before = {k["id"] for k in daemon.status()["kernels"] if k["state"] == "leased"}
    wait_until(lambda: daemon.pool("python3")["warm"] >= 1, timeout=60, what="a warm kernel")
    started = time.monotonic()
    r = requests.post(s.url + "/api/kernels/%s/restart" % kid, json={}, timeout=60)
    assert r.status_code == 200 and r.json()["id"] == kid
    assert time.monotonic() - started < 5
    # The old kernel goes back (its release follows the answer), a new one took its place.
    leased = lambda: {k["id"] for k in daemon.status()["kernels"] if k["state"] == "leased"}  # noqa: E731
    wait_until(lambda: len(leased()) == 1, timeout=10, what="the old kernel released")
    assert leased() != before
    # The same websocket now talks to the new kernel: x is gone, counts start over.
    iopub, reply = ks.execute("x")
    assert reply["status"] == "error" and reply["ename"] == "NameError" and reply["execution_count"] == 1
    assert requests.post(s.url + "/api/kernels/nope-nope/restart", json={}, timeout=30).status_code == 404
    metrics = requests.get(s.url + "/metrics", timeout=30).text
    assert 'kpool_serve_gateway_replacements_total{why="restart"} 1' in metrics
    assert "kpool_serve_gateway_kernels 1" in metrics
    ks.close()


def test_messages_sent_while_no_websocket_is_connected_arrive_on_the_next(serve):
    s = serve()
    kid = start_kernel(s)["id"]
    ks = KernelSocket(s, kid)
    msg_id = ks.send("execute_request", {"code": "import time\nfor i in range(4):\n    print(i, flush=True)\n"
                                                 "    time.sleep(0.3)\n",
                                         "silent": False, "store_history": True, "user_expressions": {},
                                         "allow_stdin": False, "stop_on_error": True})
    first = ks.until(lambda m: m["msg_type"] == "stream")
    ks.close()  # mid-execution
    wait_until(lambda: requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["connections"] == 0,
               timeout=10, what="the websocket gone")
    # The cell ends while nobody listens (the model follows the kernel's status all the same).
    wait_until(lambda: requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "idle",
               timeout=20, what="the cell to end")
    again = KernelSocket(s, kid)
    rest = again.until(lambda m: m["msg_type"] == "execute_reply")
    text = stdout_of(first) + stdout_of(rest)
    assert text == "0\n1\n2\n3\n"
    assert rest[-1]["parent_header"]["msg_id"] == msg_id and rest[-1]["content"]["status"] == "ok"
    again.close()


def test_many_kernels_at_once_each_their_own(serve, daemon):
    # It counts kpoold's leases: no spare (--spares 0; test_serve_spares.py has the gateway's).
    s = serve("--spares", "0")
    models = [None] * 5

    def one(i):
        models[i] = start_kernel(s)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({m["id"] for m in models}) == 5
    sockets = [KernelSocket(s, m["id"]) for m in models]
    for i, ks in enumerate(sockets):
        ks.execute("n = %d" % i)
    for i, ks in enumerate(sockets):
        assert stdout_of(ks.execute("print(n)")[0]) == "%d\n" % i
    assert daemon.pool("python3")["leased"] == 5
    for ks, m in zip(sockets, models):
        ks.close()
        assert requests.delete(s.url + "/api/kernels/" + m["id"], timeout=30).status_code == 204


def test_a_kernel_that_dies_is_replaced_and_its_websocket_told(serve):
    s = serve()
    kid = start_kernel(s)["id"]
    ks = KernelSocket(s, kid)
    ks.send("execute_request", {"code": "import os; os._exit(1)", "silent": False, "store_history": True,
                                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    ks.until(lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "restarting")
    wait_until(lambda: requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "idle",
               timeout=20, what="the replacement kernel")
    assert ks.execute("1 + 1")[1]["status"] == "ok"
    ks.close()


def status_states(ks):
    """The execution states the kernel's websocket has been told since the last call (what is
    queued now, read within 0.2 s)."""
    states = []
    ks.ws.settimeout(0.2)
    try:
        while True:
            m = ks.read()
            if m["msg_type"] == "status":
                states.append(m["content"]["execution_state"])
    except websocket.WebSocketTimeoutException:
        pass
    return states


def test_a_kernel_that_dies_while_its_pool_refills_comes_back_once_one_is_warm(kpoold):
    """The replacement of a kernel that died is refused while its pool has no warm kernel
    (--queue-timeout 1 against a refill of some 3 s); kpool serve tries again each second, as
    jupyter_client's restarter tries a failed restart again, instead of calling the kernel dead
    at the first refusal."""
    d = kpoold('[pools.slowfill]\nkernelspec = "python3"\nlauncher = "spawn"\nsize = 1\n'
               'startup_code = "import time\\ntime.sleep(2)"\n')
    d.wait_warm("slowfill", 1, timeout=60)
    s = Serve(d.endpoint, "--spares", "0", "--queue-timeout", "1")
    try:
        kid = start_kernel(s, name="slowfill")["id"]
        ks = KernelSocket(s, kid)
        ks.send("execute_request", {"code": "import os; os._exit(1)", "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        ks.until(lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "restarting")
        states = []  # what the front end is told meanwhile

        def replaced():
            states.extend(status_states(ks))
            return requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "idle"
        wait_until(replaced, timeout=30, what="the replacement kernel", detail=s.log_text)
        # Never "dead" on the way (a front end shows a dead kernel's dialog), nor "restarting" again.
        assert "dead" not in states and "restarting" not in states, states
        assert any("replacement 1 of 5 refused" in line for line in s.log), s.log_text()
        ks.ws.settimeout(30)
        assert ks.execute("1 + 1")[1]["status"] == "ok"
        ks.close()
    finally:
        assert s.stop() == 0, s.log_text()


def test_a_kernel_that_dies_with_its_pool_drained_is_dead_after_five_tries_until_restarted(kpoold):
    """Its pool drained, every replacement is refused: after the fifth, the front end is told
    "dead" (once, after the one "restarting"), and a restart once the pool serves again brings
    the kernel back under its id."""
    d = kpoold("[pools.python3]\nsize = 1\n")
    d.wait_warm("python3", 1, timeout=60)
    s = Serve(d.endpoint, "--spares", "0", "--queue-timeout", "1")
    try:
        kid = start_kernel(s)["id"]
        assert d.rpc(op="drain", pool="python3")["ok"]
        ks = KernelSocket(s, kid)
        ks.send("execute_request", {"code": "import os; os._exit(1)", "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        states = []

        def dead():
            states.extend(status_states(ks))
            return "dead" in states
        wait_until(dead, timeout=30, what="the kernel dead", detail=s.log_text)
        assert [x for x in states if x not in ("busy", "idle")] == ["restarting", "dead"], states
        assert requests.get(s.url + "/api/kernels/" + kid, timeout=30).json()["execution_state"] == "dead"
        assert any("replacement 4 of 5 refused" in line for line in s.log), s.log_text()
        assert not any("replacement 5 of 5 refused" in line for line in s.log), s.log_text()
        assert d.rpc(op="resize", pool="python3", size=1)["ok"]
        d.wait_warm("python3", 1, timeout=60)
        r = requests.post(s.url + "/api/kernels/%s/restart" % kid, json={}, timeout=60)
        assert r.status_code == 200, r.text
        ks.ws.settimeout(30)
        assert ks.execute("1 + 1")[1]["status"] == "ok"
        ks.close()
    finally:
        assert s.stop() == 0, s.log_text()


def test_idle_kernels_are_culled(serve, daemon):
    s = serve("--cull-idle-timeout", "1", "--cull-interval", "1")
    idle = start_kernel(s)["id"]
    connected = start_kernel(s)["id"]
    ks = KernelSocket(s, connected)
    wait_until(lambda: requests.get(s.url + "/api/kernels/" + idle, timeout=30).status_code == 404,
               timeout=15, what="the idle kernel culled")
    # One with a websocket connected stays (as Kernel Gateway's cull_connected=False).
    assert requests.get(s.url + "/api/kernels/" + connected, timeout=30).status_code == 200
    assert any("culling kernel %s" % idle in line for line in s.log)
    ks.close()


def test_the_token_is_required_by_header_or_query(serve, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    s = serve("--token-file", str(token_file))
    assert requests.get(s.url + "/api/kernels", timeout=30).status_code == 401
    assert requests.get(s.url + "/api/kernels", headers={"Authorization": "token nope"}, timeout=30).status_code == 401
    auth = {"Authorization": "token s3cret"}
    kid = start_kernel(s, headers=auth)["id"]
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        KernelSocket(s, kid)
    assert refused.value.status_code == 401
    ks = KernelSocket(s, kid, query="?token=s3cret")  # as a browser's websocket must
    assert ks.execute("1")[1]["status"] == "ok"
    ks.close()
    # Only a websocket takes it from the URL: elsewhere it would end up in logs and histories.
    assert requests.get(s.url + "/api/kernels?token=s3cret", timeout=30).status_code == 401
    # Nor is it ever written to the access log, from the URL or a header.
    wait_until(lambda: any("/api/kernels 401 " in line for line in s.log), what="the 401's access line")
    assert not any("s3cret" in line for line in s.log), "".join(s.log)


def test_cors_headers_and_websocket_origins(serve):
    s = serve("--allow-origin", "https://lab.example", "--allow-methods", "GET, POST, DELETE")
    r = requests.options(s.url + "/api/kernels", headers={"Origin": "https://lab.example"}, timeout=30)
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "https://lab.example"
    assert r.headers["access-control-allow-methods"] == "GET, POST, DELETE"
    assert r.headers["vary"] == "Origin"
    # No CORS headers for a request without Origin, nor for a refused origin.
    assert "access-control-allow-origin" not in requests.options(s.url + "/api/kernels", timeout=30).headers
    refused = requests.options(s.url + "/api/kernels", headers={"Origin": "https://evil.example"}, timeout=30)
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    kid = start_kernel(s)["id"]
    KernelSocket(s, kid, origin="https://lab.example").close()
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        KernelSocket(s, kid, origin="https://evil.example")
    assert refused.value.status_code == 403


@pytest.mark.parametrize("request_, status", [
    (("PUT", "/api/kernels", b""), 405),
    (("POST", "/api/kernels", b"[1]"), 400),
    (("POST", "/api/kernels", b'{"name": "cobol"}'), 404),
    (("GET", "/api/kernels/0000/channels", b""), 404),
    (("GET", "/api/sessions/0000", b""), 404),
    (("GET", "/api/contents", b""), 404),
])
def test_bad_gateway_requests_get_a_json_error(serve, request_, status):
    method, path, data = request_
    r = requests.request(method, serve().url + path, data=data, headers=JSON, timeout=30)
    assert r.status_code == status and r.json()["message"], r.text


def test_stopping_releases_every_kernel(serve, daemon):
    # It counts kpoold's leases: no spare (--spares 0; test_serve_spares.py has the gateway's).
    s = serve("--spares", "0")
    kids = [start_kernel(s)["id"] for _ in range(2)]
    ks = KernelSocket(s, kids[0])
    assert daemon.pool("python3")["leased"] == 2
    assert s.stop() == 0, s.log_text()
    with pytest.raises(websocket.WebSocketException):
        ks.until(lambda m: False)
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, timeout=10, what="every kernel released")


def test_renew_extends_a_lease(daemon):
    kernel = daemon.acquire("python3", lease_s=2)
    reply = daemon.rpc(op="renew", kernel_id=kernel["kernel_id"], lease_s=30)
    assert reply == {"ok": True, "lease_remaining_s": 30}
    held = next(k for k in daemon.status()["kernels"] if k["id"] == kernel["kernel_id"])
    assert 25 < held["lease_remaining_s"] <= 30  # the 2 s lease now ends 30 s from the renewal
    assert daemon.rpc(op="release", kernel_id=kernel["kernel_id"])["ok"]
    assert daemon.rpc(op="renew", kernel_id=kernel["kernel_id"], lease_s=30)["error"]["code"] == "unknown_kernel"
