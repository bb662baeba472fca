"""kpool serve's front door (issue #36): no web page the user has open can make kpool serve run
code or start a kernel. Each attack of the issue, sent by a real HTTP client as a browser would
send it and then from a real browser (Debian's chromium through playwright-core): refused with
its status (403/415), no code run (the marker file the code would write is absent) and no kernel
leased. Plain local clients, an --allow-origin front end and the default token still work."""
import http.server
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading

import nbformat
import pytest
import requests
import websocket
from nbformat.v4 import new_code_cell, new_notebook

from conftest import module_daemon, wait_until
from serve_fixtures import JSON, KPOOL, Serve, serve_processes

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "..", "js")

POOLS = """
[pools.python3]
size = 2
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, kernelspec_path):
    yield from module_daemon(tmp_path_factory, kernelspec_path, POOLS, "front-door-daemon")


@pytest.fixture
def serve(daemon):
    yield from serve_processes(daemon)


@pytest.fixture
def root(tmp_path):
    """--root with a notebook that writes the file its `marker` parameter names."""
    d = tmp_path / "notebooks"
    d.mkdir()
    nb = new_notebook(cells=[new_code_cell("marker = ''", metadata={"tags": ["parameters"]}),
                             new_code_cell("if marker:\n    open(marker, 'w').write('ran')")],
                      metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "P"}})
    nbformat.write(nb, d / "mark.ipynb")
    return d


def marker_code(path):
    return "open(%r, 'w').write('ran')" % str(path)


def nothing_held(s, daemon):
    """No kernel leased by kpool serve (it holds no spares: --spares 0) and none in its gateway."""
    assert requests.get(s.url + "/api/kernels", timeout=30).json() == []
    assert daemon.pool("python3")["leased"] == 0


def port_of(s):
    return int(s.url.rsplit(":", 1)[1])


def test_the_issues_attacks_are_refused_before_anything_runs(serve, daemon, tmp_path):
    s = serve("--spares", "0")
    port = port_of(s)
    marker = tmp_path / "ran"
    code = json.dumps({"code": marker_code(marker)})
    attacks = [
        # (what, path, headers, status)
        ("text/plain from a foreign page", "/v1/exec",
         {"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403),
        ("a form from a foreign page", "/v1/exec",
         {"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"}, 403),
        ("a sandboxed iframe (Origin: null)", "/v1/exec", {"Origin": "null", "Content-Type": "text/plain"}, 403),
        ("JSON from a foreign page", "/v1/exec",
         {"Origin": "http://127.0.0.2:%d" % port, "Content-Type": "application/json"}, 403),
        ("DNS rebinding", "/v1/exec", {"Host": "evil.example:%d" % port, "Content-Type": "application/json"}, 403),
        ("DNS rebinding, its own origin", "/v1/exec",
         {"Host": "evil.example:%d" % port, "Origin": "http://evil.example:%d" % port,
          "Content-Type": "application/json"}, 403),
        ("text/plain without Origin", "/v1/exec", {"Content-Type": "text/plain"}, 415),
        ("no Content-Type", "/v1/exec", {}, 415),
        ("a kernel start from a foreign page", "/api/kernels",
         {"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403),
        ("a kernel start as text/plain", "/api/kernels", {"Content-Type": "text/plain"}, 415),
        ("a kernel start by rebinding", "/api/kernels",
         {"Host": "evil.example:%d" % port, "Content-Type": "application/json"}, 403),
    ]
    for what, path, headers, status in attacks:
        r = requests.post(s.url + path, data=code if path == "/v1/exec" else "{}", headers=headers, timeout=30)
        assert r.status_code == status, (what, r.status_code, r.text)
        assert r.headers["content-type"] == "application/json" and r.json()["error"] in ("forbidden",
                                                                                          "unsupported_media_type")
        assert "access-control-allow-origin" not in r.headers
    # A preflight from a foreign page is refused too, so the browser sends nothing after it.
    r = requests.options(s.url + "/v1/exec", headers={"Origin": "http://evil.example",
                                                      "Access-Control-Request-Method": "POST"}, timeout=30)
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    assert not marker.exists()
    nothing_held(s, daemon)


def test_a_websocket_from_a_foreign_page_is_refused(serve, daemon):
    s = serve("--spares", "0")
    kid = requests.post(s.url + "/api/kernels", json={}, timeout=60).json()["id"]
    url = s.url.replace("http://", "ws://") + "/api/kernels/%s/channels" % kid
    for origin in ("http://evil.example", "null"):
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            websocket.create_connection(url, timeout=30, origin=origin)
        assert refused.value.status_code == 403
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:  # rebinding
        websocket.create_connection(url, timeout=30, host="evil.example:%d" % port_of(s),
                                    origin="http://evil.example:%d" % port_of(s))
    assert refused.value.status_code == 403
    websocket.create_connection(url, timeout=30).close()  # its own origin (websocket-client sends it)
    assert requests.delete(s.url + "/api/kernels/" + kid, timeout=30).status_code == 204
    wait_until(lambda: daemon.pool("python3")["leased"] == 0, timeout=20, what="the kernel released")


def test_a_run_another_sites_page_asks_for_by_get_is_refused(serve, daemon, root, tmp_path):
    s = serve("--spares", "0", "--root", str(root))
    marker = tmp_path / "ran"
    url = s.url + "/v1/run/mark.ipynb?marker=" + str(marker)
    # An <img>, a link or an iframe: a GET without Origin that chromium marks as another site's.
    for site in ("cross-site", "same-site"):
        r = requests.get(url, headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"}, timeout=30)
        assert r.status_code == 403, r.text
    assert not marker.exists()
    nothing_held(s, daemon)
    # What the user typed into the address bar, or curl, runs it.
    assert requests.get(url, headers={"Sec-Fetch-Site": "none"}, timeout=60).status_code == 200
    assert marker.read_text() == "ran"


def test_local_clients_and_allowed_origins_still_work(serve, tmp_path):
    s = serve("--allow-origin", "https://lab.example, http://127.0.0.2:9999")
    port = port_of(s)
    for host in ("127.0.0.1:%d" % port, "localhost:%d" % port, "localhost", "127.0.0.9:%d" % port):
        r = s.post("/v1/exec", {"code": "1"}, headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
    r = s.post("/v1/exec", {"code": "1"}, headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200
    # HTTP/1.0 without a Host header (no browser sends that): the host is loopback's.
    body = b'{"code": "6 * 7"}'
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(b"POST /v1/exec HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        answer = b"".join(iter(lambda: c.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.0 200 ") or answer.startswith(b"HTTP/1.1 200 "), answer
    for origin in ("https://lab.example", "http://127.0.0.2:9999", "http://127.0.0.1:%d" % port):
        r = s.post("/v1/exec", {"code": "1"}, headers={"Origin": origin})
        assert r.status_code == 200, (origin, r.text)
        # CORS headers only for an origin allowed by name; the server's own page needs none.
        assert r.headers.get("access-control-allow-origin") == (None if "127.0.0.1" in origin else origin)
    pre = requests.options(s.url + "/v1/exec", headers={
        "Origin": "https://lab.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"}, timeout=30)
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-headers"] == "authorization, content-type"
    assert "POST" in pre.headers["access-control-allow-methods"]


def test_allow_host_admits_a_name_of_the_operators(serve):
    s = serve("--allow-host", "devbox.test")
    port = port_of(s)
    assert s.post("/v1/exec", {"code": "1"}, headers={"Host": "devbox.test:%d" % port}).status_code == 200
    assert s.post("/v1/exec", {"code": "1"}, headers={"Host": "other.test:%d" % port}).status_code == 403
    assert s.get("/v1/health", headers={"Host": "other.test"}).status_code == 403  # every route


def test_a_token_by_default_written_for_the_user_alone(daemon, tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    s = Serve(daemon.endpoint, token_default=True, env={"XDG_RUNTIME_DIR": str(runtime)})
    try:
        port = port_of(s)
        assert s.token_file == str(runtime / "kpool" / ("serve-%d.token" % port)), s.first_line
        assert stat.S_IMODE(os.stat(s.token_file).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(runtime / "kpool").st_mode) == 0o700
        assert re.fullmatch(r"[0-9a-f]{64}", s.token)
        assert s.token not in s.first_line
        assert s.post("/v1/exec", {"code": "1"}).status_code == 401
        auth = {"Authorization": "token " + s.token}
        assert s.post("/v1/exec", {"code": "1"}, headers=auth).status_code == 200
        # A token is what a rebinding page cannot have: any Host then. Origins are still checked.
        assert s.post("/v1/exec", {"code": "1"}, headers=dict(auth, Host="kpool.example:1")).status_code == 200
        assert s.post("/v1/exec", {"code": "1"}, headers=dict(auth, Origin="http://evil.example")).status_code == 403
        assert s.get("/v1/health").status_code == 200
        assert not any(s.token in line for line in s.log)
    finally:
        assert s.stop() == 0, s.log_text()
    assert not os.path.exists(s.token_file), "the token file outlived kpool serve"


def test_a_token_file_wins_and_no_token_must_be_asked_for(daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    s = Serve(daemon.endpoint, "--token-file", str(token))
    try:
        assert "token required" in s.first_line and s.token_file is None
    finally:
        assert s.stop() == 0, s.log_text()
    for args, status, message in [
            (["--no-token", "--allow-origin", "*"], 1, "--allow-origin '*' needs a token"),
            (["--no-token", "--token-file", str(token)], 2, "--no-token and a token"),
            (["--no-token", "--listen", "0.0.0.0:0"], 1, "(not loopback) needs a token")]:
        r = subprocess.run([KPOOL, "--endpoint", daemon.endpoint, "serve", "--listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == status and message in r.stderr, (args, r.stderr)
    # A runtime directory someone else may write to: no token file there, and no start.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    (open_dir / "kpool").mkdir()
    os.chmod(open_dir / "kpool", 0o777)
    r = subprocess.run([KPOOL, "--endpoint", daemon.endpoint, "serve", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30, env=dict(os.environ, XDG_RUNTIME_DIR=str(open_dir)))
    assert r.returncode == 1 and "--token-file FILE gives one" in r.stderr, r.stderr
    assert os.listdir(open_dir / "kpool") == []


# The same attacks from a real browser.

class AttackerSite:
    """The attacker's web site: a real HTTP server on 127.0.0.2 (another origin than kpool
    serve's 127.0.0.1) serving one page."""

    def __init__(self, directory):
        handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(directory), **kw)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.2", 0), handler)
        self.origin = "http://127.0.0.2:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


ATTACK_PAGE = """<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="start" method="POST" enctype="text/plain" action="%(kpool)s/api/kernels" target="sink">
  <input name='{"name": "python3", "x": "' value='"}'>
</form>
<img id="img">
<script>
const K = %(kpool_js)s, CODE = %(code_js)s, RUN = %(run_js)s, KID = %(kid_js)s;
const report = {};
window.kpoolReport = report;
const settle = (p, ms) => Promise.race([p, new Promise((r) => setTimeout(() => r("timeout"), ms))]);
async function attempt(name, f) {
  try { report[name] = await f(); } catch (e) { report[name] = "error: " + e; }
}
(async () => {
  const body = JSON.stringify({code: CODE});
  await attempt("no_cors_text_plain", async () => {
    await fetch(K + "/v1/exec", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
    return "sent";
  });
  await attempt("no_cors_form", async () => {
    await fetch(K + "/v1/exec", {method: "POST", mode: "no-cors", body: new URLSearchParams({code: CODE})});
    return "sent";
  });
  await attempt("cors_json", async () => {
    const r = await fetch(K + "/v1/exec", {method: "POST", headers: {"Content-Type": "application/json"}, body});
    return "status " + r.status;
  });
  await attempt("form_submit", () => settle(new Promise((resolve) => {
    document.getElementById("sink").onload = () => resolve("loaded");
    document.getElementById("start").submit();
  }), 5000));
  await attempt("img_get_run", () => settle(new Promise((resolve) => {
    const img = document.getElementById("img");
    img.onload = () => resolve("load"); img.onerror = () => resolve("error");
    img.src = RUN;
  }), 5000));
  await attempt("sandboxed_iframe", () => settle(new Promise((resolve) => {
    window.addEventListener("message", (e) => resolve(e.data));
    const f = document.createElement("iframe");
    f.sandbox = "allow-scripts";
    f.srcdoc = "<script>fetch(" + JSON.stringify(K + "/v1/exec") + ", {method: 'POST', mode: 'no-cors', " +
      "headers: {'Content-Type': 'text/plain'}, body: " + JSON.stringify(body) + "})" +
      ".then(() => parent.postMessage('sent', '*'), (e) => parent.postMessage('error ' + e, '*'));<" + "/script>";
    document.body.appendChild(f);
  }), 5000));
  await attempt("websocket", () => settle(new Promise((resolve) => {
    const ws = new WebSocket(K.replace("http", "ws") + "/api/kernels/" + KID + "/channels");
    ws.onopen = () => { resolve("open"); ws.close(); };
    ws.onerror = () => resolve("error");
  }), 5000));
  window.kpoolDone = true;
})();
</script></body></html>
"""

REBINDING_PAGE = """<!doctype html><html><body><script>
window.kpoolReport = {};
fetch("/v1/exec", {method: "POST", headers: {"Content-Type": "application/json"},
                   body: JSON.stringify({code: %(code_js)s})})
  .then(async (r) => { window.kpoolReport.same_origin_exec = "status " + r.status + " " + await r.text(); },
        (e) => { window.kpoolReport.same_origin_exec = "error " + e; })
  .finally(() => { window.kpoolDone = true; });
</script></body></html>
"""


def visit(url, *args):
    """The page at `url` in chromium: what it reported (tests/js/visit_page.js)."""
    if not os.path.isdir(os.path.join(JS, "node_modules", "playwright-core")) or not shutil.which("chromium"):
        pytest.fail("the browser tests need chromium and tests/js's node modules (scripts/dev installs both)")
    out = subprocess.run(["node", os.path.join(JS, "visit_page.js"), "--url", url, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["report"]


def test_the_same_attacks_from_a_real_browser(serve, daemon, root, tmp_path):
    s = serve("--spares", "0", "--root", str(root))
    kid = requests.post(s.url + "/api/kernels", json={}, timeout=60).json()["id"]  # one the page knows
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    site = AttackerSite(site_dir)
    marker, run_marker = tmp_path / "ran", tmp_path / "run-ran"
    try:
        values = {"kpool": s.url, "kpool_js": json.dumps(s.url), "code_js": json.dumps(marker_code(marker)),
                  "run_js": json.dumps(s.url + "/v1/run/mark.ipynb?marker=" + str(run_marker)),
                  "kid_js": json.dumps(kid)}
        (site_dir / "attack.html").write_text(ATTACK_PAGE % values)
        report = visit(site.origin + "/attack.html")
        assert report["websocket"] == "error" and report["cors_json"].startswith("error"), report
        # Each attempt reached kpool serve and was refused there, not by the browser.
        for answer, count in (("POST /v1/exec 403", 3), ("OPTIONS /v1/exec 403", 1), ("POST /api/kernels 403", 1),
                              ("GET /v1/run/mark.ipynb 403", 1), ("GET /api/kernels/%s/channels 403" % kid, 1)):
            wait_until(lambda: sum("access: %s " % answer in line for line in s.log) == count,
                       what="%d access lines '%s' (%s)" % (count, answer, report))
        assert not marker.exists() and not run_marker.exists()
        assert [k["id"] for k in requests.get(s.url + "/api/kernels", timeout=30).json()] == [kid]
        assert daemon.pool("python3")["leased"] == 1  # the test's own kernel, no other

        # DNS rebinding: the page comes from evil.test at kpool serve's port (the attacker's
        # server), then the name resolves to 127.0.0.1: a same-origin fetch to kpool serve.
        page = tmp_path / "rebind.html"
        page.write_text(REBINDING_PAGE % values)
        evil = "http://evil.test:%d" % port_of(s)
        report = visit(evil + "/", "--map", "evil.test=127.0.0.1", "--fulfill", evil + "/=" + str(page))
        # chromium 142 and later refuse it themselves (Local Network Access), older ones do not ...
        assert report["same_origin_exec"] == "error TypeError: Failed to fetch" or \
            report["same_origin_exec"].startswith("status 403 "), report
        # ... other browsers do not: then kpool serve does.
        report = visit(evil + "/", "--map", "evil.test=127.0.0.1", "--fulfill", evil + "/=" + str(page),
                       "--without-local-network-checks")
        assert report["same_origin_exec"].startswith("status 403 "), report
        assert "not a loopback name" in report["same_origin_exec"]
        assert not marker.exists()

        # The check that the page could do harm if let in: the same page from an allowed origin
        # runs its code (so the markers above would have been written).
        allowed = serve("--spares", "0", "--allow-origin", site.origin)
        values.update(kpool=allowed.url, kpool_js=json.dumps(allowed.url))
        (site_dir / "attack.html").write_text(ATTACK_PAGE % values)
        report = visit(site.origin + "/attack.html")
        assert report["cors_json"] == "status 200", report
        assert marker.read_text() == "ran"
    finally:
        site.close()
        requests.delete(s.url + "/api/kernels/" + kid, timeout=30)
