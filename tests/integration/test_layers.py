"""tests/layers/check_includes.py, the include half of the layer check, fails when it should."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "layers" / "check_includes.py"


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_an_include_up_the_layers_fails_with_file_and_line(tmp_path):
    write(tmp_path, "daemon/core/pool.cpp", '#include "daemon/core/pool.hpp"\n#include "daemon/service/daemon.hpp"\n')
    write(tmp_path, "runner/run.cpp", '#include "client/daemon_set.hpp"\n#include "cli/exit_status.hpp"\n')
    done = check(tmp_path)
    assert done.returncode == 1
    assert "daemon/core/pool.cpp:2: daemon/core/ may not include daemon/service/daemon.hpp" in done.stdout
    assert "runner/run.cpp:2: runner/ may not include cli/exit_status.hpp" in done.stdout
    assert "2 wrong includes" in done.stdout


def test_includes_down_the_layers_pass(tmp_path):
    write(tmp_path, "daemon/service/daemon.cpp",
          '#include "daemon/process/kernel_process.hpp"\n#include "kpool/version.hpp"\n#include <uv.h>\n')
    write(tmp_path, "cli/main.cpp", '#include "runner/notebook_runner.hpp"\n#include "client/daemon_set.hpp"\n')
    done = check(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "2 files checked, 0 wrong includes" in done.stdout


def test_the_source_tree_passes():
    done = check(SCRIPT.parents[2])
    assert done.returncode == 0, done.stdout
