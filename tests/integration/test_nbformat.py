"""kpool's notebook writer against Python's nbformat, byte for byte: every notebook of a corpus
(nbclient's own test notebooks, which Debian ships, and ones made here to be awkward) read and
written by kpool equals nbformat.writes(nbformat.read(...)) plus the newline nbformat.write adds."""
import glob
import json
import os
import subprocess

import nbformat
import pytest
from nbformat.v4 import (new_code_cell, new_markdown_cell, new_notebook, new_output,
                         new_raw_cell)

ROUNDTRIP = os.environ.get("KPOOL_NB_ROUNDTRIP") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "tests", "nbformat_roundtrip")
SHIPPED = sorted(glob.glob("/usr/lib/python3/dist-packages/nbclient/tests/files/*.ipynb"))


def awkward_notebooks():
    """Name -> notebook JSON text, as nbformat would write them (and some it would not)."""
    out = {}
    nb = new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "floats": [0.1, 1e-7, 1e16, 3.0, -0.0, 123456789.123456789, 2.5e-300],
        "ints": [0, -1, 2 ** 53, 2 ** 63 - 1], "nested": {"z": {"b": [], "a": {}}, "a": None},
        "unicode keys": {"\u00e9": 1, "a": 2, "\u4e2d": 3, "Z": 4, "\U0001f600": 5}})
    nb.cells = [
        new_markdown_cell("# Caf\u00e9 \u4e2d\u6587 \U0001f600\r\nline\rafter\u2028sep\u2029p\x0bv\x0cf\x1c\x1d\x1e\x85end"),
        new_code_cell("print('\\x1b[31mred\\x1b[0m')\n\n\n", outputs=[
            new_output("stream", name="stdout", text="\x1b[31mred\x1b[0m\n\ttab \x00 nul \x7f del\n"),
            new_output("stream", name="stderr", text=""),
            new_output("execute_result", execution_count=1, data={
                "text/plain": "1\n2\n", "text/html": "<b>\"q\"</b>\n<i>/</i>",
                "application/json": {"b": [1, 2.5, "x"], "a": None},
                "application/vnd.custom+json": ["not", "split"],
                "image/png": "iVBORw0KGgo=\n", "image/svg+xml": "<svg>\n</svg>",
                "application/javascript": "alert(1);\nalert(2);"},
                metadata={"image/png": {"width": 10}}),
            new_output("display_data", data={"text/plain": ""}, metadata={}),
            new_output("error", ename="E", evalue="v \u00e9", traceback=["\x1b[0;31mline\x1b[0m", ""]),
        ], execution_count=1),
        new_code_cell("", metadata={"tags": ["parameters"], "jupyter": {"source_hidden": True}}),
        new_raw_cell("raw\n", metadata={"format": "text/x-rst"}),
    ]
    nb.cells[0].attachments = {"a.png": {"image/png": "abc\ndef"}}
    out["awkward-4.5"] = nbformat.writes(nb)
    old = json.loads(out["awkward-4.5"])
    old["nbformat_minor"] = 4
    for cell in old["cells"]:
        cell.pop("id", None)
    out["no-ids-4.4"] = json.dumps(old)  # not nbformat's own layout: a foreign writer's file
    out["unsplit-and-transient"] = json.dumps({
        "nbformat": 4, "nbformat_minor": 2,
        "metadata": {"orig_nbformat": 3, "signature": "sha256:x", "language_info": {"name": "R"}},
        "cells": [{"cell_type": "code", "metadata": {"trusted": True}, "execution_count": None,
                   "source": "x <- 1\ny <- 2", "outputs": []}]}, ensure_ascii=True)
    out["empty"] = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []})
    return out


CORPUS = {os.path.basename(p): open(p, encoding="utf-8").read() for p in SHIPPED}
CORPUS.update(awkward_notebooks())


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_written_byte_for_byte_as_python_nbformat_writes_it(tmp_path, name):
    path = tmp_path / "in.ipynb"
    path.write_text(CORPUS[name], encoding="utf-8")
    expected = nbformat.writes(nbformat.read(str(path), as_version=nbformat.NO_CONVERT))
    if not expected.endswith("\n"):
        expected += "\n"  # what nbformat.write adds
    got = subprocess.run([ROUNDTRIP, str(path)], capture_output=True, check=True).stdout
    assert got.decode("utf-8") == expected


def test_a_file_that_is_not_a_notebook_is_refused_with_its_position(tmp_path):
    path = tmp_path / "bad.ipynb"
    path.write_text('{"cells": [\n  1,\n  ]\n}')
    r = subprocess.run([ROUNDTRIP, str(path)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("%s:3:3: not valid JSON" % path), r.stderr
