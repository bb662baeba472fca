"""The Python client's control requests against the op table kpoold reads them with
(protocol/op_table.hpp, dumped to control_ops.json at build time by tests/dump_control_ops.cpp):
every op the daemon has, the client can send; every field it sends is one its op's row takes,
with a value of its kind; every field a row takes, the client can set. The requests are caught
at the client's transport (its _carry) with canned replies; test_python_client.py sends the same
requests to a real kpoold."""
import json
import os

import pytest

import kpool

OPS_FILE = os.environ.get("KPOOL_CONTROL_OPS") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "tests", "control_ops.json")

# A reply each op's plan can read (only what the client looks at).
REPLIES = {
    "acquire": {"kernel_id": "k1", "pool": "p", "pid": 1, "connection": {}, "connection_file": "/f",
                "pool_warm": 0},
    "poll": {"alive": True},
    "renew": {"lease_remaining_s": 1.0},
    "kernelspecs": {"kernelspecs": {}},
    "status": {"pools": [], "kernels": []},
}

# Every operation of the client with every optional argument set.
CALLS = [
    ("ping", (), {}),
    ("status", (), {}),
    ("kernelspecs", (), {}),
    ("acquire", ("p",), {"timeout_ms": 10, "lease_s": 2.5, "cwd": "/tmp", "env": {"A": "1"},
                         "history": "memory"}),
    ("release", ("k1",), {}),
    ("signal", ("k1", 2), {}),
    ("poll", ("k1",), {}),
    ("renew", ("k1", 3.0), {}),
    ("context", ("k1",), {"cwd": "/tmp", "env": {"A": "1"}, "history": "memory"}),
    ("resize", ("p", 3), {}),
    ("drain", ("p",), {}),
]


class Recording(kpool.Client):
    """A client whose transport records each request and answers it from REPLIES."""

    def __init__(self):
        super().__init__("ipc:///nonexistent/kpool-control")
        self.sent = []

    def _carry(self, req, timeout_ms, endpoint):
        self.sent.append(json.loads(json.dumps(req)))  # as it would go on the wire
        return dict(REPLIES.get(req["op"], {}), ok=True)


def kind_ok(kind, value):
    return {
        "name": lambda v: isinstance(v, str) and v != "",
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
        "path": lambda v: isinstance(v, str) and v.startswith("/"),
        "env": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "history": lambda v: v in ("memory", "file"),
    }[kind](value)


@pytest.fixture(scope="module")
def table():
    with open(OPS_FILE) as f:
        return {op["op"]: {field["name"]: field for field in op["fields"]} for op in json.load(f)}


@pytest.fixture(scope="module")
def sent():
    c = Recording()
    for name, args, kwargs in CALLS:
        getattr(c, name)(*args, **kwargs)
    return c.sent


def test_the_client_sends_every_op_the_daemon_has(table, sent):
    assert set(table) == {r["op"] for r in sent}
    assert set(table) == {name for name, _, _ in CALLS}


def test_every_field_the_client_sends_is_its_ops_with_a_value_of_its_kind(table, sent):
    for req in sent:
        fields = table[req["op"]]
        for name, value in req.items():
            if name in ("op", "req_id"):
                continue
            assert name in fields, (req["op"], name)
            assert kind_ok(fields[name]["kind"], value), (req["op"], name, value)
            spec = fields[name]
            if spec["kind"] == "integer":
                assert spec["min"] <= value <= spec["max"], (req["op"], name, value)
        for name, spec in fields.items():
            if spec["required"]:
                assert name in req, (req["op"], name)


def test_every_field_a_row_takes_the_client_can_set(table, sent):
    for op, fields in table.items():
        seen = set().union(*(r.keys() for r in sent if r["op"] == op)) - {"op"}
        assert seen == set(fields), (op, sorted(set(fields) - seen))
