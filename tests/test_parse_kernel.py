"""Kernel log parser: line shapes, kernel messages, multi-line records, years, boot
anchors and line accounting. Table-driven over real-format lines (log_signatures.md,
CORPUS.md, gpud fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from accounting import check_accounting, us
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.pipeline import pci
from faultline.pipeline.parsers import kernel, kernel_columns, kernel_messages, kernel_shapes
from faultline.pipeline.records import FileParse, ParseContext
from faultline.pipeline.text import count_lines, decode
from faultline.schemas.event_kinds import EVENT_KINDS


def ctx(**kw) -> ParseContext:
    return ParseContext(path=kw.pop("path", "hosts/node0042/kern.log"),
                        host=kw.pop("host", "node0042"), **kw)


def parse_both(text: str, c: ParseContext, monkeypatch) -> FileParse:
    """Parse through the small-file (Python) path and the polars path; they must agree."""
    monkeypatch.setattr(kernel_columns, "_SMALL_FILE", 10**9)
    small = kernel.parse(text, c)
    monkeypatch.setattr(kernel_columns, "_SMALL_FILE", 0)
    big = kernel.parse(text, c)
    assert small == big
    check_accounting(big)
    return big


# --- PCI addresses --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("PCI:0000:3b:00", "0000:3b:00.0"),
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("0000:3b:00.0", "0000:3b:00.0"),
        ("PCI:0000:10:1c", "0000:10:1c.0"),
        ("PCI:0018:01:00", "0018:01:00.0"),
        ("+pci:0000:3b:00.0", "0000:3b:00.0"),
        ("0000:9B:00", "0000:9b:00.0"),
        ("3b:00.1", "0000:3b:00.1"),
        ("10000:e1:00.0", "10000:e1:00.0"),
        ("00010000:E1:00.0", "10000:e1:00.0"),
        ("[N/A]", None),
        ("", None),
        (None, None),
        ("0000:3b:20.0", None),  # device number has five bits
        ("GPU-1f0a2b3c", None),
    ],
)
def test_normalize_pci(raw, want):
    assert pci.normalize_pci(raw) == want


# --- line shapes ------------------------------------------------------------------------------

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, GPU has fallen off the bus."

SHAPE_CASES = [
    # (line, ctx kwargs, shape, host, program, message, ts, quality, uptime_us)
    (f"2024-07-01T12:00:00.123456+00:00 node0042 kernel: {XID79}", {}, "rfc3339", "node0042",
     "kernel", XID79, us("2024-07-01T12:00:00.123456+00:00"), "exact", None),
    (f"2024-07-01T14:00:00+0200 node7 kernel: {XID79}", {}, "rfc3339", "node7", "kernel",
     XID79, us("2024-07-01T12:00:00+00:00"), "exact", None),
    (f"2024-07-01T12:00:00Z node7 kernel: [  12.500000] {XID79}", {}, "rfc3339", "node7",
     "kernel", XID79, us("2024-07-01T12:00:00+00:00"), "exact", 12_500_000),
    ("2024-07-01T12:00:00.5 node7 kernel: hello", {"tz": "Europe/Paris"}, "rfc3339", "node7",
     "kernel", "hello", us("2024-07-01T12:00:00.5", "Europe/Paris"), "assumed_tz", None),
    ("2024-08-17T06:18:01.000000+00:00 vm0 systemd-networkd[5398]: ib6: lost carrier", {},
     "rfc3339", "vm0", "systemd-networkd", "ib6: lost carrier",
     us("2024-08-17T06:18:01+00:00"), "exact", None),
    (f"Jul  1 12:00:00 node0042 kernel: [1234567.123456] {XID79}", {"year": 2024}, "rfc3164",
     "node0042", "kernel", XID79, us("2024-07-01T12:00:00"), "inferred_year", 1234567123456),
    (f"Jul 01 12:00:00 node0042 kernel: {XID79}", {"year": 2024, "tz": "America/New_York"},
     "rfc3164", "node0042", "kernel", XID79, us("2024-07-01T12:00:00", "America/New_York"),
     "inferred_year", None),
    ("Jul 01 12:00:00.250000 node0042 kernel: x", {"year": 2024}, "rfc3164", "node0042",
     "kernel", "x", us("2024-07-01T12:00:00.25"), "inferred_year", None),
    (f"Jul  1 12:00:00 node0042 kernel: {XID79}", {}, "rfc3164", "node0042", "kernel", XID79,
     None, "untimed", None),
    ("Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0",
     {"year": 2005}, "rfc3164", "combo", "sshd(pam_unix)",
     "authentication failure; logname= uid=0", us("2005-06-14T15:16:01"), "inferred_year",
     None),
    (f"[Mon Jul  1 12:00:00 2024] {XID79}", {"tz": "America/New_York"}, "dmesg_t", None, None,
     XID79, us("2024-07-01T12:00:00", "America/New_York"), "assumed_tz", None),
    ("[Sun Feb 23 16:24:18 2025]  show_stack+0x52/0x5c", {}, "dmesg_t", None, None,
     " show_stack+0x52/0x5c", us("2025-02-23T16:24:18"), "assumed_tz", None),
    (f"2024-07-01T12:00:00,123456+00:00 {XID79}", {}, "iso", None, None, XID79,
     us("2024-07-01T12:00:00.123456+00:00"), "exact", None),
    (f"kern  :warn  : 2025-01-21T04:41:44,283302+00:00 {XID79}", {}, "iso", None, None, XID79,
     us("2025-01-21T04:41:44.283302+00:00"), "exact", None),
    (f"4,1234,123456789,-;{XID79}", {}, "kmsg", None, None, XID79, None, "untimed",
     123456789),
    (f"[  123.456789] {XID79}", {}, "dmesg", None, None, XID79, None, "untimed", 123456789),
    (f"<4>[  201.670809] {XID79}", {}, "dmesg", None, None, XID79, None, "untimed",
     201670809),
    (f"[  130.456250] [ T1946] {XID79}", {}, "dmesg", None, None, XID79, None, "untimed",
     130456250),
    (f"kern  :info  : [    2.608284] {XID79}", {}, "dmesg", None, None, XID79, None, "untimed",
     2608284),
    (" SUBSYSTEM=pci", {}, "kmsg_cont", None, None, "", None, "untimed", None),
    ("Panic#1 Part2", {}, "pstore_header", None, None, "", None, "untimed", None),
    ("   ", {}, "blank", None, None, "", None, "untimed", None),
]


@pytest.mark.parametrize(
    ("line", "kw", "shape", "host", "program", "message", "ts", "quality", "uptime"),
    SHAPE_CASES,
)
def test_parse_line_shapes(line, kw, shape, host, program, message, ts, quality, uptime):
    kl = kernel.parse_line(line, ctx(**kw))
    assert kl is not None
    assert (kl.shape, kl.host, kl.program, kl.message) == (shape, host, program, message)
    assert (kl.ts, kl.ts_quality, kl.uptime_us) == (ts, quality, uptime)
    assert kl.error is None


def test_parse_line_boot_anchor():
    kl = kernel.parse_line("[  123.456789] x", ctx(), boot_us=1_720_000_000_000_000)
    assert (kl.ts, kl.ts_quality) == (1_720_000_123_456_789, "boot_relative")
    # an anchor from a clock reset to 1970 gives no time (timeutil.in_range)
    kl = kernel.parse_line("[  123.456789] x", ctx(), boot_us=1_000_000_000_000)
    assert (kl.ts, kl.ts_quality, kl.error) == (None, "untimed", None)


@pytest.mark.parametrize(
    "line",
    [
        "node0042 kernel: NVRM: something",
        "Jul  1 12:00:00",  # no host
        "July  1 12:00:00 node0042 kernel: x",
        "12:00:00 node0042 kernel: x",
        "2024-07-01 12:00:00 node0042 kernel: x",  # no T: not rsyslog RFC 3339
        "[Xyz Jul  1 12:00:00 2024] x",
        "\x00\x00\x00\x00",
        "\ufffd\ufffd garbage",
    ],
)
def test_lines_of_no_shape(line):
    assert kernel.parse_line(line, ctx()) is None
    assert not re.search(kernel.SHAPE_PATTERN, line)


@pytest.mark.parametrize(
    "line",
    [
        "Feb 30 12:00:00 node0042 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off",
        "[Mon Feb 30 12:00:00 2024] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off",
        "2024-02-30T12:00:00+00:00 node0042 kernel: NVRM: Xid (PCI:0000:3b:00): 79, x",
    ],
)
def test_bad_timestamps_are_rejected(line, monkeypatch):
    assert kernel.parse_line(line, ctx(year=2024)).error == "bad timestamp"
    fp = parse_both(line + "\n", ctx(year=2024), monkeypatch)
    assert fp.events == []
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(1, "bad timestamp")]


def test_feb_29_in_an_inferred_non_leap_year_is_kept_untimed():
    kl = kernel.parse_line("Feb 29 12:00:00 n kernel: x", ctx(year=2023))
    assert (kl.error, kl.ts, kl.ts_quality) == (None, None, "untimed")


def test_shape_union_agrees_with_the_per_line_parser():
    lines = [case[0] for case in SHAPE_CASES] + [
        "Jul  7 08:06:15 combo  -- root[2421]: ROOT LOGIN ON tty2",
        "<3>[ 1126.627862] ",
        "[    0.000000]",
        "6,3973,227996662,-;test",
        "garbage line",
        "dmesg-erst-7530486857247752194:",
    ]
    vec = pl.Series(lines).str.contains(kernel.SHAPE_PATTERN).to_list()
    py = [kernel.parse_line(x, ctx()) is not None for x in lines]
    assert vec == py


# --- kernel messages ------------------------------------------------------------------------

MESSAGE_CASES = [
    # (message, program, kind, xid, device, attrs subset)
    (XID79, None, "xid", 79, "0000:3b:00.0",
     {"pid": 2231, "name": "python3", "text": "GPU has fallen off the bus."}),
    ("NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
     "the bus.", None, "xid", 79, "0000:91:00.0", {"pid": None, "name": None}),
    ("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.", None, "xid", 79,
     "0000:06:00.0", {"pid": None, "text": "GPU has fallen off the bus."}),
    ("NVRM: Xid (PCI:0004:01:00): 119, pid=430, name=nv_queue, Timeout waiting for RPC from "
     "GSP!", None, "xid", 119, "0004:01:00.0", {"pid": 430, "name": "nv_queue"}),
    ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of "
     "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
     None, "xid", 119, "0000:9b:00.0", {"rpc_function": "GSP_RM_ALLOC"}),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=2231, name=python3, An uncorrectable double bit "
     "error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 0.",
     None, "xid", 48, "0000:3b:00.0", {"unit": "framebuffer"}),
    ("NVRM: Xid (PCI:0000:52:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
     "bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x18f31d80 "
     "partition 16, subpartition 3.", None, "xid", 48, "0000:52:00.0", {"unit": "framebuffer"}),
    ("NVRM: Xid (PCI:0000:52:00): 48, pid=1, name=x, An uncorrectable ECC error has been "
     "detected on GPU in GSP-RISCV", None, "xid", 48, "0000:52:00.0", {"unit": "GSP-RISCV"}),
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
     "reset gpu to activate.", None, "xid", 63, "0000:10:1c.0", {"pid": 1896, "name": None}),
    ("NVRM: Xid (PCI:0000:0f:00): 64, pid=7, Row Remapper Error: (0x00000005d28c03a0) - All "
     "reserved rows for bank are remapped", None, "xid", 64, "0000:0f:00.0",
     {"row": "0x00000005d28c03a0", "reason": "All reserved rows for bank are remapped"}),
    ("NVRM: Xid (PCI:0000:52:00): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). "
     "RST: No, D-RST: No", None, "xid", 94, "0000:52:00.0",
     {"contained": True, "unit": "SM", "rst": False, "d_rst": False}),
    ("NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, "
     "D-RST: No", None, "xid", 95, "0000:01:00.0",
     {"contained": False, "unit": "LTC TAG", "unit_code": "0x2,0x1", "rst": True}),
    ("NVRM: Xid (PCI:0000:2a:00): 140, pid='<unknown>', name=<unknown>, An uncorrectable ECC "
     "error detected (possible firmware handling failure) DRAM:0, LTC:2, MMU:0, PCIE:0", None,
     "xid", 140, "0000:2a:00.0", {"dram": 0, "ltc": 2, "mmu": 0, "pcie": 0}),
    ("NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 "
     "(Drain and Reset)", None, "xid", 154, "0009:01:00.0",
     {"recovery_action": "Drain and Reset", "recovery_code": 4, "previous_action": "None"}),
    ("NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 "
     "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)", None, "xid", 149,
     "0008:01:00.0", {"subcode": "NETIR_LINK_EVT", "fatal": True, "link": 8}),
    ("NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02", None, "xid", 145,
     "0000:5f:00.0", {"subcode": "RLW_REMAP", "fatal": False, "link": 2}),
    ("NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error "
     "detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)", None, "xid", 74,
     "0000:b9:00.0", {"link": 6, "pid": None, "name": None}),
    ("NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 43, pid=2231, name=python3, Ch 00000008", None,
     "xid", 43, "0000:3b:00.0", {"gpu_instance": "05"}),
    ("NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d", None,
     "gpu_serial", None, "0000:9b:00.0", {"uuid": "GPU-509665ad-b600-ac93-3616-d754b23d636d"}),
    ("NVRM: GPU Board Serial Number: 1650124014249", None, "gpu_serial", None, None,
     {"serial": "1650124014249"}),
    # without an Xid, the Xid 79 it means (the kind stays, for the simulator's truth)
    ("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", None, "gpu_fallen_off_bus", 79,
     "0000:3b:00.0", {"xid_inferred": True}),
    # Xid wordings across driver generations: no "PCI:" (R470 and older), no pid/name,
    # a MIG instance, a non-zero PCI domain, a quoted unknown pid
    ("NVRM: Xid (0000:03:00): 14, Channel 00000001", None, "xid", 14, "0000:03:00.0", {}),
    ("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", None, "xid", 79,
     "0000:01:00.0", {"pid": None, "name": None}),
    ("NVRM: Xid (0000:af:00): 48, pid='<unknown>', name=<unknown>, Ch 00000008", None, "xid",
     48, "0000:af:00.0", {"pid": None, "name": None}),
    ("NVRM: Xid (PCI:0009:01:00 GPU-I:05): 13, pid=77, name=python3, Graphics Exception", None,
     "xid", 13, "0009:01:00.0", {"gpu_instance": "05", "pid": 77, "name": "python3"}),
    ("NVRM: Xid (0000:01:00): 16, ", None, "xid", 16, "0000:01:00.0", {"text": ""}),
    ("NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0xffff:1863)", None, "gpu_lost",
     None, "0000:01:00.0", {}),
    ("NVRM: _issueRpcAndWait: rpcRecvPoll timedout for fn 76!", None, "gsp_timeout", None,
     None, {}),
    ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024",
     None, "nvidia_driver_load", None, None, {"version": "550.144.03", "open": False}),
    ("nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up", None,
     "sxid", None, "0000:c2:00.0",
     {"sxid": 20034, "severity": "Fatal", "link": 28, "switch": "nvidia-nvswitch0"}),
    ("nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat "
     "Timeout Error (First)", None, "sxid", None, "0000:c6:00.0",
     {"sxid": 19084, "fatal": False, "link": 29}),
    ("mlx5_core 0000:0c:00.0: mlx5_port_module_event:1136:(pid 0): Port module event[error]: "
     "module 0, Cable error, High Temperature", None, "ib_module", None, "0000:0c:00.0",
     {"severity": "error", "module": 0, "status": "Cable error", "error": "High Temperature"}),
    ("mlx5_core 0000:41:00.1: Port module event: module 1, Cable unplugged", None, "ib_module",
     None, "0000:41:00.1", {"status": "Cable unplugged", "module": 1}),
    ("mlx5_core 0000:d2:00.0: poll_health:825:(pid 0): device's health compromised - reached "
     "miss count", None, "nic_health", None, "0000:d2:00.0", {}),
    ("mlx5_core 0000:d2:00.0: Fatal error 1 detected", None, "nic_health", None,
     "0000:d2:00.0", {}),
    ("mlx5_core 0000:3b:00.0: wait_func:1155:(pid 2231): ENABLE_HCA(0x104) timeout. Will "
     "cause a leak of a command resource", None, "nic_cmd_timeout", None, "0000:3b:00.0",
     {"command": "ENABLE_HCA"}),
    ("mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power "
     "on the PCIe slot (27W).", None, "pcie_power", None, "0000:5c:00.0", {"watts": 27}),
    ("mlx5_core 0000:3b:00.0: temp_warn:165:(pid 0): High temperature on sensors with bit set "
     "0 1", None, "thermal", None, "0000:3b:00.0", {}),
    ("mlx5_core 0000:01:00.0 ibp1s0: Link down", None, "ib_link_down", None, "ibp1s0",
     {"pci": "0000:01:00.0"}),
    ("mlx5_core 0000:41:00.0 enp65s0f0np0: Link up", None, "ib_link_up", None, "enp65s0f0np0",
     {"pci": "0000:41:00.0"}),
    ("ib6: lost carrier", "systemd-networkd", "ib_link_down", None, "ib6", {"ifname": "ib6"}),
    ("ib6: Gained carrier", "systemd-networkd", "ib_link_up", None, "ib6", {}),
    ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0", None,
     "pcie_aer", None, "0000:00:01.0",
     {"severity": "Uncorrected (Fatal)", "source": "0000:01:00.0"}),
    ("pcieport 0000:00:1c.5: AER: Correctable error message received from 0000:00:1c.5", None,
     "pcie_aer", None, "0000:00:1c.5", {"severity": "Corrected"}),
    ("pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction "
     "Layer, (Requester ID)", None, "pcie_aer", None, "0000:00:01.0",
     {"severity": "Uncorrected (Non-Fatal)", "type": "Transaction Layer"}),
    ("pcieport 0000:00:01.0: DPC: containment event, status:0x1f01 source:0x0000", None,
     "pcie_dpc", None, "0000:00:01.0", {"status": "0x1f01"}),
    ("pcieport 0000:c0:01.1: pciehp: Slot(3): Link Down", None, "pcie_link_down", None,
     "0000:c0:01.1", {"slot": "3"}),
    ("EDAC MC3: 1 UE memory read error on CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (channel:0 slot:0 "
     "page:0x7e025e offset:0x400 grain:32 -  err_code:0x00a0:0x0090)", None, "edac_ue", None,
     "MC3", {"count": 1, "location": "CPU_SrcID#0_MC#3_Chan#0_DIMM#0"}),
    ("EDAC MC0: 3 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1)", None,
     "edac_ce", None, "MC0", {"count": 3}),
    ("mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 6: b200000000000185", None,
     "mce", None, "cpu12", {"bank": 6, "status": "b200000000000185"}),
    ("mce: [Hardware Error]: Machine check events logged", None, "mce", None, None, {}),
    ("{1}[Hardware Error]:   section_type: memory error", None, "mce", None, None,
     {"record": 1, "section_type": "memory error"}),
    ("Memory failure: 0x7e025e: Sending SIGBUS to python3:2231 due to hardware memory "
     "corruption", None, "memory_failure", None, None,
     {"pfn": "0x7e025e", "comm": "python3", "pid": 2231}),
    ("nvme nvme0: I/O 566 QID 3 timeout, aborting", None, "nvme_timeout", None, "nvme0",
     {"action": "aborting"}),
    ("nvme nvme4: I/O tag 22 (2016) opcode 0x2 (Admin Cmd) QID 0 timeout, reset controller",
     None, "nvme_timeout", None, "nvme4", {"action": "reset controller", "admin": True}),
    ("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff", None,
     "nvme_error", None, "nvme0", {}),
    ("block nvme0n1: no available path - failing I/O", None, "nvme_error", None, "nvme0n1", {}),
    ("blk_update_request: I/O error, dev nvme0n1, sector 123456 op 0x0:(READ) flags 0x0 "
     "phys_seg 1 prio class 0", None, "io_error", None, "nvme0n1",
     {"sector": 123456, "op": "READ", "error": "I/O"}),
    ("Buffer I/O error on dev dm-0, logical block 1308098575, lost async page write", None,
     "io_error", None, "dm-0", {"block": 1308098575}),
    ("EXT4-fs error (device sda1): ext4_find_entry:1455: inode #2: comm ls: reading directory "
     "lblock 0", None, "fs_error", None, "sda1", {"fs": "ext4"}),
    ("EXT4-fs (md0): Remounting filesystem read-only", None, "fs_error", None, "md0",
     {"read_only": True}),
    ("XFS (dm-0): Log I/O Error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] "
     "(fs/xfs/xfs_log.c:1378).  Shutting down filesystem.", None, "fs_error", None, "dm-0",
     {"fs": "xfs"}),
    ("XFS (sdb1): Corruption of in-memory data detected.  Shutting down filesystem", None,
     "fs_error", None, "sdb1", {"fs": "xfs"}),
    ("nfs: server storage01 not responding, still trying", None, "nfs_timeout", None,
     "storage01", {"state": "still trying"}),
    ("CPU12: Core temperature above threshold, cpu clock throttled (total events = 1)", None,
     "thermal", None, "cpu12", {"scope": "core"}),
    ("INFO: task kcompactd1:1177 blocked for more than 120 seconds.", None, "hung_task", None,
     None, {"comm": "kcompactd1", "pid": 1177, "seconds": 120}),
    ("watchdog: BUG: soft lockup - CPU#18 stuck for 27s! [python3:2254956]", None,
     "soft_lockup", None, "cpu18", {"comm": "python3", "pid": 2254956, "seconds": 27}),
    ("Kernel panic - not syncing: Fatal machine check", None, "kernel_panic", None, None,
     {"type": "panic", "reason": "Fatal machine check"}),
    ("BUG: unable to handle kernel NULL pointer dereference at           (null)", None,
     "kernel_panic", None, None, {"type": "bug"}),
    ("Oops: 0002 [#1] SMP", None, "kernel_panic", None, None, {"type": "oops"}),
    ("Out of memory: Killed process 2231 (python3) total-vm:123456kB, anon-rss:1234kB", None,
     "oom_kill", None, None, {"pid": 2231, "comm": "python3"}),
    ("Memory cgroup out of memory: Killed process 77 (pt_main_thread) total-vm:1kB", None,
     "oom_kill", None, None, {"pid": 77, "comm": "pt_main_thread", "cgroup": True}),
    ("pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 "
     "error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]", None, "segfault", None, None,
     {"comm": "pt_main_thread", "pid": 2536443, "library": "libnccl.so.2"}),
    ("nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
     "further processing", None, "peermem_error", None, None, {}),
    ("Linux version 5.15.0-112-generic (buildd@lcy02-amd64-051) #122-Ubuntu SMP", None, "boot",
     None, None, {"version": "5.15.0-112-generic", "marker": "linux_version"}),
    ("Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-112-generic ro", None, "boot", None, None,
     {"marker": "command_line"}),
    ("reboot: Restarting system", None, "reboot", None, None, {"action": "Restarting system"}),
    ("reboot: Power down", None, "reboot", None, None, {"action": "Power down"}),
    # a recovery is an event too: it ends the outage (gpud nfs matcher)
    ("nfs: server storage01 OK", None, "nfs_recovered", None, "storage01", {"state": "OK"}),
    ("VFS: file-max limit 1000000 reached", None, "os_limit", None, None,
     {"limit": 1000000, "resource": "file-max"}),
    ("md/raid0md0: Disk failure on nvme0n1p1 detected, failing array.", None, "io_error", None,
     "nvme0n1p1", {"array": "md0", "error": "raid_disk_failure"}),
    ("python[2961]: segfault at 0000000000000000 rip 00000000004005c4 rsp 00007fffe10bd7f0 "
     "error 4", None, "segfault", None, None, {"comm": "python", "pid": 2961, "error": "4"}),
    ("python3[31]: segfault at 0", None, "segfault", None, None, {"pid": 31, "error": None}),
]


@pytest.mark.parametrize(("message", "program", "kind", "xid", "device", "attrs"),
                         MESSAGE_CASES)
def test_classify_messages(message, program, kind, xid, device, attrs):
    mm = kernel_messages.classify(message, program)
    assert mm is not None
    assert (mm.kind, mm.xid, mm.device) == (kind, xid, device)
    assert {k: mm.attrs.get(k) for k in attrs} == attrs
    assert re.search(kernel_messages.SELECT_PATTERN, message)


ROUTINE = [
    "systemd[1]: Started Session 12 of user root.",
    "audit: type=1400 audit(1753325017.308:5): apparmor=\"STATUS\" operation=\"profile_load\"",
    "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none.",
    "EXT4-fs (sda1): re-mounted. Opts: errors=remount-ro",
    "XFS (sda1): Ending clean mount",
    "nvidia-nvswitch2: open (major=510)",
    "NVRM: GPU4 RPC history (CPU -> GSP):",
    "NVRM:      0    103  GSP_RM_ALLOC          0x0000000000002081 0x0000000000000004",
    "NVRM: GPU4 GSP RPC buffer contains function 103 (GSP_RM_ALLOC) and data 0x2081 0x4.",
    "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00 (printing 1 of every "
    "30).  The GPU likely needs to be reset.",
    "Call Trace:",
    " show_stack+0x52/0x5c",
    " <TASK>",
    "CPU: 17 PID: 2024380 Comm: nvidia-smi Tainted: P           OE     5.15.0-112-generic",
    "mlx5_core 0000:41:00.1: E-Switch: Total vports 10, per vport: max uc(128) max mc(2048)",
    "EDAC amd64: MC: 0: 16384MB 1: 16384MB",
    "EDAC skx MC3: HANDLING MCE MEMORY ERROR",
    "ata3: SATA link down (SStatus 0 SControl 300)",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "oom_reaper: reaped process 345646 (vector), now anon-rss:0kB, file-rss:0kB, shmem-rss:0",
    "python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0",
    "CPU12: Core temperature/speed normal",
    "nfs: server storage01 starting",
    "md: raid1 personality registered for level 1",
    "NFS: Registering the id_resolver key type",
    "pcieport 0000:00:01.0: AER: enabled with IRQ 122",
]


@pytest.mark.parametrize("message", ROUTINE)
def test_routine_messages_give_no_event(message):
    assert kernel_messages.classify(message) is None


def test_non_kernel_programs_are_read_only_by_rules_that_name_them():
    # A user program printing a kernel-looking text is not a kernel event...
    assert kernel_messages.classify(XID79, "sshd") is None
    assert kernel_messages.classify("ib6: lost carrier", "NetworkManager") is None
    # ...but the kernel's and systemd-networkd's own lines are.
    assert kernel_messages.classify(XID79, "kernel").kind == "xid"
    assert kernel_messages.classify("ib6: lost carrier", "kernel").kind == "ib_link_down"


# --- every rule, walked ----------------------------------------------------------------------

@pytest.mark.parametrize("rule", kernel_messages.RULES, ids=lambda r: r.id)
def test_every_rule_and_its_examples(rule):
    assert rule.kind in EVENT_KINDS
    assert rule.examples and rule.source
    assert all(rule.needles), "every select alternative needs a literal needle"
    for ex in rule.examples:
        example = ex.line
        mm = kernel_messages.classify(example, ex.program)
        assert mm is not None and mm.rule_id == rule.id, example
        assert (mm.device, mm.xid) == (ex.device, ex.xid), example
        assert {k: mm.attrs.get(k) for k, _ in ex.attrs} == dict(ex.attrs), example
        assert re.search(rule.select, example), example  # Python re
        assert pl.Series([example]).str.contains(rule.select)[0], example  # Rust regex
        assert any(n in example for n in rule.needles), example
        assert re.search(kernel_messages.SELECT_PATTERN, example)


def test_rule_ids_are_unique_and_the_select_union_compiles_in_both_engines():
    ids = [r.id for r in kernel_messages.RULES]
    assert len(ids) == len(set(ids))
    re.compile(kernel_messages.SELECT_PATTERN)
    pl.Series(["x"]).str.contains(kernel_messages.SELECT_PATTERN)
    pl.Series(["x"]).str.contains(kernel.SHAPE_PATTERN)


@pytest.mark.parametrize(
    ("alternative", "needle"),
    [
        (r"NVRM: Xid", "NVRM: Xid"),
        (r"[Ll]ost carrier", "ost carrier"),
        (r"EDAC [^:]*MC[0-9]+: (?:[0-9]+ )?UE ", "EDAC "),
        (r"\{[0-9]+\}\[Hardware Error\]", "}[Hardware Error]"),
        (r"Disk failure on .* detected, failing array", " detected, failing array"),
        (r"ab?cdef", "cdef"),
        (r"x+yz", "yz"),
        (r"\d{3}abc", "abc"),
    ],
)
def test_required_literal(alternative, needle):
    assert kernel_messages.required_literal(alternative) == needle


# --- whole files -------------------------------------------------------------------------------

def events_of(fp: FileParse) -> list[tuple]:
    return [(e.line_no, e.line_end, e.kind, e.xid, e.device, e.ts, e.ts_quality)
            for e in fp.events]


def test_rfc3339_file_and_host_from_the_line(monkeypatch):
    text = (
        "2024-07-01T11:59:59.000000+00:00 node0042 systemd[1]: Started Session 1.\n"
        f"2024-07-01T12:00:00.123456+00:00 node0042 kernel: {XID79}\n"
        "2024-07-01T12:00:01.000000+00:00 node0099 kernel: NVRM: Xid (PCI:0000:10:1c): 13, "
        "pid=1, name=a, Graphics Exception\n"
    )
    fp = parse_both(text, ctx(host="from-path"), monkeypatch)
    assert fp.shape == "rfc3339"
    assert events_of(fp) == [
        (2, 2, "xid", 79, "0000:3b:00.0", us("2024-07-01T12:00:00.123456+00:00"), "exact"),
        (3, 3, "xid", 13, "0000:10:1c.0", us("2024-07-01T12:00:01+00:00"), "exact"),
    ]
    assert [e.host for e in fp.events] == ["node0042", "node0099"]
    assert fp.events[0].attrs["rule"] == "nvidia.xid"


@pytest.mark.parametrize(
    ("lines", "year", "want"),
    [
        # plain: ctx.year is the year of the first line
        (["Jul  1 12:00:00"], 2024, ["2024-07-01T12:00:00"]),
        # Dec -> Jan rollover goes forward
        (["Dec 31 23:59:59", "Jan  1 00:00:01"], 2023,
         ["2023-12-31T23:59:59", "2024-01-01T00:00:01"]),
        # a late December line after the rollover does not jump back a year and forward again
        (["Dec 31 23:59:58", "Jan  1 00:00:01", "Dec 31 23:59:59", "Jan  1 00:00:02"], 2023,
         ["2023-12-31T23:59:58", "2024-01-01T00:00:01", "2023-12-31T23:59:59",
          "2024-01-01T00:00:02"]),
        # a month going back a little is out-of-order lines, not a new year
        (["Jul  1 00:00:01", "Jun 30 23:59:59", "Jul  1 00:00:02"], 2024,
         ["2024-07-01T00:00:01", "2024-06-30T23:59:59", "2024-07-01T00:00:02"]),
        # two rollovers, months stepping forward in between
        (["Nov  1 00:00:00", "Feb  1 00:00:00", "Jun  1 00:00:00", "Oct  1 00:00:00",
          "Jan  5 00:00:00"], 2022,
         ["2022-11-01T00:00:00", "2023-02-01T00:00:00", "2023-06-01T00:00:00",
          "2023-10-01T00:00:00", "2024-01-05T00:00:00"]),
    ],
)
def test_rfc3164_years(lines, year, want, monkeypatch):
    text = "".join(f"{t} node0042 kernel: {XID79}\n" for t in lines)
    fp = parse_both(text, ctx(year=year), monkeypatch)
    assert [e.ts for e in fp.events] == [us(w) for w in want]
    assert {e.ts_quality for e in fp.events} == {"inferred_year"}


def test_rfc3164_year_from_a_dated_line_of_the_same_file(monkeypatch):
    text = (
        "[Sat Dec 30 10:00:00 2023] kernel: something\n"
        "Dec 31 23:59:59 node0042 kernel: reboot: Restarting system\n"
        f"Jan  2 00:00:01 node0042 kernel: {XID79}\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.kind, e.ts, e.ts_quality) for e in fp.events] == [
        ("reboot", us("2023-12-31T23:59:59"), "inferred_year"),
        ("xid", us("2024-01-02T00:00:01"), "inferred_year"),
    ]


def test_rfc3164_without_any_year_is_untimed_not_invented(monkeypatch):
    fp = parse_both(f"Jul  1 12:00:00 node0042 kernel: {XID79}\n", ctx(), monkeypatch)
    assert events_of(fp) == [(1, 1, "xid", 79, "0000:3b:00.0", None, "untimed")]


def test_dmesg_t_uses_the_zone_and_the_host_from_the_path(monkeypatch):
    fp = parse_both(f"[Mon Jul  1 12:00:00 2024] {XID79}\n",
                    ctx(tz="Asia/Tokyo", host="node0007"), monkeypatch)
    assert fp.shape == "dmesg_t"
    assert events_of(fp) == [
        (1, 1, "xid", 79, "0000:3b:00.0", us("2024-07-01T03:00:00+00:00"), "assumed_tz")]
    assert fp.events[0].host == "node0007"


def test_kmsg_record_with_continuation_lines_is_one_event(monkeypatch):
    text = (
        "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)\n"
        " SUBSYSTEM=misc\n"
        "3,3965,206764310,-;pcieport 0000:00:01.0: DPC: containment event, status:0x1f01 "
        "source:0x0000\n"
        " SUBSYSTEM=pci\n"
        " DEVICE=+pci:0000:00:01.0\n"
        "4,3966,206764312,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n"
        " DEVICE=+pci:0000:3b:00.0\n"
        "6,3967,206764314,-;NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert fp.shape == "kmsg"
    assert events_of(fp) == [
        (3, 5, "pcie_dpc", None, "0000:00:01.0", None, "untimed"),
        (6, 8, "xid", 79, "0000:3b:00.0", None, "untimed"),
        (9, 9, "gpu_fallen_off_bus", 79, "0000:3b:00.0", None, "untimed"),
    ]
    assert (fp.routine_lines, fp.event_lines, fp.reject_lines) == (2, 7, 0)
    assert fp.events[1].attrs["uptime_us"] == 206764312


def test_kmsg_device_field_fills_a_missing_device(monkeypatch):
    text = "3,1,5000000,-;reboot: Restarting system\n DEVICE=+pci:0000:3B:00.0\n"
    fp = parse_both(text, ctx(), monkeypatch)
    assert events_of(fp) == [(1, 2, "reboot", None, "0000:3b:00.0", None, "untimed")]


def test_boot_relative_lines_are_anchored_by_audit_records(monkeypatch):
    # boot at 1753325003.000000: audit(...) wall time minus uptime
    text = (
        "<5>[   10.000000] audit: type=1400 audit(1753325013.000:5): apparmor=\"STATUS\"\n"
        "<5>[   20.000000] audit: type=1400 audit(1753325023.500:6): apparmor=\"STATUS\"\n"
        "<5>[   30.000000] audit: type=1400 audit(1753325033.000:7): apparmor=\"STATUS\"\n"
        "<0>[ 3098.275469] Kernel panic - not syncing: Test panic\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert events_of(fp) == [
        (4, 4, "kernel_panic", None, None, 1753325003_000000 + 3098_275469, "boot_relative")]


def test_boot_relative_lines_are_anchored_by_syslog_uptime_stamps(monkeypatch):
    text = (
        "Jul  1 12:00:00 node0042 kernel: [  100.000000] usb 1-1: new device\n"
        "[  160.500000] reboot: Restarting system\n"
    )
    fp = parse_both(text, ctx(year=2024), monkeypatch)
    assert events_of(fp) == [
        (2, 2, "reboot", None, None, us("2024-07-01T12:01:00.5"), "boot_relative")]


def test_anchors_do_not_cross_a_reboot(monkeypatch):
    text = (
        "[   10.000000] audit: type=1400 audit(1753325013.000:5): x\n"
        "[  500.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        "[    0.000000] Linux version 5.15.0-112-generic (x@y) #1 SMP\n"
        "[   50.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert events_of(fp) == [
        (2, 2, "xid", 79, "0000:3b:00.0", 1753325003_000000 + 500_000000, "boot_relative"),
        (3, 3, "boot", None, None, None, "untimed"),
        (4, 4, "xid", 79, "0000:3b:00.0", None, "untimed"),
    ]


def test_aer_report_is_one_event_over_its_lines(monkeypatch):
    text = "".join(f"[Mon Jul  1 12:00:00 2024] {m}\n" for m in (
        "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
        "pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
        "type=Transaction Layer, (Receiver ID)",
        "pcieport 0000:00:01.0:   device [1000:c030] error status/mask=00004000/00000000",
        "pcieport 0000:00:01.0:    [14] CmpltTO                (First)",
        f"{XID79}",
    ))
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.line_no, e.line_end, e.kind, e.device) for e in fp.events] == [
        (1, 4, "pcie_aer", "0000:00:01.0"), (5, 5, "xid", "0000:3b:00.0")]
    attrs = fp.events[0].attrs
    assert attrs["severity"] == "Uncorrected (Fatal)"
    assert attrs["source"] == "0000:01:00.0"
    assert attrs["type"] == "Transaction Layer"
    assert attrs["vendor_device"] == "1000:c030"
    assert attrs["errors"] == ["CmpltTO"]
    assert fp.events[0].message.count("\n") == 3


def test_aer_bus_error_without_header_absorbs_its_detail_lines(monkeypatch):
    text = "".join(f"2024-07-01T12:00:00.{i:06d}+00:00 n1 kernel: {m}\n" for i, m in enumerate((
        "nvme 0000:01:00.0: AER: PCIe Bus Error: severity=Correctable, type=Physical Layer, "
        "(Receiver ID)",
        "nvme 0000:01:00.0: AER:   device [144d:a808] error status/mask=00000001/0000e000",
        "nvme 0000:01:00.0: AER:    [ 0] RxErr",
        "nvme 0000:02:00.0: AER:    [ 0] RxErr",  # another device: not part of it
    )))
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.line_no, e.line_end, e.kind, e.device) for e in fp.events] == [
        (1, 3, "pcie_aer", "0000:01:00.0")]
    assert fp.events[0].attrs["severity"] == "Corrected"
    assert fp.events[0].attrs["errors"] == ["RxErr"]


def test_apei_and_mce_records_are_one_event_each(monkeypatch):
    lines = (
        "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
        "{1}[Hardware Error]: event severity: fatal",
        "{1}[Hardware Error]:  Error 0, type: fatal",
        "{1}[Hardware Error]:   section_type: memory error",
        "{1}[Hardware Error]:   DIMM location: NODE 3 CPU0_DIMM_G1",
        "mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 6: b200000000000185",
        "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff81234567> {intel_idle+0x10}",
        "mce: [Hardware Error]: Run the above through 'mcelog --ascii'",
        "Kernel panic - not syncing: Fatal machine check",
    )
    text = "".join(f"[  55.{i:06d}] {m}\n" for i, m in enumerate(lines))
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.line_no, e.line_end, e.kind) for e in fp.events] == [
        (1, 5, "mce"), (6, 8, "mce"), (9, 9, "kernel_panic")]
    assert fp.events[0].attrs["section_type"] == "memory error"
    assert fp.events[0].attrs["severity"] == "fatal"
    assert (fp.events[1].device, fp.events[1].attrs["bank"]) == ("cpu12", 6)


def test_gpu_uuid_and_board_serial_lines_are_one_event(monkeypatch):
    text = (
        "[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: "
        "GPU-509665ad-b600-ac93-3616-d754b23d636d\n"
        "[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert len(fp.events) == 1
    e = fp.events[0]
    assert (e.line_no, e.line_end, e.kind, e.device) == (1, 2, "gpu_serial", "0000:9b:00.0")
    assert e.attrs["serial"] == "1650124014249"
    assert e.attrs["uuid"] == "GPU-509665ad-b600-ac93-3616-d754b23d636d"


def test_oom_summary_and_kill_line_printed_together_are_one_kill(monkeypatch):
    text = (
        "[ 900.000100] python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE)\n"
        "[ 900.000200] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
        "mems_allowed=0-1,global_oom,task_memcg=/user.slice,task=python3,pid=2231,uid=0\n"
        "[ 900.000300] Out of memory: Killed process 2231 (python3) total-vm:1kB, UID:0\n"
        "[ 905.000000] Out of memory: Killed process 2232 (python3) total-vm:1kB, UID:0\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.line_no, e.line_end, e.kind, e.attrs["pid"]) for e in fp.events] == [
        (2, 3, "oom_kill", 2231), (4, 4, "oom_kill", 2232)]


def test_multi_line_records_do_not_cross_hosts(monkeypatch):
    text = (
        "2024-07-01T12:00:00+00:00 a kernel: mce: [Hardware Error]: Machine check events logged\n"
        "2024-07-01T12:00:00+00:00 b kernel: mce: [Hardware Error]: Machine check events logged\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert [(e.line_no, e.line_end, e.host) for e in fp.events] == [(1, 1, "a"), (2, 2, "b")]


def test_a_kernel_message_without_a_line_prefix_inherits_the_previous_time(monkeypatch):
    text = (
        "2024-07-01T12:00:00.500000+00:00 node0042 kernel: usb 1-1: new device\n"
        "\x00\x00NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        "some garbage\n"
    )
    fp = parse_both(text, ctx(), monkeypatch)
    assert events_of(fp) == [
        (2, 2, "xid", 79, "0000:3b:00.0", us("2024-07-01T12:00:00.5+00:00"), "inherited")]
    assert fp.events[0].host == "node0042"
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(3, "unrecognized kernel line")]


def test_routine_file_gives_no_event(monkeypatch):
    text = "".join(f"[Sun Feb 23 16:24:18 2025] {m}\n" for m in ROUTINE)
    fp = parse_both(text, ctx(), monkeypatch)
    assert fp.events == [] and fp.rejects == []
    assert fp.routine_lines == len(ROUTINE)


# --- accounting on dirty input -----------------------------------------------------------------

DIRTY = [
    "",
    "\n",
    "\n\n\n",
    f"2024-07-01T12:00:00+00:00 n kernel: {XID79}\r\n[  1.0] x\r\n",
    f"[  1.000000] {XID79}\n[  2.000000] \x00\x00\x00\n\x00\x00\x00\x00\n",
    f"Jul  1 12:00:00 n kernel: \ufffd\ufffd {XID79}\n\ufffd\ufffd\ufffd\n",
    f"2024-07-01T12:00:00+00:00 n kernel: {XID79}\n2024-07-01T12:00:01+00:00 n kernel: NVRM: Xid",
    f"4,1,100,-;{XID79}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0",
    "garbage\nmore garbage\n" + XID79 + "\n",
    "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0\n",
    "\r\n\r\n",
]


@pytest.mark.parametrize("text", DIRTY)
def test_accounting_on_dirty_input(text, monkeypatch):
    fp = parse_both(text, ctx(year=2024), monkeypatch)
    assert fp.lines == (0 if not text else text.count("\n") + (not text.endswith("\n")))


def test_empty_file():
    fp = kernel.parse("", ctx())
    assert (fp.lines, fp.events, fp.rejects, fp.shape) == (0, [], [], None)


def test_nul_lines_are_rejected_with_their_reason(monkeypatch):
    fp = parse_both("\x00\x00\x00\n[  1.000000] ok\n", ctx(), monkeypatch)
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(1, "nul bytes")]


def test_dominant_shape_of_a_mixed_file(monkeypatch):
    text = (
        "Jul  1 12:00:00 n kernel: a\n"
        "2024-07-01T12:00:00+00:00 n kernel: b\n"
        "2024-07-01T12:00:01+00:00 n kernel: c\n"
        "\n"
        " SUBSYSTEM=pci\n"
    )
    assert parse_both(text, ctx(), monkeypatch).shape == "rfc3339"


def test_large_file_goes_through_the_vectorized_path():
    lines = [f"2024-07-01T12:00:00.{i:06d}+00:00 n kernel: usb 1-1: new device" for i in
             range(5000)]
    lines[4321] = f"2024-07-01T12:00:01+00:00 n kernel: {XID79}"
    lines[10] = "garbage"
    fp = kernel.parse("\n".join(lines), ctx())
    check_accounting(fp)
    assert [(e.line_no, e.kind) for e in fp.events] == [(4322, "xid")]
    assert [r.line_no for r in fp.rejects] == [11]


# --- property: both paths agree and every line is counted, whatever the mix -----------------

_POOL = [
    *(case[0] for case in SHAPE_CASES),
    *(f"[  5.{i:06d}] {m}" for i, (m, *_rest) in enumerate(MESSAGE_CASES)),
    *(f"2024-07-01T12:00:0{i % 10}+00:00 n{i % 3} kernel: {m}"
      for i, (m, *_rest) in enumerate(MESSAGE_CASES)),
    *(f"Dec 31 23:59:5{i % 10} n kernel: {m}" for i, m in enumerate(ROUTINE)),
    "Jan  1 00:00:01 n kernel: reboot: Restarting system",
    "pcieport 0000:00:01.0:   device [1000:c030] error status/mask=00004000/00000000",
    "[  5.000001] pcieport 0000:00:01.0:    [14] CmpltTO                (First)",
    " DEVICE=+pci:0000:3b:00.0",
    "\x00\x00\x00",
    "\ufffd\ufffd\ufffd",
    "",
    "garbage",
    XID79,
]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.sampled_from(_POOL), max_size=40), crlf=st.booleans(),
       final_newline=st.booleans(), year=st.sampled_from([None, 2024]))
def test_any_mix_of_lines_is_fully_counted(picks, crlf, final_newline, year, monkeypatch):
    sep = "\r\n" if crlf else "\n"
    text = sep.join(picks) + (sep if final_newline and picks else "")
    fp = parse_both(text, ctx(year=year), monkeypatch)
    assert fp.lines == count_lines(text.encode())


def _rfc3164_log(n_routine: int) -> list[str]:
    """A syslog file across New Year: Xids before and after the rollover, and
    ``n_routine`` routine lines between them."""
    routine = "Dec 31 23:59:58 node0042 kernel: usb 1-1: new high-speed USB device number 2"
    return [f"Dec 31 23:59:57 node0042 kernel: [  12.500000] {XID79}",
            *[routine] * n_routine,
            f"Jan  1 00:00:01 node0042 kernel: {XID79}"]


def _rfc3339_log() -> list[str]:
    """RFC 3339 lines with a syslog boot anchor (``kernel: [secs]``) that dates a dmesg
    line of the same boot: no year to infer."""
    return [f"2024-07-01T12:00:00.000000+00:00 node0043 kernel: [  10.000000] {XID79}",
            "2024-07-01T12:00:01.000000+00:00 node0043 kernel: [  11.000000] eth0: up",
            f"[   12.000000] {XID79}",
            f"2024-07-01T12:00:02.000000+00:00 node0043 kernel: {XID79}"]


def test_years_only_for_files_that_read_them_same_rows_as_alone(monkeypatch):
    """The rfc3164 months are read for the files that need a year only: a large file
    by a pass of its own, small files by one pass over the batch, an RFC 3339 file not
    at all; every file's result is the one it gets parsed alone."""
    passes: list[int] = []
    months = kernel_columns._months
    monkeypatch.setattr(kernel_columns, "_months", lambda s: passes.append(len(s)) or months(s))
    big = _rfc3164_log(kernel_columns._OWN_MONTHS_PASS)
    files = [(_rfc3339_log(), ctx(path="hosts/node0043/kern.log", host="node0043")),
             (big, ctx(year=2023)), (_rfc3164_log(300), ctx(year=2023)),
             (_rfc3339_log(), ctx(path="hosts/node0044/kern.log", host="node0043"))]
    total = sum(len(lines) for lines, _ in files)
    got = kernel.parse_many(files)
    assert sorted(passes) == [len(big), total]
    assert [[e.ts for e in fp.events] for fp in got[1:3]] == [
        [us("2023-12-31T23:59:57"), us("2024-01-01T00:00:01")]] * 2
    assert [e.ts for e in got[0].events][1] == us("2024-07-01T12:00:02+00:00")
    for (lines, c), fp in zip(files, got, strict=True):
        assert kernel.parse_lines(lines, c) == fp
    passes.clear()
    kernel.parse_many([files[0], files[3]] * 100)  # a batch of RFC 3339 files
    assert passes == []


_DMESG = f"[   12.000000] {XID79}"
_SYSLOG3339 = f"2024-07-01T12:00:00.000000+00:00 node0042 kernel: {XID79}"
_SYSLOG3164 = f"Jul  1 12:00:00 node0042 kernel: {XID79}"


@pytest.mark.parametrize(("lines", "shape"), [
    ([_DMESG, _SYSLOG3339, _SYSLOG3339, _DMESG], "dmesg"),  # a tie: the first line's
    ([_SYSLOG3339, _DMESG, _DMESG, _SYSLOG3339], "rfc3339"),
    (["", "   ", _SYSLOG3164, _DMESG], "rfc3164"),  # blanks count for no timed shape
    (["-- Reboot --", "not a kernel line", _SYSLOG3164], "rfc3164"),
    ([_DMESG] * 3 + [_SYSLOG3339] * 300, "rfc3339"),  # past the sample: candidates count
    ([_SYSLOG3339] * 150 + [_DMESG] * 250, "dmesg"),
    (["garbage", "more garbage"], None),
])
def test_dominant_shape_same_in_a_batch_as_alone(lines, shape, monkeypatch):
    """The shape sample (the first lines' shapes, in first-line order) is counted by
    polars over a batch and by Python for a file alone: the same ``files.shape``."""
    files = [(lines, ctx()), ([_SYSLOG3164] * 5, ctx()), (lines[::-1], ctx())]
    monkeypatch.setattr(kernel_columns, "_SMALL_FILE", 0)
    batch = kernel.parse_many(files)
    monkeypatch.setattr(kernel_columns, "_SMALL_FILE", 10**9)
    alone = [kernel.parse_lines(ln, c) for ln, c in files]
    assert batch == alone
    assert batch[0].shape == shape


def _real_months_lines(peer: Path) -> list[str]:
    """Real syslog / dmesg lines (loghub, Azure captures in the peer data, the bundled
    sample corpus) and the edges of the month pattern: a ``[`` before the month, two,
    a month-like word, a line too short for a month, dmesg --reltime minutes."""
    lines = ["Jun  8 00:00:26 h100-0004 kernel: [41156.917596] perf: interrupt",
             "[Jun 8 00:00:26 h", "[Jun08 00:01] eth0: up", "Jun08 00:01] x",
             "[[Jun08 00:01] x", "Dec 31 23:59:59.5 x y", "Foo  1 00:00:00 h k: x",
             "", "J", "[", "Jun  8 00:00:26 ", "jun  8 00:00:26 h k: x",
             "\ufeffJun  8 00:00:26 h k: x", "Juné 8 00:00:26 h", "[  12.5] Jun  8",
             "Jun31 23:59] x", "Oct 1 00:00:00 h k: x", "[Nov 9 00:00:00.123 h",
             "Feb29 12:00] y", "[Sep 01:00] z"]
    roots = [peer / "loghub", peer / "azurehpc-health-checks", peer / "gpud",
             Path(__file__).parents[1] / "fixtures" / "sample" / "corpus"]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in ("", ".log", ".txt", ".1") \
                    and path.stat().st_size < 4 << 20:
                lines += decode(path.read_bytes()).split("\n")[:3000]
    return lines


def test_months_are_the_month_group_of_the_pattern(shared_dir):
    """``_months`` (a match test and a slice) reads the month ``str.extract`` of the
    pattern's group reads, on every line: real ones of several shapes, and the edges."""
    series = pl.Series("line", _real_months_lines(shared_dir / "peer-data"),
                       dtype=pl.String)
    want = (series.str.extract(kernel_shapes._RFC3164_MON, 1)
            .replace_strict(kernel_shapes.MONTHS, default=0, return_dtype=pl.Int8).to_numpy())
    got = kernel_columns._months(series)
    assert got.dtype == want.dtype
    assert (got == want).all()
    assert 0 < (want > 0).sum() < len(want)  # both kinds of line are there
