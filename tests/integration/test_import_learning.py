"""Pools that learn what their kernels import (issue #35), with real forked ipykernels.

A virtual environment (on Debian's packages) holds small installed modules of our own, so that
what is learned, refused and shadowed is exact and quick: `kpool_learn_a` (plain), `kpool_thread`
(starts a thread at import), `kpool_fd` (keeps a file open), `kpool_env` (reads a variable that
acquires set), `kpool_shadow` (also a local module in a notebook folder). Then the real thing:
numpy, pandas and matplotlib (Debian's), learned, pre-imported and warmed; a learned kernel is
still a fresh kernel for its user; a restart keeps what was learned."""
import json
import os
import subprocess
import textwrap
import time

import pytest

from conftest import run_cells, run_code, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
KPOOL = os.environ.get("KPOOL_CLI") or os.path.join(HERE, "..", "..", "build", "kpool")

VENV_MODULES = {
    "kpool_learn_a": "WHO = 'installed'\n",
    "kpool_learn_b": "WHO = 'installed'\n",
    "kpool_thread": "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n",
    "kpool_fd": "import os\nKEPT = open(os.__file__)\n",
    "kpool_env": "import os\nMODE = os.environ.get('KPOOL_TEST_MODE', 'default')\n",
    "kpool_shadow": "WHO = 'installed'\n",
    "kpool_upgraded": "WHO = 'installed'\n",
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A python whose site-packages (an installed package's place) holds VENV_MODULES."""
    root = tmp_path_factory.mktemp("learn-venv")
    os.chmod(root, 0o755)  # a sandboxed kernel of a root kpoold reads it as nobody
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(root)], check=True)
    site = subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    for name, source in VENV_MODULES.items():
        with open(os.path.join(site, name + ".py"), "w") as f:
            f.write(source)
    return str(root / "bin" / "python")


def pool_toml(python, extra=""):
    # bare-python's argv[0] is "python": the pool's `python` runs it (conftest.EXTRA_SPECS).
    return textwrap.dedent("""
        [pools.py]
        kernelspec = "bare-python"
        launcher = "fork"
        python = "%s"
        size = 1
        %s
        """) % (python, extra)


def preload(d):
    return d.pool("py")["preload"]


def preloaded(d):
    return d.pool("py")["zygote"]["preload"]["preloaded"]


def ours(names):
    """Our modules among `names` (every kernel also imports a few of ipykernel's at start, such as
    faulthandler, which are learned too)."""
    return sorted(n for n in names if n.startswith("kpool_"))


def use(d, code, times=3, **acquire):
    """`times` kernels, one after another, each running `code` and released (its report)."""
    for _ in range(times):
        k = d.acquire("py", **acquire)
        run_code(k["connection_file"], code)
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]


def ready(d):
    """The zygote ready and the warm kernel forked by it (one spawned while the zygote started
    reports nothing: it is replaced)."""
    wait_until(lambda: d.pool("py").get("zygote_ready"), timeout=60, what="the zygote")
    d.wait_warm("py", 1, timeout=60)
    if d.pool("py")["zygote"]["kernels_spawned_meanwhile"] > 0:
        k = d.acquire("py")
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
        d.wait_warm("py", 1, timeout=60)


def with_learned_modules(d, cell):
    """A warm kernel's first cell finds kpool_learn_a and kpool_learn_b imported; `cell`'s
    output, run after it (the kernel is released)."""
    d.wait_warm("py", 1, timeout=60)
    k = d.acquire("py")
    first, second = run_cells(k["connection_file"], [
        "import sys; print('kpool_learn_a' in sys.modules, 'kpool_learn_b' in sys.modules)", cell])
    assert first == "True True\n"
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    return second


def test_a_pool_learns_its_kernels_imports_and_later_kernels_have_them(kpoold, venv):
    d = kpoold(pool_toml(venv))
    ready(d)
    assert preload(d)["mode"] == "learn" and preload(d)["learned"] == []
    use(d, "import kpool_learn_a\nfrom kpool_learn_b import WHO")
    # Three reports, both used by all: learned, and a rebuilt zygote (built in the background)
    # has taken over with them pre-imported.
    wait_until(lambda: ours(preloaded(d)) == ["kpool_learn_a", "kpool_learn_b"], timeout=120,
               what="a zygote with the learned modules")
    assert ours(preload(d)["learned"]) == ["kpool_learn_a", "kpool_learn_b"]
    assert preload(d)["rebuilds"] >= 1 and not preload(d)["rebuilding"]
    # Settled: nothing more to learn, no upgrade seen (the files' check runs every 5 s).
    rebuilds = preload(d)["rebuilds"]
    time.sleep(6)
    assert preload(d)["rebuilds"] == rebuilds
    # Pre-imported before the user's first cell, and the kernel is still a fresh one.
    assert with_learned_modules(
        d, "print(get_ipython().execution_count, len(In), sorted(k for k in Out), 'kpool_learn_a' in dir())") == \
        "2 3 [] False\n"
    text = subprocess.run([KPOOL, "--endpoint", d.endpoint, "status", "--wide"],
                          capture_output=True, text=True, timeout=30).stdout
    assert "preload py: learned " in text and "kpool_learn_a, kpool_learn_b" in text, text


def test_a_sandboxed_pool_learns_too_and_its_kernels_prefault_the_hot_pages(kpoold, venv):
    """Issue #48: a sandboxed kernel (forked, then put in its sandbox) still reports what it
    imported and the pages it wrote, and later kernels (sandboxed too) have the learned modules
    pre-imported, from the venv the sandbox lets them read."""
    d = kpoold(pool_toml(venv, 'isolation = "sandbox"'))
    ready(d)
    assert d.pool("py")["isolation"] == "sandbox"
    use(d, "import kpool_learn_a\nfrom kpool_learn_b import WHO")
    wait_until(lambda: ours(preloaded(d)) == ["kpool_learn_a", "kpool_learn_b"], timeout=120,
               what="a zygote with the learned modules")
    for _ in range(2):  # in its sandbox: its own few processes
        assert with_learned_modules(d, "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)") == \
            "True\n"
    # The rebuilt zygote's hot pages: from its first kernel's start, and the lives of the
    # sandboxed kernels it forked, reported as they ended.
    zygote = wait_until(lambda: (lambda z: z if z["hot_pages_kernels"] else None)(d.pool("py")["zygote"]),
                        timeout=60, what="a sandboxed kernel's life reported")
    assert zygote["hot_pages"] > 1000, zygote


def test_modules_that_leave_a_thread_a_file_or_read_request_env_are_refused_with_why(kpoold, venv, tmp_path):
    d = kpoold(pool_toml(venv))
    ready(d)
    local = tmp_path / "nb"
    local.mkdir()
    (local / "kpool_localmod.py").write_text("WHO = 'local'\n")
    use(d, "import kpool_thread, kpool_fd, kpool_env, kpool_localmod", cwd=str(local), env={"KPOOL_TEST_MODE": "x"})
    wait_until(lambda: {"kpool_thread", "kpool_fd", "kpool_env"} <= set(preload(d)["refused"]), timeout=120,
               what="the refusals")
    refused = preload(d)["refused"]
    assert refused["kpool_thread"] == "starts a thread at import"
    assert refused["kpool_fd"] == "leaves file descriptor(s) open (%s) at import" % os.__file__
    assert refused["kpool_env"] == "reads $KPOOL_TEST_MODE at import, which requests set"
    # A module of the notebook's folder is never a candidate: where it was found is shown.
    assert "kpool_localmod" not in refused and "kpool_localmod" not in preload(d)["candidates"]
    assert preload(d)["not_installed"]["kpool_localmod"] == \
        "not an installed module (found in %s)" % os.path.realpath(local)
    assert ours(preloaded(d)) == []
    assert d.pool("py")["zygote"]["prebuilt"] is True  # the fast path survived the refusals


def test_a_notebook_folders_own_module_wins_over_a_learned_one(kpoold, venv, tmp_path):
    d = kpoold(pool_toml(venv))
    ready(d)
    use(d, "import kpool_shadow")
    wait_until(lambda: ours(preloaded(d)) == ["kpool_shadow"], timeout=120, what="kpool_shadow pre-imported")
    d.wait_warm("py", 1, timeout=60)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "kpool_shadow.py").write_text("WHO = 'local'\n")
    k = d.acquire("py", cwd=str(folder))
    assert run_code(k["connection_file"], "import kpool_shadow; print(kpool_shadow.WHO)") == "local\n"
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    d.wait_warm("py", 1, timeout=60)
    k = d.acquire("py")
    assert run_code(k["connection_file"], "import kpool_shadow; print(kpool_shadow.WHO)") == "installed\n"
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]


def test_a_learned_module_upgraded_on_disk_gets_the_zygote_rebuilt(kpoold, venv, tmp_path):
    d = kpoold(pool_toml(venv))
    ready(d)
    use(d, "import kpool_upgraded")
    wait_until(lambda: ours(preloaded(d)) == ["kpool_upgraded"], timeout=120, what="kpool_upgraded pre-imported")
    d.wait_warm("py", 1, timeout=60)
    rebuilds = preload(d)["rebuilds"]
    k = d.acquire("py")
    site = os.path.dirname(run_code(k["connection_file"], "import kpool_upgraded; print(kpool_upgraded.__file__, end='')"))
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    path = os.path.join(site, "kpool_upgraded.py")
    with open(path, "w") as f:
        f.write("WHO = 'upgraded'\n")
    os.utime(path, (time.time() + 5, time.time() + 5))  # a new mtime even within the same second
    wait_until(lambda: preload(d)["rebuilds"] > rebuilds and not preload(d)["rebuilding"], timeout=120,
               what="a rebuild after the upgrade")
    assert preload(d)["last_rebuild_why"] == "kpool_upgraded changed on disk"
    d.wait_warm("py", 1, timeout=60)
    k = d.acquire("py")
    assert run_code(k["connection_file"], "import kpool_upgraded; print(kpool_upgraded.WHO)") == "upgraded\n"
    assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]


def test_a_restart_keeps_what_was_learned_and_off_and_lists_do_not_learn(kpoold, venv, tmp_path):
    state = str(tmp_path / "state")
    d = kpoold(pool_toml(venv), env={"STATE_DIRECTORY": state})
    ready(d)
    use(d, "import kpool_learn_a, kpool_thread")
    wait_until(lambda: ours(preloaded(d)) == ["kpool_learn_a"] and "kpool_thread" in preload(d)["refused"],
               timeout=120, what="kpool_learn_a learned")
    saved = json.load(open(os.path.join(state, "learned-imports.json")))
    assert ours(saved["pools"]["py"]["learned"]) == ["kpool_learn_a"]
    assert saved["pools"]["py"]["refused"] == {"kpool_thread": "starts a thread at import"}
    assert oct(os.stat(os.path.join(state, "learned-imports.json")).st_mode & 0o777) == "0o600"
    assert d.stop() == 0
    # The next kpoold's first zygote has it, before any kernel reported anything.
    again = kpoold(pool_toml(venv), env={"STATE_DIRECTORY": state})
    wait_until(lambda: again.pool("py").get("zygote_ready"), timeout=60, what="the zygote")
    assert ours(preloaded(again)) == ["kpool_learn_a"]
    assert preload(again)["refused"] == {"kpool_thread": "starts a thread at import"}
    assert preload(again)["kernels_reported"] == 0
    # The kernel spawned while that zygote started lacks it: a fork of the zygote replaced it.
    again.wait_warm("py", 1, timeout=60)
    k = again.acquire("py")
    assert run_code(k["connection_file"], "import sys; print('kpool_learn_a' in sys.modules)") == "True\n"
    assert again.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    assert again.stop() == 0
    # preload = a list: exactly that, nothing learned; "off": nothing at all.
    listed = kpoold(pool_toml(venv, 'preload = ["kpool_learn_b"]'), env={"STATE_DIRECTORY": state})
    ready(listed)
    assert preloaded(listed) == ["kpool_learn_b"] and preload(listed)["mode"] == "list"
    use(listed, "import kpool_learn_a")
    assert preloaded(listed) == ["kpool_learn_b"] and "learned" not in preload(listed)
    assert listed.stop() == 0
    off = kpoold(pool_toml(venv, 'preload = "off"'), env={"STATE_DIRECTORY": state})
    ready(off)
    assert preloaded(off) == [] and preload(off)["mode"] == "off"


def test_real_libraries_learned_preimported_and_warmed(kpoold):
    # numpy, pandas and matplotlib are Debian's (scripts/dev installs them).
    d = kpoold(pool_toml("/usr/bin/python3"))
    ready(d)
    report = ("import numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n%matplotlib inline\n"
              "df = pd.DataFrame({'x': np.arange(5)})\nfig, ax = plt.subplots()\nax.plot(df['x'])\n"
              "plt.show()\nprint(df.describe().to_json()[:10])")
    use(d, report)
    wait_until(lambda: {"numpy", "pandas", "matplotlib"} <= set(preloaded(d)), timeout=240,
               what="numpy, pandas and matplotlib pre-imported")
    zygote = d.pool("py")["zygote"]["preload"]
    assert {"matplotlib", "pandas", "numpy"} <= set(zygote["warmed"]), zygote
    assert zygote["warm_ups_refused"] == {}
    assert zygote["growth_mb"] > 10  # they are in the zygote, shared by every kernel
    d.wait_warm("py", 1, timeout=60)
    kernels = [d.acquire("py") for _ in range(2)]
    seen = []
    for k in kernels:
        out = run_cells(k["connection_file"], [
            "import sys; print(sorted(m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules))",
            "import matplotlib.pyplot as plt, numpy as np\nprint(plt.get_fignums(), get_ipython().execution_count)",
            "print(np.random.rand())"])
        assert out[0] == "['matplotlib', 'numpy', 'pandas']\n"
        assert out[1] == "[] 2\n"  # no figure from the warm-up; the user's second cell
        seen.append(out[2])
        assert d.rpc(op="release", kernel_id=k["kernel_id"])["ok"]
    assert seen[0] != seen[1]  # each kernel its own random state
