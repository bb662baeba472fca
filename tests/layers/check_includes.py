#!/usr/bin/env python3
"""Fails when a source file includes a header of a folder its layer may not use.

The table is the architecture (README, "How it works"): a folder may include its own headers,
the generated ones ("kpool/...") and those of the folders listed for it, nothing else. It is the
same order as the libraries in CMakeLists.txt; the link checks catch calls, this catches what a
link cannot see (templates, inline functions, constants)."""
import pathlib
import re
import sys

ALLOWED = {
    "protocol": set(),
    "config": {"protocol"},
    "loop": {"protocol"},
    "daemon/sandbox": {"protocol"},
    "daemon/core": {"loop", "config", "protocol"},
    "daemon/process": {"daemon/core", "loop", "jupyter", "languages", "config", "protocol"},
    "daemon/service": {"daemon/process", "daemon/core", "loop", "jupyter", "languages", "config", "protocol"},
    "jupyter": {"protocol"},
    "notebook": {"protocol"},
    "params": {"protocol"},
    "languages": {"params", "protocol"},
    "client": {"jupyter", "config", "protocol"},
    "runner": {"client", "jupyter", "notebook", "languages", "params", "config", "protocol"},
    "remote": {"runner", "client", "jupyter", "notebook", "languages", "params", "config", "protocol"},
    "cli": {"remote", "serve", "runner", "client", "jupyter", "notebook", "languages", "params", "config", "protocol"},
    "serve": {"runner", "client", "jupyter", "notebook", "params", "config", "protocol",
              "loop"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path: str) -> str | None:
    """The layer a header or source path belongs to: the longest folder in the table."""
    best = None
    for folder in ALLOWED:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    wrong = []
    checked = 0
    for folder, allowed in ALLOWED.items():
        base = root / folder
        if not base.is_dir():
            continue
        for source in sorted(base.rglob("*")):
            if source.suffix not in (".cpp", ".hpp", ".h") or not source.is_file():
                continue
            rel = source.relative_to(root).as_posix()
            if folder_of(rel) != folder:
                continue  # a deeper folder of its own
            checked += 1
            text = source.read_text(encoding="utf-8")
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target.startswith("kpool/") or "/" not in target:
                    continue  # generated headers; same-folder includes
                used = folder_of(target)
                if used is None or used == folder or used in allowed:
                    continue
                line = text.count("\n", 0, m.start()) + 1
                wrong.append(f"{rel}:{line}: {folder}/ may not include {target} "
                             f"({used}/ is not below it; allowed: {', '.join(sorted(allowed)) or 'none'})")
    for w in wrong:
        print(w)
    print(f"{checked} files checked, {len(wrong)} wrong includes")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
