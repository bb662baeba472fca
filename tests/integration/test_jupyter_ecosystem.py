"""Jupyter's own tools use kpoold unmodified through the pooled kernelspec: jupyter_client's
KernelManager, nbclient and `jupyter execute`, and jupyter_server's REST and websocket API."""
import asyncio
import json
import os
import subprocess
import time
import urllib.request
import uuid

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

from conftest import alive, free_port, PYTHON, reference_kernel_manager, run_cells, wait_until

POOL = """
[pools.python3]
size = 2
launcher = "%s"
"""


@pytest.fixture
def pooled(request, kpoold, tmp_path, monkeypatch):
    """A daemon with a python3 pool and the python3-pooled kernelspec pointing at it; the
    pool's launcher is "spawn" unless the test asks for "fork" (indirect parametrization)."""
    d = kpoold(POOL % getattr(request, "param", "spawn"))
    prefix = tmp_path / "prefix"
    subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", "python3",
                    "--prefix", str(prefix), "--endpoint", d.endpoint], check=True,
                   capture_output=True)
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    d.wait_warm("python3", 2, timeout=60)
    if getattr(request, "param", "spawn") == "fork":
        # The first kernels may have been spawned while the zygote imported: replace them.
        wait_until(lambda: "zygote python3 ready" in d.log_text(), timeout=60, what="the zygote")
        assert d.rpc(op="drain", pool="python3")["ok"]
        assert d.rpc(op="resize", pool="python3", size=2)["ok"]
        d.wait_warm("python3", 2, timeout=60)
    return d


@pytest.mark.parametrize("pooled", ["spawn", "fork"], indirect=True)
def test_kernel_manager_start_execute_interrupt_restart_shutdown(pooled, tmp_path):
    d = pooled
    km = KernelManager(kernel_name="python3-pooled")
    km.start_kernel(cwd=str(tmp_path))
    first = km.provisioner.pooled_kernel_id
    first_pid = km.provisioner.pid
    assert d.pool("python3")["leased"] == 1
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        outputs = []
        kc.execute_interactive("import os; print(os.getcwd())", timeout=30,
                               output_hook=lambda m: outputs.append(m["content"]["text"])
                               if m["msg_type"] == "stream" else None)
        assert outputs == [str(tmp_path) + "\n"]
        # Interrupt a long cell: SIGINT goes through the daemon to the kernel's process group.
        msg_id = kc.execute("import time; time.sleep(60)")
        time.sleep(1.0)
        start = time.monotonic()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - start < 10
        assert km.is_alive()
    finally:
        kc.stop_channels()
    km.restart_kernel()
    second = km.provisioner.pooled_kernel_id
    assert second != first
    wait_until(lambda: not alive(first_pid), what="the first kernel to be released")
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        reply = kc.execute_interactive("x = 1", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
    second_pid = km.provisioner.pid
    km.shutdown_kernel()
    assert not km.is_alive()
    wait_until(lambda: not alive(second_pid), what="the second kernel to exit")
    wait_until(lambda: d.pool("python3")["leased"] == 0, what="no kernel leased any more")


def make_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"),
        nbformat.v4.new_code_cell("print(sum(range(10)))\n6 * 7"),
        nbformat.v4.new_code_cell("import sys\nprint(sys.executable)"),
    ]
    return nb


def outputs_of(nb):
    result = []
    for cell in nb.cells:
        for out in cell.outputs:
            out = dict(out)
            out.pop("execution_count", None)
            result.append(json.dumps(out, sort_keys=True))
    return result


def test_nbclient_gives_the_same_outputs_as_the_plain_kernel(pooled, tmp_path):
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    runs = {}
    for name in ("python3", "python3-pooled"):
        nb = make_notebook()
        km = reference_kernel_manager(name, tmp_path) if name == "python3" else None  # the plain one
        NotebookClient(nb, km=km, kernel_name=name, timeout=60,
                       resources={"metadata": {"path": str(workdir)}}).execute()
        runs[name] = outputs_of(nb)
    assert runs["python3-pooled"] == runs["python3"]
    assert json.loads(runs["python3-pooled"][0])["text"] == str(workdir) + "\n"
    assert pooled.pool("python3")["counters"]["acquired"] == 1


def test_nbclient_gives_the_kernel_what_the_caller_set_and_an_in_memory_history(pooled, tmp_path, monkeypatch):
    """nbclient's own suite found both: a variable the calling process set for itself (the
    kernel's environment is the daemon's, not the caller's), and nbclient's
    --HistoryManager.hist_file=:memory:, which a launched kernel gets."""
    monkeypatch.setenv("KPOOL_TEST_SET_BY_THE_CALLER", "here")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('KPOOL_TEST_SET_BY_THE_CALLER'))\n"
        "print(get_ipython().history_manager.hist_file)")]
    # What nbclient passes a kernel named python3 (jupyter_client's `ipykernel`): given here, as
    # this kernelspec has another name.
    NotebookClient(nb, kernel_name="python3-pooled", timeout=60,
                   extra_arguments=["--HistoryManager.hist_file=:memory:"]).execute()
    assert nb.cells[0].outputs[0]["text"] == "here\n:memory:\n"
    # A kernelspec's own history file stays when nothing asks for memory.
    km = KernelManager(kernel_name="python3-pooled")
    km.start_kernel()
    try:
        out = run_cells(km.connection_file, ["print(get_ipython().history_manager.hist_file)"])
        assert out[0].strip() != ":memory:", out
    finally:
        km.shutdown_kernel()


HOLDER = """
import sys, time
from jupyter_client import KernelManager
km = KernelManager(kernel_name=sys.argv[1])
km.start_kernel()
print(km.provisioner.pooled_kernel_id, flush=True)
time.sleep(600)
"""


def test_a_dead_clients_kernel_comes_back_within_the_held_lease(pooled, tmp_path):
    """A client that dies without shutting its kernel down holds it only for the short lease it
    renews while it lives, not the pool's whole lease."""
    spec = tmp_path / "prefix" / "share" / "jupyter" / "kernels" / "python3-pooled" / "kernel.json"
    short = json.loads(spec.read_text())
    short["metadata"]["kernel_provisioner"]["config"]["held_lease_s"] = 3
    held = spec.parent.parent / "python3-held"
    held.mkdir()
    (held / "kernel.json").write_text(json.dumps(short))
    holder = subprocess.Popen([PYTHON, "-c", HOLDER, "python3-held"], stdout=subprocess.PIPE, text=True)
    try:
        kernel_id = holder.stdout.readline().strip()
        assert kernel_id, "the holder started no kernel"
        time.sleep(7)  # more than two leases: only the renewals keep it
        assert pooled.pool("python3")["leased"] == 1
        assert pooled.rpc(op="poll", kernel_id=kernel_id)["alive"]
    finally:
        holder.kill()
        holder.wait()
    started = time.monotonic()
    wait_until(lambda: pooled.pool("python3")["leased"] == 0, timeout=15, what="the lease to run out")
    assert time.monotonic() - started < 6
    assert pooled.pool("python3")["counters"]["leases_expired"] == 1


def test_jupyter_execute(pooled, tmp_path):
    path = tmp_path / "nb.ipynb"
    nbformat.write(make_notebook(), str(path))
    r = subprocess.run(["jupyter", "execute", "--kernel_name=python3-pooled", str(path)],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert pooled.pool("python3")["counters"]["acquired"] == 1
    wait_until(lambda: pooled.pool("python3")["leased"] == 0, what="jupyter execute to release")


def test_jupyter_server_rest_and_websocket(pooled, tmp_path):
    from tornado.websocket import websocket_connect

    port, token = free_port(), uuid.uuid4().hex
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    server = subprocess.Popen(
        [PYTHON, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.port=%d" % port, "--ServerApp.port_retries=0",
         "--ServerApp.token=" + token, "--ServerApp.root_dir=" + str(root), "--debug"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(str(tmp_path / "server.log"), "wb"))
    base = "http://127.0.0.1:%d" % port
    headers = {"Authorization": "token " + token}

    def call(method, path, body=None):
        req = urllib.request.Request(base + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, (json.loads(resp.read() or b"null"))

    try:
        def up():
            try:
                return call("GET", "/api/status")[0] == 200
            except OSError:
                return server.poll() is not None
        wait_until(up, timeout=60, what="jupyter_server to start")
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        status, kernel = call("POST", "/api/kernels", {"name": "python3-pooled", "path": "work"})
        assert status == 201 and kernel["name"] == "python3-pooled"
        assert pooled.pool("python3")["leased"] == 1

        async def run_code():
            ws = await websocket_connect("ws://127.0.0.1:%d/api/kernels/%s/channels?token=%s"
                                         % (port, kernel["id"], token))
            msg_id = uuid.uuid4().hex
            ws.write_message(json.dumps({
                "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": "import os; print(6 * 7, os.getcwd())", "silent": False,
                            "store_history": True, "user_expressions": {}, "allow_stdin": False}}))
            # Shell and iopub are separate channels: wait for the reply and for the kernel to
            # go idle on iopub, which comes after all of the cell's output.
            text, reply, idle = "", None, False
            while reply is None or not idle:
                msg = json.loads(await asyncio.wait_for(ws.read_message(), 30))
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text += msg["content"]["text"]
                elif msg["msg_type"] == "execute_reply":
                    reply = msg["content"]
                elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            ws.close()
            return text, reply

        text, reply = asyncio.run(run_code())
        assert reply["status"] == "ok"
        assert text == "42 %s\n" % (root / "work")  # the cwd jupyter_server asked for
        status, _ = call("DELETE", "/api/kernels/" + kernel["id"])
        assert status == 204
        wait_until(lambda: pooled.pool("python3")["leased"] == 0, what="the server to release it")
    finally:
        server.terminate()
        server.wait(30)
