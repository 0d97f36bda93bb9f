"""The safe pickle reader builds plain data only and refuses everything else."""

from __future__ import annotations

import os
import pickle
import subprocess

import pytest

from faultline.pipeline.safepickle import UnsafePickle, loads

PLAIN = {"version": "2.4", "entries": [{"record_id": 1, "state": "completed",
         "input_sizes": [[1024, 4], []], "timeout_ms": 600000, "retired": True,
         "process_group": ("0", "default_pg"), "duration_ms": None, "f": 1.5,
         "big": 2**70, "neg": -5}], "pg_config": {}}


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_round_trips_every_protocol(protocol: int) -> None:
    assert loads(pickle.dumps(PLAIN, protocol=protocol)) == PLAIN


def test_bytes_from_protocol_3() -> None:
    assert loads(pickle.dumps({"b": b"\x00\x01" * 200}, protocol=3)) == {"b": b"\x00\x01" * 200}


def test_shared_references_are_kept() -> None:
    inner = [1, 2]
    out = loads(pickle.dumps({"a": inner, "b": inner}, protocol=2))
    assert out == {"a": [1, 2], "b": [1, 2]}


class _Evil:
    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps({"entries": [_Evil(f"touch {marker}")]}, protocol=protocol)
    with pytest.raises(UnsafePickle, match="refused global"):
        loads(data)
    assert not marker.exists()
    # the same bytes given to the standard loader would have run the command: the
    # test's premise (done in a child process, so this one stays clean)
    subprocess.run(["python3", "-c", "import pickle,sys; pickle.loads(sys.stdin.buffer.read())"],
                   input=data, check=False)
    assert marker.exists()


def test_builtins_eval_through_stack_global_is_refused(tmp_path) -> None:
    marker = tmp_path / "evil"
    payload = (b"\x80\x04\x8c\x08builtins\x8c\x04exec\x93\x8c" +
               bytes([len(f"open('{marker}','w')")]) + f"open('{marker}','w')".encode() +
               b"\x85R.")
    with pytest.raises(UnsafePickle, match=r"builtins\.exec"):
        loads(payload)
    assert not marker.exists()


@pytest.mark.parametrize("payload,reason", [
    (b"\x80\x02c__main__\nX\n)\x81.", "refused global"),
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00a.", "stack at STOP"),
    (b"\x80\x02]q\x00(K\x01K\x02", "truncated"),
    (b"\x80\x02X\xff\xff\xff\x00ab.", "truncated"),
    (b"\x80\x02)b.", "BUILD"),
    (b"\x80\x02\xff.", "unknown opcode"),
])
def test_damaged_or_object_pickles_are_refused(payload: bytes, reason: str) -> None:
    with pytest.raises(UnsafePickle, match=reason):
        loads(payload)


def test_torchscript_intlist_wrapper_is_rebuilt_not_imported() -> None:
    # what torch's IValue pickler writes for a List[int]: GLOBAL, MARK, list, TUPLE, REDUCE
    data = (b"\x80\x02ctorch.jit._pickle\nbuild_intlist\nq\x00(]q\x01(K\x04M\x00\x04etq\x02Rq\x03.")
    assert loads(data) == [4, 1024]
    bad = data.replace(b"K\x04", b"X\x01\x00\x00\x00a")
    with pytest.raises(UnsafePickle, match="build_intlist"):
        loads(bad)


def test_depth_size_and_item_limits() -> None:
    deep: list = []
    cur = deep
    for _ in range(100):
        cur.append([])
        cur = cur[0]
    with pytest.raises(UnsafePickle, match="nesting"):
        loads(pickle.dumps(deep, protocol=2))
    with pytest.raises(UnsafePickle, match="bytes"):
        loads(pickle.dumps(PLAIN), max_bytes=10)
    with pytest.raises(UnsafePickle, match="items"):
        loads(pickle.dumps(list(range(1000)), protocol=2), max_items=100)


def test_self_containing_list_is_refused() -> None:
    a: list = []
    a.append(a)
    with pytest.raises(UnsafePickle, match="inside itself"):
        loads(pickle.dumps(a, protocol=2))
