"""kpool serve as the Kernel Gateway of real notebook servers (issue #22): Debian's
jupyter_server 1.23 and classic Notebook 6.4 started with --gateway-url, used through their own
REST API and kernel websockets as a browser uses them: start, execute, interrupt, restart,
list, delete, comms with buffers, a websocket dropped and reopened mid-execution, several
kernels at once, and a wrong gateway token refused; a person's path through classic Notebook's
page in Debian's chromium (tests/js/notebook_page.js); and kpool's notebook server extension
(kpool.server_extension), enabled by installing the kpool package, turning Nagle off on both of the
server's websockets."""
import json
import os
import shutil
import subprocess
import threading
import time

import pytest
import requests

from conftest import free_port, module_daemon, SOURCE_DIR, tcp_connections, tcp_nodelay, wait_until
from test_gateway import COMM_ECHO, POOLS, KernelSocket, stdout_of
from serve_fixtures import Serve

SERVER_TOKEN = "server-token"
GATEWAY_TOKEN = "gateway-token"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "gw-servers-daemon")


@pytest.fixture(scope="module")
def gateway(daemon, tmp_path_factory):
    token_file = tmp_path_factory.mktemp("gw-token") / "token"
    token_file.write_text(GATEWAY_TOKEN)
    s = Serve(daemon.endpoint, "--token-file", str(token_file))
    yield s
    assert s.stop() == 0, s.log_text()
    wait_until(lambda: all(p["leased"] == 0 for p in daemon.status()["pools"]), timeout=20,
               what="no kernel leased")


class NotebookServer:
    """jupyter_server or classic Notebook with --gateway-url, in Jupyter directories of its own."""

    def __init__(self, module, gateway_url, tmp, gateway_token=GATEWAY_TOKEN, python="/usr/bin/python3"):
        app = "ServerApp" if module == "jupyter_server" else "NotebookApp"
        port = free_port()
        self.url = "http://127.0.0.1:%d" % port
        dirs = {name: str(tmp / name) for name in ("config", "runtime", "ipython", "root")}
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        env = dict(os.environ, JUPYTER_CONFIG_DIR=dirs["config"], JUPYTER_RUNTIME_DIR=dirs["runtime"],
                   IPYTHONDIR=dirs["ipython"], JUPYTER_GATEWAY_AUTH_TOKEN=gateway_token)
        self.port = port
        args = [python, "-m", module, "--no-browser", "--ip=127.0.0.1", "--port=%d" % port,
                "--gateway-url=" + gateway_url, "--%s.token=%s" % (app, SERVER_TOKEN),
                "--%s.%s=%s" % (app, "root_dir" if app == "ServerApp" else "notebook_dir", dirs["root"])]
        if os.geteuid() == 0:
            args.append("--allow-root")
        self.log_path = str(tmp / "server.log")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))
        self.headers = {"Authorization": "token " + SERVER_TOKEN}
        wait_until(lambda: self.proc.poll() is not None or self._answers(), timeout=60,
                   what="%s to answer" % module)
        assert self.proc.poll() is None, self.log()

    def _answers(self):
        try:
            return requests.get(self.url + "/api", headers=self.headers, timeout=2).ok
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still busy starting
            return False

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def api(self, method, path, **kw):
        return requests.request(method, self.url + path, headers=self.headers, timeout=60, **kw)

    def socket(self, kernel_id):
        ks = KernelSocket(self, kernel_id, query="?session_id=abc", header=["Authorization: token " + SERVER_TOKEN])
        ks.wait_ready()
        return ks

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(params=["jupyter_server", "notebook"])
def server(request, gateway, tmp_path):
    s = NotebookServer(request.param, gateway.url, tmp_path)
    yield s
    s.stop()


def kernel_ids_at(gateway):
    return {k["id"] for k in requests.get(gateway.url + "/api/kernels",
                                          headers={"Authorization": "token " + GATEWAY_TOKEN},
                                          timeout=30).json()}


def test_the_server_lists_the_gateways_kernelspecs(server):
    specs = server.api("GET", "/api/kernelspecs").json()
    assert specs["default"] == "python3" and "python3" in specs["kernelspecs"]


def test_start_execute_interrupt_restart_list_delete_through_the_server(server, gateway, daemon):
    started = time.monotonic()
    r = server.api("POST", "/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text + server.log()
    kid = r.json()["id"]
    assert kid in kernel_ids_at(gateway)  # the server's kernel is the gateway's, same id
    ks = server.socket(kid)
    iopub, reply = ks.execute("x = 6 * 7\nx")
    first_result = time.monotonic() - started
    assert reply["status"] == "ok" and reply["execution_count"] == 1
    assert [m["content"]["data"]["text/plain"] for m in iopub if m["msg_type"] == "execute_result"] == ["42"]
    assert first_result < 10

    msg_id = ks.send("execute_request", {"code": "import time; print('go', flush=True); time.sleep(60)",
                                         "silent": False, "store_history": True, "user_expressions": {},
                                         "allow_stdin": False, "stop_on_error": True})
    ks.until(lambda m: m["msg_type"] == "stream")
    assert server.api("POST", "/api/kernels/%s/interrupt" % kid).status_code == 204
    reply = ks.until(lambda m: m["msg_type"] == "execute_reply" and m["parent_header"]["msg_id"] == msg_id)[-1]
    assert reply["content"]["ename"] == "KeyboardInterrupt"

    leased_before = {k["id"] for k in daemon.status()["kernels"] if k["state"] == "leased"}
    assert server.api("POST", "/api/kernels/%s/restart" % kid).status_code == 200
    ks.close()
    ks = server.socket(kid)
    assert ks.execute("x")[1]["ename"] == "NameError"  # a fresh kernel behind the same id
    assert {k["id"] for k in daemon.status()["kernels"] if k["state"] == "leased"} != leased_before
    ks.close()

    assert [k["id"] for k in server.api("GET", "/api/kernels").json()] == [kid]
    assert server.api("DELETE", "/api/kernels/" + kid).status_code == 204
    assert kid not in kernel_ids_at(gateway)
    assert server.api("GET", "/api/kernels").json() == []


def test_a_comm_with_buffers_through_the_server(server):
    kid = server.api("POST", "/api/kernels", json={"name": "python3"}).json()["id"]
    ks = server.socket(kid)
    assert ks.execute(COMM_ECHO)[1]["status"] == "ok"
    ks.send("comm_open", {"comm_id": "c1", "target_name": "echo", "data": {}})
    ks.send("comm_msg", {"comm_id": "c1", "data": {}}, buffers=[b"\x01\x02\x03"])
    echo = ks.until(lambda m: m["msg_type"] == "comm_msg")[-1]
    assert echo["content"]["data"] == {"n": 1} and [bytes(b) for b in echo["buffers"]] == [b"\x03\x02\x01"]
    ks.close()
    assert server.api("DELETE", "/api/kernels/" + kid).status_code == 204


def test_a_websocket_dropped_mid_execution_gets_the_rest_when_reopened(server, gateway):
    kid = server.api("POST", "/api/kernels", json={"name": "python3"}).json()["id"]
    ks = server.socket(kid)
    ks.send("execute_request", {"code": "import time\nfor i in range(4):\n    print(i, flush=True)\n"
                                        "    time.sleep(0.4)\n",
                                "silent": False, "store_history": True, "user_expressions": {},
                                "allow_stdin": False, "stop_on_error": True})
    first = ks.until(lambda m: m["msg_type"] == "stream")
    ks.close()
    # The cell ends while no browser listens (the gateway's model follows the kernel's status).
    wait_until(lambda: requests.get(gateway.url + "/api/kernels/" + kid, timeout=30,
                                    headers={"Authorization": "token " + GATEWAY_TOKEN}).json()["execution_state"] == "idle",
               timeout=20, what="the cell to end")
    again = server.socket(kid)
    rest = again.until(lambda m: m["msg_type"] == "execute_reply")
    assert stdout_of(first) + stdout_of(rest) == "0\n1\n2\n3\n"
    again.close()
    assert server.api("DELETE", "/api/kernels/" + kid).status_code == 204


def test_several_kernels_at_once_through_jupyter_server(gateway, tmp_path):
    server = NotebookServer("jupyter_server", gateway.url, tmp_path)
    try:
        ids = [None] * 4

        def one(i):
            ids[i] = server.api("POST", "/api/kernels", json={"name": "python3"}).json()["id"]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(ids)) == 4 and set(ids) <= kernel_ids_at(gateway)
        for i, kid in enumerate(ids):
            ks = server.socket(kid)
            assert stdout_of(ks.execute("print(%d)" % i)[0]) == "%d\n" % i
            ks.close()
    finally:
        server.stop()  # shuts its kernels down on the gateway
    assert not set(ids) & kernel_ids_at(gateway)


def test_a_wrong_gateway_token_is_refused(gateway, tmp_path):
    server = NotebookServer("jupyter_server", gateway.url, tmp_path, gateway_token="wrong")
    try:
        r = server.api("POST", "/api/kernels", json={"name": "python3"})
        assert r.status_code >= 400
        # The access log line is written after the answer, and read from kpool serve's stderr by
        # a thread of the fixture: it may arrive just after jupyter_server's own answer.
        wait_until(lambda: any(" 401 " in line and "/api/k" in line for line in gateway.log),
                   timeout=10, what="kpool serve's 401 in its access log")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def kpool_venv(tmp_path_factory):
    """A virtual environment (on Debian's packages) with the kpool package installed as a user
    installs it: its python, and the config files the install put in its etc/jupyter."""
    venv = tmp_path_factory.mktemp("kpool-venv")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    src = tmp_path_factory.mktemp("kpool-src") / "python"
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(["/usr/bin/python3", "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "--root-user-action=ignore", "--no-build-isolation", "--no-deps", "--no-index", str(src)],
                   check=True, cwd=str(src.parent))
    return venv


def websocket_nagle(server, gateway, ks):
    """Whether the server's two sockets of websocket `ks` have TCP_NODELAY: the one it accepted
    from us, and its gateway client's to kpool serve (each of those, if it has several)."""
    pid = server.proc.pid
    mine = ks.ws.sock.getsockname()[1]
    gateway_port = int(gateway.url.rsplit(":", 1)[1])
    conns = tcp_connections(pid)
    accepted = [fd for fd, local, remote in conns if (local, remote) == (server.port, mine)]
    to_gateway = [fd for fd, local, remote in conns if remote == gateway_port]
    assert len(accepted) == 1 and to_gateway, conns
    return tcp_nodelay(pid, accepted[0]), [tcp_nodelay(pid, fd) for fd in to_gateway]


@pytest.mark.parametrize("module", ["jupyter_server", "notebook"])
def test_installing_kpool_turns_nagle_off_on_the_servers_websockets(module, gateway, kpool_venv, tmp_path):
    # Without the package's extension, Nagle is on at both ends (what costs each message after
    # an execute's first the peer's delayed ACK: bench scenarios 15 and 18).
    plain = NotebookServer(module, gateway.url, tmp_path / "plain")
    try:
        kid = plain.api("POST", "/api/kernels", json={"name": "python3"}).json()["id"]
        ks = plain.socket(kid)
        assert ks.execute("1 + 1")[1]["status"] == "ok"
        accepted, to_gateway = websocket_nagle(plain, gateway, ks)
        assert not accepted and not any(to_gateway), (accepted, to_gateway)
        ks.close()
        assert plain.api("DELETE", "/api/kernels/" + kid).status_code == 204
    finally:
        plain.stop()
    # Installed in a virtual environment, it is enabled there with nothing more to do.
    server = NotebookServer(module, gateway.url, tmp_path / "venv", python=str(kpool_venv / "bin" / "python"))
    try:
        assert "kpool.server_extension: TCP_NODELAY on websockets" in server.log()
        kid = server.api("POST", "/api/kernels", json={"name": "python3"}).json()["id"]
        ks = server.socket(kid)
        iopub, reply = ks.execute("print('through', 'both')")
        assert reply["status"] == "ok" and stdout_of(iopub) == "through both\n"
        accepted, to_gateway = websocket_nagle(server, gateway, ks)
        assert accepted and any(to_gateway), (accepted, to_gateway)
        ks.close()
        if module == "jupyter_server":
            # 1.23's gateway client lost a message sent before its own websocket to the gateway
            # was being opened (about every second new websocket): sent once, at once, each of
            # these must be answered (the websocket's 30 s timeout fails the test otherwise).
            assert "messages sent before the gateway websocket connects are kept" in server.log()
            for _ in range(6):
                early = KernelSocket(server, kid, query="?session_id=abc",
                                     header=["Authorization: token " + SERVER_TOKEN])
                assert stdout_of(early.execute("print('first')")[0]) == "first\n"
                early.close()
        assert server.api("DELETE", "/api/kernels/" + kid).status_code == 204
    finally:
        server.stop()


JS = os.path.join(os.path.dirname(__file__), "..", "js")


def test_a_person_runs_answers_interrupts_and_restarts_in_notebooks_page(gateway, daemon, tmp_path):
    if not os.path.isdir(os.path.join(JS, "node_modules", "playwright-core")) or not shutil.which("chromium"):
        pytest.fail("this test needs chromium and tests/js's node modules (scripts/dev installs both)")
    server = NotebookServer("notebook", gateway.url, tmp_path)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {}, "outputs": [],
                     "source": ""}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "root" / "kpool.ipynb").write_text(json.dumps(nb))
    # Kept where the suite runs when the page does not show what it should.
    shot = os.path.join(os.environ.get("KPOOL_ARTIFACTS", os.path.join(os.getcwd(), "test-artifacts")),
                        "notebook_page.png")
    os.makedirs(os.path.dirname(shot), exist_ok=True)
    try:
        out = subprocess.run(["node", os.path.join(JS, "notebook_page.js"), "--url",
                              server.url + "/notebooks/kpool.ipynb?token=" + SERVER_TOKEN, "--screenshot", shot],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr + server.log()
        steps = json.loads(out.stdout)["steps"]
        assert "kpool" in steps["opened"]
        assert steps["run"].strip() == "answer 42"
        assert steps["prompt"].strip() == "name?"
        assert "hello kpool" in steps["input"]
        assert "KeyboardInterrupt" in steps["interrupted"]
        assert steps["after_restart"].strip() == "False"  # a fresh kernel behind the same id
        # The page's kernel was one of the gateway's, from kpoold's pool.
        sessions = server.api("GET", "/api/sessions").json()
        assert len(sessions) == 1 and sessions[0]["kernel"]["id"] in kernel_ids_at(gateway)
    finally:
        server.stop()
