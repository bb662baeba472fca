"""The Jupyter conformance suite (jupyter_kernel_test) on pooled kernelspecs, side by side with the
plain ones: a kernel handed out by kpoold must behave exactly as one jupyter_client started.
ipykernel, IRkernel and xeus-python, each plain and through kpool-provisioner, and ipykernel
forked from a zygote that pre-built its app and shell (launcher = "fork"). The samples are
those the kernels' own test suites use, kept to what passes on the plain kernel here. Debian's
octave_kernel 0.32 is left out: its kernel_info_reply fails the suite's schema (its
implementation_version is a list), so no test passes on the plain kernelspec either."""
import os
import subprocess
import tempfile
import unittest

import jupyter_kernel_test as jkt
import pytest

from conftest import PYTHON, Daemon, wait_until

POOLS = {"python3": "python3", "ir": "ir", "xpython": "xpython", "python3fork": "python3"}


@pytest.fixture(scope="module", autouse=True)
def pooled_kernelspecs(kernelspec_path):
    """One daemon with a pool per kernel, and their pooled kernelspecs on JUPYTER_PATH."""
    work = tempfile.mkdtemp(prefix="kpool-conformance-")
    toml = "".join('[pools.%s]\nkernelspec = "%s"\nsize = 1\n' % item for item in POOLS.items())
    toml = toml.replace('[pools.python3fork]\n', '[pools.python3fork]\nlauncher = "fork"\n')
    d = Daemon(work, toml, env=dict(os.environ, JUPYTER_PATH=kernelspec_path)).start()
    prefix = os.path.join(work, "prefix")
    for pool in POOLS:
        subprocess.run([PYTHON, "-m", "kpool", "install-kernelspec", "--pool", pool, "--prefix",
                        prefix, "--endpoint", d.endpoint], check=True, capture_output=True)
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "JUPYTER_RUNTIME_DIR")}
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(work, "jupyter-runtime")
    for pool in POOLS:
        d.wait_warm(pool, 1, timeout=90)
    # Only pre-built forked kernels in the fork pool (the first ones start while the zygote
    # imports, by plain spawning).
    wait_until(lambda: d.pool("python3fork").get("zygote_ready"), timeout=60, what="the zygote")
    d.rpc(op="drain", pool="python3fork")
    d.rpc(op="resize", pool="python3fork", size=2)
    d.wait_warm("python3fork", 2, timeout=60)
    assert d.pool("python3fork")["zygote"]["kernels_prebuilt"] >= 2
    yield d
    zygote = d.pool("python3fork")["zygote"]
    assert zygote["kernels_not_prebuilt"] == 0 and zygote["kernels_spawned_meanwhile"] <= 1, zygote
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    assert d.stop() == 0, d.log_text()
    d.assert_no_leaks()


class IPyKernel(jkt.KernelTests):
    kernel_name = "python3"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    code_page_something = "zip?"
    code_generate_error = "raise"
    code_execute_result = [{"code": "1+2+3", "result": "6"}]
    code_display_data = [{"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))",
                          "mime": "text/html"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"


class IRkernel(jkt.KernelTests):
    kernel_name = "ir"
    language_name = "R"
    file_extension = ".r"
    code_hello_world = 'print("hello, world")'
    code_stderr = 'message("test")'
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", 'print("hello, world")', "f <- function(x) {x*2}"]
    incomplete_code_samples = ['print("hello', "f <- function(x) {x"]
    code_generate_error = "stop('an error')"
    # No code_execute_result: IRkernel shows values as display_data (plain and pooled alike).
    code_inspect_sample = "print"


class XeusPython(jkt.KernelTests):
    kernel_name = "xpython"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    complete_code_samples = ["1", "print('hello, world')"]
    incomplete_code_samples = ["print('''hello"]
    code_generate_error = "raise ValueError('an error')"
    code_execute_result = [{"code": "6*7", "result": "42"}]


# The same suites on the pooled kernelspecs.
class PooledIPyKernel(IPyKernel):
    kernel_name = "python3-pooled"


class PooledIRkernel(IRkernel):
    kernel_name = "ir-pooled"


class PooledXeusPython(XeusPython):
    kernel_name = "xpython-pooled"


class ForkedPrebuiltIPyKernel(IPyKernel):
    kernel_name = "python3fork-pooled"


del jkt  # its KernelTests base class is not a test of its own here


if __name__ == "__main__":
    unittest.main()
