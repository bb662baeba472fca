"""What the kpool serve suites share: a module's kpoold (POOLS), a `kpool serve` process in front
of it (Serve, serve_processes and the `serve` fixture, which checks that each stops cleanly and
leaves no kernel leased), and small request helpers. Imported by test_serve_*.py, the gateway's
suites and the clients' suites."""
import base64
import json
import os
import re
import signal
import subprocess
import threading

import nbformat
import pytest
import requests
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from conftest import module_daemon, wait_until


HERE = os.path.dirname(os.path.abspath(__file__))
KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")


POOLS = """
[pools.python3]
size = 2
[pools.slow]
kernelspec = "python3"
launcher = "spawn"
size = 0
startup_code = "import time\\ntime.sleep(30)"
"""


JSON = {"Content-Type": "application/json"}


class Serve:
    """One `kpool serve` process, on a free loopback port. Without a token of its own (args
    --token-file, $KPOOL_SERVE_TOKEN) it runs with --no-token, unless `token_default`: then the
    token it made is read from the file its first line names (self.token)."""

    def __init__(self, endpoint, *args, env=None, token_default=False):
        env = dict(os.environ, **(env or {}))
        if not token_default and "--token-file" not in args and "KPOOL_SERVE_TOKEN" not in env:
            args = ("--no-token",) + args
        self.proc = subprocess.Popen([KPOOL, "--endpoint", endpoint, "serve", "--listen", "127.0.0.1:0",
                                      *args], stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stderr.readline()
        match = re.search(r"listening on https?://(127\.0\.0\.1:\d+)/", line)
        assert match, "kpool serve did not start: %s%s" % (line, self.proc.stderr.read())
        self.url = "http://" + match.group(1)
        self.first_line = line
        token_file = re.search(r"token in (\S+)\)", line)
        self.token_file = token_file.group(1) if token_file else None
        self.token = open(self.token_file).read().strip() if self.token_file else None
        self.log = []
        self._reader = threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def post(self, path, body, headers=None, **kw):
        return requests.post(self.url + path, data=json.dumps(body) if not isinstance(body, (bytes, str)) else body,
                             headers=dict(JSON, **(headers or {})), timeout=60, **kw)

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=60, **kw)

    def stop(self):
        """SIGTERM; returns the exit status once kpool serve is gone and its stderr read."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=5)
        return code

    def log_text(self):
        return "".join(self.log)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    """One kpoold for the module (each test starts its own kpool serve)."""
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "serve-daemon")


def serve_processes(daemon):
    """For a `serve` fixture (`yield from`): start(*args) starts a kpool serve in front of
    `daemon`; each must stop with status 0, and then no kernel may be left leased."""
    servers = []

    def start(*args, **kw):
        s = Serve(daemon.endpoint, *args, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        assert s.stop() == 0, s.log_text()
    # Every kernel a request took went back (released kernels are shut down).
    wait_until(lambda: all(p["leased"] == 0 for p in daemon.status()["pools"]), timeout=20,
               what="no kernel leased")


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)


def exec_(s, code, **fields):
    return s.post("/v1/exec", dict(fields, code=code))


PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def python_nb(cells):
    return new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "language": "python", "display_name": "Python 3"}})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Notebooks for /v1/run/{path}, among them what it must refuse (not a notebook, a
    symlink out of the root)."""
    d = tmp_path_factory.mktemp("notebooks")
    params = new_code_cell("a = 1\nb = 'x'", metadata={"tags": ["parameters"]})
    nbformat.write(python_nb([new_markdown_cell("# t"), params, new_code_cell("print(a * 2, b)")]), d / "plain.ipynb")
    nbformat.write(python_nb([params, new_code_cell("from IPython.display import JSON\nJSON({'sum': a + 1, 'b': b})",
                                                    metadata={"tags": ["response"]})]), d / "json.ipynb")
    nbformat.write(python_nb([new_code_cell("from IPython.display import Image\nImage(data=%r)" % PNG,
                                            metadata={"tags": ["response"]})]), d / "png.ipynb")
    nbformat.write(python_nb([new_code_cell("import os\nprint(os.getcwd())", metadata={"tags": ["response"]})]),
                   d / "cwd.ipynb")
    nbformat.write(python_nb([new_code_cell("x = 1"), new_code_cell("raise ValueError('bad')"),
                              new_code_cell("print('never')")]), d / "fail.ipynb")
    nbformat.write(python_nb([new_code_cell("raise ValueError('bad')"),
                              new_code_cell("print('never')", metadata={"tags": ["response"]})]),
                   d / "fail_api.ipynb")
    nbformat.write(python_nb([new_code_cell("print('made')"), new_code_cell("import time; time.sleep(30)")]),
                   d / "slow.ipynb")
    (d / "broken.ipynb").write_text("{not a notebook")
    os.symlink("/etc/passwd", d / "escape.ipynb")
    return d
