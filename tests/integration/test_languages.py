"""Any kernel, any language (issue #13): Debian's IRkernel (`ir`) and xeus-python (`xpython`)
pooled over tcp and ipc with the guarantees ipykernel has (warm, cwd/env, startup_code,
interrupt, restart and shutdown through jupyter_client), ports chosen by kpoold and survived when
stolen, message-mode interrupts, and argv[0] resolved by an explicit rule."""
import os
import re
import signal
import subprocess
import time

import pytest
from jupyter_client import BlockingKernelClient, KernelManager

from conftest import KPOOLD, PYTHON, alive, wait_until

# Per kernelspec: code printing "<cwd>|<$KPOOL_LANG>", the startup_code and the code showing
# it ran, and a cell that runs long enough to be interrupted.
LANGUAGES = {
    "ir": {
        "language": "R",
        "cwd_env": 'cat(getwd(), Sys.getenv("KPOOL_LANG"), sep = "|")',
        "startup": "library(stats); kpool_marker <- 42",
        "startup_seen": 'cat(exists("kpool_marker"))',
        "startup_output": "TRUE",
        "long": "Sys.sleep(60)",
        "interruptible": True,
        "interrupted_status": ("error", "abort"),
    },
    # Debian's octave kernelspec runs "python -m octave_kernel": the pool's python runs it.
    "octave": {
        "language": "octave",
        "cwd_env": 'printf("%s|%s", pwd(), getenv("KPOOL_LANG"))',
        "startup": "kpool_marker = 42;",
        "startup_seen": 'printf("%d", exist("kpool_marker"))',
        "startup_output": "1",
        "long": "pause(60)",
        "interruptible": True,
        # metakernel stops the pause and reports the cell as finished.
        "interrupted_status": ("ok",),
    },
    "xpython": {
        "language": "python",
        # Bytes, decoded here: xeus-python's embedded interpreter has an ASCII filesystem
        # encoding in the C locale, so str views of non-ASCII values hold surrogates.
        "cwd_env": 'import os; print((os.getcwdb() + b"|" + os.environb[b"KPOOL_LANG"]).decode(), end="")',
        "startup": "import json; kpool_marker = 42",
        "startup_seen": 'print("kpool_marker" in globals(), end="")',
        "startup_output": "True",
        "long": "import time; time.sleep(60)",
        # xeus-python 0.14 (Debian 12) dies of SIGINT under a plain jupyter_client
        # KernelManager too: there is no interrupt to keep working.
        "interruptible": False,
    },
}


def terminal_noise_removed(text):
    """Octave's readline writes terminal modes (bracketed paste) and blank lines into its output;
    plain jupyter_client shows them too. The text after them is what is compared."""
    return re.sub(r"\x1b\[\?[0-9]+[hl]", "", text).lstrip("\r\n")


def run(connection_file, code, timeout=30):
    """stdout of `code` in the kernel, and the execute_reply's content."""
    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=timeout)
        out = []
        reply = kc.execute_interactive(
            code, timeout=timeout,
            output_hook=lambda m: out.append(m["content"]["text"]) if m["msg_type"] == "stream" else None)
        return terminal_noise_removed("".join(out)), reply["content"]
    finally:
        kc.stop_channels()


# Each language over tcp and ipc, and in a sandbox (issue #48: the spawn path wraps the
# kernelspec's argv; its cwd is bound into the sandbox at acquire).
@pytest.mark.parametrize("spec,transport,isolation",
                         [(spec, transport, "none") for spec in sorted(LANGUAGES) for transport in ("tcp", "ipc")] +
                         [(spec, "tcp", "sandbox") for spec in sorted(LANGUAGES)])
def test_a_pool_of_any_language_fills_and_applies_cwd_env_and_startup_code(kpoold, tmp_path, spec,
                                                                          transport, isolation):
    lang = LANGUAGES[spec]
    d = kpoold("""
        [pools.k]
        kernelspec = "%s"
        transport = "%s"
        size = 1
        startup_code = '%s'
        isolation = "%s"
    """ % (spec, transport, lang["startup"], isolation) +
               ('[pools.k.sandbox]\nroots = ["%s"]\n' % tmp_path if isolation == "sandbox" else ""))
    d.wait_warm("k", 1, timeout=90)
    pool = d.pool("k")
    assert pool["isolation"] == isolation
    assert pool["language"] == lang["language"] and pool["kernelspec_error"] is None
    assert pool["counters"]["spawn_failures"] == 0, (pool["last_error"], d.log_tail())
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    r = d.acquire("k", cwd=str(workdir), env={"KPOOL_LANG": "r\u00e9sum\u00e9 \"q\""})
    conn = r["connection"]
    assert conn["transport"] == transport
    if transport == "ipc":
        # jupyter_client's convention, and short enough for every kernel.
        assert len("ipc://%s-5" % conn["ip"]) <= 31
        assert all(os.path.exists("%s-%d" % (conn["ip"], n)) for n in range(1, 6))
    else:
        assert len({conn[p + "_port"] for p in ("shell", "iopub", "stdin", "control", "hb")}) == 5
    out, reply = run(r["connection_file"], lang["cwd_env"])
    assert reply["status"] == "ok", reply
    assert out == "%s|r\u00e9sum\u00e9 \"q\"" % workdir
    out, _ = run(r["connection_file"], lang["startup_seen"])
    assert out == lang["startup_output"]
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]


@pytest.fixture(scope="module")
def pooled_daemon(module_kpoold, tmp_path_factory):
    """A daemon with an ir, an xpython and an octave pool and their pooled kernelspecs,
    installed by `python3 -m kpool install-kernelspec` asking kpoold for each pool's language;
    one for the module (each test takes fresh kernels of it: starting R, xpython and octave
    again for each test was about 10 s of its setup)."""
    d = module_kpoold("""
        [pools.ir]
        size = 1
        [pools.xpython]
        size = 1
        [pools.octave]
        size = 1
    """)
    prefix = tmp_path_factory.mktemp("prefix")
    for pool in ("ir", "xpython", "octave"):
        subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", pool,
                        "--prefix", str(prefix), "--endpoint", d.endpoint], check=True,
                       capture_output=True)
    return d, prefix


@pytest.fixture
def pooled_specs(pooled_daemon, tmp_path, monkeypatch):
    d, prefix = pooled_daemon
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    d.wait_warm("ir", 1, timeout=90)
    d.wait_warm("xpython", 1, timeout=90)
    d.wait_warm("octave", 1, timeout=90)
    return d, prefix / "share" / "jupyter" / "kernels"


def test_install_kernelspec_writes_the_pools_real_language(pooled_specs):
    _, kernels = pooled_specs
    import json
    ir = json.loads((kernels / "ir-pooled" / "kernel.json").read_text())
    assert ir["language"] == "R" and ir["display_name"] == "R (kpool)"
    xpy = json.loads((kernels / "xpython-pooled" / "kernel.json").read_text())
    assert xpy["language"] == "python" and xpy["display_name"].endswith("(XPython) (kpool)")


@pytest.mark.parametrize("spec", sorted(LANGUAGES))
def test_kernel_manager_start_execute_interrupt_restart_shutdown(pooled_specs, tmp_path, spec):
    d, _ = pooled_specs
    lang = LANGUAGES[spec]
    km = KernelManager(kernel_name=spec + "-pooled")
    km.start_kernel(cwd=str(tmp_path), env={"KPOOL_LANG": "x"})
    first_pid = km.provisioner.pid
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        out = []
        kc.execute_interactive(lang["cwd_env"], timeout=30,
                               output_hook=lambda m: out.append(m["content"]["text"])
                               if m["msg_type"] == "stream" else None)
        assert terminal_noise_removed("".join(out)) == "%s|x" % tmp_path
    finally:
        kc.stop_channels()
    if lang["interruptible"]:
        interrupt_a_long_cell(km, lang["long"], lang["interrupted_status"])
    km.restart_kernel()
    assert km.provisioner.pid != first_pid
    wait_until(lambda: not alive(first_pid), what="the first kernel to be released")
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        assert kc.execute_interactive(lang["startup_seen"], timeout=30)["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
    second_pid = km.provisioner.pid
    km.shutdown_kernel()
    wait_until(lambda: not alive(second_pid), what="the kernel to shut down")
    wait_until(lambda: d.pool(spec)["leased"] == 0, what="the lease to end")


def interrupt_a_long_cell(km, code, statuses):
    """Through the provisioner and kpoold: the cell ends at once, the kernel lives on."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        msg_id = kc.execute(code)
        time.sleep(1.0)
        start = time.monotonic()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] in statuses, reply["content"]
        assert time.monotonic() - start < 10
        assert km.is_alive()
    finally:
        kc.stop_channels()


def test_message_mode_kernels_are_interrupted_by_an_interrupt_request(kpoold):
    d = kpoold("""
        [pools.msg]
        kernelspec = "python3-message"
        size = 1
    """)
    d.wait_warm("msg", 1, timeout=60)
    r = d.acquire("msg")
    kc = BlockingKernelClient()
    kc.load_connection_file(r["connection_file"])
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        msg_id = kc.execute("import time; time.sleep(60)")
        time.sleep(1.0)
        assert d.rpc(op="signal", kernel_id=r["kernel_id"], signum=signal.SIGINT)["ok"]
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        kc.stop_channels()
    assert "interrupt_request" in d.log_text()
    assert d.rpc(op="release", kernel_id=r["kernel_id"])["ok"]


def test_a_port_taken_between_choice_and_bind_is_survived(kpoold, kernelspec_path):
    flag = os.path.join(kernelspec_path, "kernels", "fake-port-thief", "stolen")
    d = kpoold("""
        [pools.thief]
        kernelspec = "fake-port-thief"
        size = 1
    """)
    try:
        d.wait_warm("thief", 1)
        pool = d.pool("thief")
        assert pool["counters"]["spawn_failures"] == 0 and pool["last_error"] is None
        assert "another process took one of its ports" in d.log_text()
        with open(flag) as f:
            thief = int(f.read())
        assert alive(thief)  # still holding the port: the kernel runs on fresh ones
    finally:
        if os.path.exists(flag):
            with open(flag) as f:
                os.kill(int(f.read()), signal.SIGKILL)


def test_a_kernel_that_says_its_port_was_taken_and_stays_up_is_started_again(kpoold, kernelspec_path):
    """ipykernel 6 whose iopub port was taken prints the bind error and does not exit: kpoold
    stops it at once and starts it again with fresh ports, instead of waiting out its 60 s ready
    timeout."""
    flag = os.path.join(kernelspec_path, "kernels", "python3-iopub-thief", "stolen")
    d = kpoold("""
        [pools.thief]
        kernelspec = "python3-iopub-thief"
        launcher = "spawn"
        size = 1
    """)
    try:
        d.wait_warm("thief", 1, timeout=40)  # its ready timeout: 60 s
        log = d.log_text()
        assert "could not bind one of its ports (its output says so)" in log
        assert "another process took one of its ports" in log
        assert d.pool("thief")["counters"]["spawn_failures"] == 0
    finally:
        if os.path.exists(flag):
            with open(flag) as f:
                os.kill(int(f.read()), signal.SIGKILL)


def test_python_in_argv_means_the_pools_python(kpoold, tmp_path):
    d = kpoold("""
        [pools.bare]
        kernelspec = "bare-python"
        size = 1
    """)
    d.wait_warm("bare", 1, timeout=60)
    assert d.pool("bare")["program"] == "/usr/bin/python3"


def test_a_missing_program_is_named_at_check_config_and_in_status(kpoold, tmp_path, kernelspec_path):
    config = tmp_path / "missing.toml"
    config.write_text('[pools.jl]\nkernelspec = "missing-program"\nsize = 0\n'
                      '[pools.bare]\nkernelspec = "bare-python"\nsize = 0\n'
                      'python = "/nonexistent/python3"\n')
    env = dict(os.environ, JUPYTER_PATH=kernelspec_path)
    r = subprocess.run([KPOOLD, "--check-config", str(config)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 2
    assert ("%s:2:14: pool 'jl': kernelspec 'missing-program': cannot start "
            "kpool-no-such-kernel-program: not found on PATH" % config) in r.stderr
    assert ("%s:5:14: pool 'bare': kernelspec 'bare-python': cannot start /nonexistent/python3: "
            "no such file or directory (argv[0] 'python' means the pool's python = "
            "\"/nonexistent/python3\")" % config) in r.stderr
    d = kpoold('[pools.jl]\nkernelspec = "missing-program"\nsize = 1\n')
    pool = d.pool("jl")
    assert "cannot start kpool-no-such-kernel-program: not found on PATH" in pool["kernelspec_error"]
    assert pool["language"] is None
