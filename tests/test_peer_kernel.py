"""Kernel parser on real kernel logs from public projects (../shared/peer-data).

gpud (leptonai/gpud): ``dmesg -T``, ``dmesg --decode --time-format iso``, raw /dev/kmsg
and pstore captures; azurehpc-health-checks: an Ubuntu syslog with six InfiniBand link
flaps and a negative sample; loghub: 2,000 lines of a real ``/var/log/messages``. Each
file's content is pinned, and every file's line accounting must add up.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pytest
from accounting import check_accounting as shared_accounting

from faultline.pipeline.parsers import kernel
from faultline.pipeline.records import FileParse, ParseContext
from faultline.pipeline.text import count_lines, decode, split_lines

pytestmark = pytest.mark.shared

GPUD = "gpud"
XID119 = f"{GPUD}/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log"
MEMORY = f"{GPUD}/components/memory/testdata/dmesg.decode.iso.log"
NCCL = f"{GPUD}/components/accelerator/nvidia/nccl/testdata/dmesg.decode.iso.log"
OS = f"{GPUD}/components/os/testdata/dmesg.decode.iso.log"
KMSG1 = f"{GPUD}/pkg/kmsg/testdata/kmsg.1.log"
KMSG_PEERMEM = f"{GPUD}/pkg/kmsg/testdata/kmsg.2.peermem.log"
PSTORE_ERST = f"{GPUD}/pkg/pstore/testdata/dmesg-erst.txt"
PSTORE_DUMP = f"{GPUD}/pkg/pstore/testdata/7530486857247/dmesg.txt"
FLAP6 = "azurehpc-health-checks/test/data/1dev_6flap_syslog"
FLAP0 = "azurehpc-health-checks/test/data/0flap_syslog"
LINUX = "loghub/Linux/Linux_2k.log"

KERNEL_FILES = {
    # path: (lines, shape)
    XID119: (43, "dmesg_t"),
    MEMORY: (24, "iso"),
    NCCL: (2, "iso"),
    OS: (2, "iso"),
    KMSG1: (47, "kmsg"),
    KMSG_PEERMEM: (8, "kmsg"),
    PSTORE_ERST: (39, "dmesg"),
    PSTORE_DUMP: (415, "dmesg"),
    FLAP6: (14, "rfc3164"),
    FLAP0: (2, "rfc3164"),
    LINUX: (2000, "rfc3164"),
}


@pytest.fixture(scope="module")
def peer(shared_dir) -> Path:
    d = shared_dir / "peer-data"
    if not d.is_dir():
        pytest.fail(f"{d} is missing")
    return d


def parse(peer: Path, rel: str, **kw) -> FileParse:
    path = peer / rel
    c = ParseContext(path=str(path), host=kw.pop("host", "node0001"), **kw)
    fp = kernel.parse(decode(path.read_bytes()), c)
    check_accounting(fp, path)
    return fp


def check_accounting(fp: FileParse, path: Path) -> None:
    shared_accounting(fp)
    assert fp.lines == count_lines(path.read_bytes())


def kinds(fp: FileParse) -> Counter:
    return Counter(e.kind for e in fp.events)


def utc(text: str) -> int:
    return round(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1e6)


@pytest.mark.parametrize("rel", sorted(KERNEL_FILES))
def test_every_kernel_file_parses_and_adds_up(peer, rel):
    lines, shape = KERNEL_FILES[rel]
    fp = parse(peer, rel, year=2024)
    assert (fp.lines, fp.shape) == (lines, shape)


def test_every_peer_file_is_counted_even_when_it_is_not_a_kernel_log(peer):
    for path in sorted(p for p in peer.rglob("*") if p.is_file()):
        fp = kernel.parse(decode(path.read_bytes()), ParseContext(path=str(path)))
        check_accounting(fp, path)


def test_dmesg_with_xid_119(peer):
    fp = parse(peer, XID119, tz="UTC")
    assert kinds(fp) == {"xid": 5, "gpu_serial": 1}
    assert fp.rejects == []
    serial = fp.events[0]
    assert (serial.kind, serial.line_no, serial.line_end, serial.device) == (
        "gpu_serial", 1, 2, "0000:9b:00.0")
    assert serial.attrs["serial"] == "1650124014249"
    assert serial.attrs["uuid"] == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    xids = [e for e in fp.events if e.kind == "xid"]
    # SOURCES.md speaks of "one Xid 119"; the capture holds five 119 lines (one GSP
    # timeout, then four repeats as other processes hit the dead GSP).
    assert {(e.xid, e.device, e.ts_quality, e.host) for e in xids} == {
        (119, "0000:9b:00.0", "assumed_tz", "node0001")}
    assert [e.line_no for e in xids] == [3, 38, 40, 42, 43]
    assert xids[0].ts == utc("2025-02-23T16:24:18")
    assert [e.attrs["name"] for e in xids] == [
        "nvidia-smi", "nvidia-smi", "nvidia-smi", "cache_mgr_main", "gpud"]
    assert xids[0].attrs["rpc_function"] == "GSP_RM_ALLOC"
    # the RPC history dump and the call trace are routine
    assert fp.routine_lines == 43 - 7


def test_memory_dmesg_decode_iso(peer):
    fp = parse(peer, MEMORY)
    xids = Counter((e.xid, e.device) for e in fp.events if e.kind == "xid")
    assert xids == {(13, "0000:38:00.0"): 16, (43, "0000:38:00.0"): 1}
    ooms = [e for e in fp.events if e.kind == "oom_kill"]
    # six OOM lines a minute apart (test data): the oom-kill: summaries and the
    # "Killed process" lines are separate kills here, none printed together
    assert [e.line_no for e in ooms] == [19, 20, 21, 22, 23, 24]
    assert [e.attrs.get("pid") for e in ooms] == [None, 123, 456, 123, 863987, None]
    assert {e.ts_quality for e in fp.events} == {"exact"}
    assert fp.events[0].ts == utc("2025-01-21T04:41:44.283302")
    assert xids and fp.rejects == []
    assert fp.routine_lines == 1  # oom_reaper


def test_nccl_segfaults(peer):
    fp = parse(peer, NCCL)
    assert [(e.kind, e.attrs["library"], e.attrs["comm"]) for e in fp.events] == [
        ("segfault", "libnccl.so.2", "pt_main_thread")] * 2


def test_os_file_max_is_an_os_limit_event(peer):
    # gpud's os matcher flags it (the host ran out of file handles): two events
    fp = parse(peer, OS)
    assert [(e.kind, e.attrs["limit"]) for e in fp.events] == [("os_limit", 1000000)] * 2
    assert fp.rejects == []


def test_kmsg_files(peer):
    fp = parse(peer, KMSG1)
    assert fp.events == [] and fp.rejects == [] and fp.routine_lines == 47
    fp = parse(peer, KMSG_PEERMEM)
    assert kinds(fp) == {"peermem_error": 7}
    # raw /dev/kmsg carries only time since boot and nothing in these files anchors it
    assert {e.ts_quality for e in fp.events} == {"untimed"}
    assert [e.attrs["uptime_us"] for e in fp.events][:2] == [227996636, 227996637]
    assert fp.rejects == [] and fp.routine_lines == 1  # the "test" record


def test_pstore_crash_dumps(peer):
    fp = parse(peer, PSTORE_ERST)
    assert [(e.line_no, e.kind, e.attrs["type"]) for e in fp.events] == [
        (2, "kernel_panic", "bug"), (5, "kernel_panic", "oops")]
    assert {e.ts_quality for e in fp.events} == {"untimed"}

    fp = parse(peer, PSTORE_DUMP)
    assert [(e.line_no, e.kind) for e in fp.events] == [
        (18, "ib_module"), (286, "ib_link_up"), (341, "nvidia_driver_load"),
        (352, "nvidia_driver_load"), (383, "kernel_panic")]
    # the "dmesg-erst-<id>:" file-name lines are not kernel lines; "Panic#1 Part2" is a
    # pstore part header (routine)
    assert [(r.line_no, r.reason) for r in fp.rejects] == [
        (1, "unrecognized kernel line"), (229, "unrecognized kernel line")]
    # kernel audit records (audit(<epoch>.<ms>:<n>) at a known uptime) anchor the boot
    panic = fp.events[-1]
    assert panic.ts_quality == "boot_relative"
    assert abs(panic.ts - utc("2025-07-24T03:35:01.869")) < 2_000_000
    assert panic.attrs["reason"] == "Test panic triggered by crash_test module"
    assert fp.events[2].attrs["version"] == "550.144.03"


def test_azure_ib_flaps(peer):
    fp = parse(peer, FLAP6, year=2024)
    downs = [e for e in fp.events if e.kind == "ib_link_down"]
    ups = [e for e in fp.events if e.kind == "ib_link_up"]
    assert len(downs) == 6 and len(ups) == 6 and len(fp.events) == 12
    assert {(e.device, e.host, e.attrs["program"]) for e in fp.events} == {
        ("ib6", "jplc7eb7-vm-0", "systemd-networkd")}
    assert downs[0].ts == utc("2024-08-17T06:18:01")
    assert {e.ts_quality for e in fp.events} == {"inferred_year"}
    assert fp.routine_lines == 2
    # without a year from anywhere, the times are not invented
    assert {e.ts_quality for e in parse(peer, FLAP6).events} == {"untimed"}

    fp = parse(peer, FLAP0, year=2024)
    assert fp.events == [] and fp.rejects == []


def test_loghub_linux_messages(peer):
    fp = parse(peer, LINUX, year=2005)
    assert fp.rejects == []  # including "combo  -- root[2421]: ROOT LOGIN ON tty2"
    assert [(e.line_no, e.kind, e.attrs["marker"], e.host) for e in fp.events] == [
        (1911, "boot", "linux_version", "combo"), (1931, "boot", "command_line", "combo")]
    assert fp.events[0].attrs["version"] == "2.6.5-1.358"
    assert fp.events[0].ts == utc("2005-07-27T14:41:57")


def test_real_logs_given_as_texts_parse_as_given_as_lines(peer):
    """A large kernel log reaches the parser as its text, split in polars
    (:class:`LineBatch`), and is read back line by line only where the parser looks:
    every real file in one batch, as texts, as lines and as a mix of both, gives what
    each file gives alone."""
    paths = sorted(KERNEL_FILES)
    texts = [decode((peer / rel).read_bytes()) for rel in paths]
    ctxs = [ParseContext(path=str(peer / rel), host="node0001", year=2024) for rel in paths]
    alone = [kernel.parse(t, c) for t, c in zip(texts, ctxs, strict=True)]
    as_lines = [(split_lines(t), c) for t, c in zip(texts, ctxs, strict=True)]
    as_texts = list(zip(texts, ctxs, strict=True))
    mixed = [as_texts[k] if k % 2 else as_lines[k] for k in range(len(paths))]
    for files in (as_texts, as_lines, mixed):
        assert kernel.parse_many(files) == alone
    assert sum(len(fp.events) for fp in alone) > 50 and sum(map(len, texts)) > 1 << 16
