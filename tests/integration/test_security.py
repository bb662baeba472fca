"""Who may talk to kpoold and what it keeps secret (issue #5): private connection files with
fresh keys that never reach the log, ipc peers filtered by uid/gid through ZAP, and a tcp
control socket that takes only CURVE clients on its allow-list."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap

import pytest
import zmq

from conftest import free_port, HERE, PYTHON

KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")
FAKE_POOL = """
[pools.fake]
kernelspec = "fake"
size = 2
"""
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")


def test_connection_files_are_private_keys_fresh_and_never_logged(kpoold):
    d = kpoold(FAKE_POOL)
    d.wait_warm("fake", 2)
    kernels = [d.acquire("fake") for _ in range(2)]
    keys = {k["connection"]["key"] for k in kernels}
    assert len(keys) == 2 and all(len(key) == 64 for key in keys)  # 256 bits each
    for k in kernels:
        path = k["connection_file"]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        directory = os.path.dirname(path)
        while directory != os.path.dirname(d.runtime_dir):
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
            directory = os.path.dirname(directory)
        assert k["connection"]["ip"] == "127.0.0.1"
        d.rpc(op="release", kernel_id=k["kernel_id"])
    log = d.log_text()
    assert not any(key in log for key in keys)


PEER_SCRIPT = textwrap.dedent("""
    import json, sys, zmq
    from zmq.utils.monitor import recv_monitor_message
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    s.linger = 0
    monitor = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    s.connect(sys.argv[1])
    s.send_json({"op": "ping"})
    poller = zmq.Poller()
    poller.register(s, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    ready = dict(poller.poll(5000))
    if s in ready:
        print(json.dumps(s.recv_json()))
    elif monitor in ready and recv_monitor_message(monitor)["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        print("refused")
    else:
        print("silence")
""")


def ping_as(endpoint, uid, gid):
    def become():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    out = subprocess.run([PYTHON, "-c", PEER_SCRIPT, endpoint], preexec_fn=become, cwd="/",
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def public_dir():
    """A directory other users can reach (pytest's own are 0700), removed after the daemon."""
    path = tempfile.mkdtemp(prefix="kpool-public-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_root
def test_ipc_peers_are_let_in_by_uid_or_gid_only(public_dir, kpoold):
    endpoint = "ipc://%s/control" % public_dir
    d = kpoold(FAKE_POOL, daemon_toml="allowed_uids = [4242]\nallowed_gids = [5555]",
               control=endpoint)
    # Reachable by everyone, so that ZAP is what decides.
    assert stat.S_IMODE(os.stat(public_dir + "/control").st_mode) == 0o666
    assert json.loads(ping_as(endpoint, 4242, 4242))["ok"] is True  # an allowed uid
    assert json.loads(ping_as(endpoint, 4444, 5555))["ok"] is True  # an allowed primary group
    assert ping_as(endpoint, 4343, 4343) == "refused"
    assert d.rpc(op="ping")["ok"]  # the daemon's own uid, always
    assert "connection refused: uid 4343 (gid 4343) is not in allowed_uids or allowed_gids" \
        in d.log_text()


def test_without_allow_lists_the_ipc_socket_is_private(kpoold):
    d = kpoold(FAKE_POOL)
    assert stat.S_IMODE(os.stat(d.endpoint[len("ipc://"):]).st_mode) & 0o077 == 0  # owner only


def keygen(tmp_path, name):
    path = str(tmp_path / name)
    out = subprocess.run([KPOOL, "keygen", path], capture_output=True, text=True, check=True)
    public = out.stdout.strip()
    assert len(public) == 40 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as f:
        return path, public, f.read().strip()


def test_a_tcp_control_socket_takes_only_allowed_curve_keys(kpoold, tmp_path):
    server_file, server_public, server_secret = keygen(tmp_path, "server.key")
    good_file, good_public, good_secret = keygen(tmp_path, "good.key")
    bad_file, _, _ = keygen(tmp_path, "bad.key")
    endpoint = "tcp://127.0.0.1:%d" % free_port()
    d = kpoold(FAKE_POOL, control=endpoint,
               daemon_toml='curve_secret_key_file = "%s"\ncurve_allowed_keys = ["%s"]'
                           % (server_file, good_public),
               curve=(server_public.encode(), good_public.encode(), good_secret.encode()))
    d.wait_warm("fake", 1)

    def cli(key_file, *args, server_key=server_public):
        cmd = [KPOOL, "--endpoint", endpoint]
        if key_file:
            cmd += ["--server-key", server_key, "--client-key-file", key_file]
        return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30)

    ok = cli(good_file, "acquire", "fake", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["connection"]["ip"] == "127.0.0.1"
    refused = cli(bad_file, "ping")
    assert refused.returncode == 3 and "refused this client" in refused.stderr, refused.stderr
    wrong_server = cli(good_file, "ping", server_key=keygen(tmp_path, "other.key")[1])
    assert wrong_server.returncode == 3
    plain = cli(None, "ping")  # no CURVE at all: the handshake cannot even start
    assert plain.returncode == 3
    assert "CURVE key" in d.log_text() and "is not in curve_allowed_keys" in d.log_text()
    assert server_secret not in d.log_text() and good_secret not in d.log_text()

    import kpool
    assert kpool.Client(endpoint, server_key=server_public, client_key_file=good_file).ping()["ok"]
    with pytest.raises(kpool.Error) as e:
        kpool.Client(endpoint, server_key=server_public, client_key_file=bad_file).ping()
    assert e.value.code == "refused"
    assert d.rpc(op="ping")["ok"]


def test_a_curve_secret_key_others_can_read_is_refused(kpoold, tmp_path):
    server_file, _, _ = keygen(tmp_path, "server.key")
    os.chmod(server_file, 0o644)
    config = tmp_path / "kpool.toml"
    config.write_text('[daemon]\ncontrol = "tcp://127.0.0.1:%d"\nruntime_dir = "%s"\n'
                      'curve_secret_key_file = "%s"\n'
                      'curve_allowed_keys = ["0000000000000000000000000000000000000000"]\n'
                      '[pools.fake]\nsize = 0\n' % (free_port(), tmp_path / "run", server_file))
    from conftest import KPOOLD
    out = subprocess.run([KPOOLD, "--config", str(config)], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 1
    assert "must belong to this user and be readable by it alone (chmod 600)" in out.stderr + out.stdout
