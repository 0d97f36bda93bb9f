"""Hardware entities from free text (faultline.classifiers.entities).

Table-driven over realistic strings: filled templates from fixtures/text/free_text.csv,
lines quoted in shared/reference/log_signatures.md, and hand-written negatives.
"""

from __future__ import annotations

import random
import re

import pytest

from faultline.classifiers.entities import KEYS, extract, extract_many
from faultline.fixtures import textdata
from faultline.pipeline.pci import normalize_pci


def _found(text: str) -> dict[str, list]:
    return {k: v for k, v in extract(text).items() if v}


CASES = [
    # --- drain reasons and admin comments (free_text.csv, filled)
    ("xid 79 gpu3 fell off bus", {"xid": [79], "gpu": [3]}),
    ("xid79", {"xid": [79]}),
    ("Repeated Xid 13/31 on GPU 5 across three unrelated jobs in 24h points at the GPU "
     "rather than user code. Pulling node for a GPU swap (INC-20417).",
     {"xid": [13, 31], "gpu": [5], "ticket": ["INC-20417"]}),
    ("NHC: check_gpu_xid:  GPU 3 (0000:3b:00.0) Xid 48 detected in kernel log",
     {"gpu": [3], "pci": ["0000:3b:00.0"], "xid": [48]}),
    ("DCGM_FR_XID_ERROR: Detected XID 79 for GPU 2", {"xid": [79], "gpu": [2]}),
    ("auto-drain: xid=79 gpu=3 serial=1650123456789 policy=hw-fatal -> rma-queue",
     {"xid": [79], "gpu": [3], "gpu_serial": ["1650123456789"]}),
    ("[remedy] rule=gpu_lost_xid79 node=node0042 gpu=6 action=DRAIN next=RMA attempts=0",
     {"xid": [79], "gpu": [6]}),
    ("Draining: GPU 1 (SN 1650987654321) logged Xid 79 and is no longer visible",
     {"gpu": [1], "gpu_serial": ["1650987654321"], "xid": [79]}),
    ("RMA HW-55012: GPU 4 SN 1650120000042 - fallen off bus (Xid 79), FRU H100 SXM5 replace",
     {"ticket": ["HW-55012"], "gpu": [4], "gpu_serial": ["1650120000042"], "xid": [79]}),
    ("CASE-11580 GPU slot 2: Xid 64 remap bank exhausted; replace GPU",
     {"ticket": ["CASE-11580"], "gpu": [2], "xid": [64]}),
    ("HW ticket RMA-77970: GPU temp sensor fault on slot 6, replace",
     {"ticket": ["RMA-77970"], "gpu": [6]}),
    ("GPU3_Temp reads 0C, sensor fault", {"gpu": [3]}),
    ("dimm CPU1_DIMM_B2 ue, replce", {"dimm": ["CPU1_DIMM_B2"]}),
    ("PSU2 failed, chassis on one feed", {"psu": ["PSU2"]}),
    ("FAN3 dead, gpu temps climbing", {"fan": ["FAN3"]}),
    ("nvme1n1 read-only, local scratch gone", {"nvme": ["nvme1n1"]}),
    ("NHC: check_hw_ib:  IB port mlx5_3:1 is Down", {"ib_port": ["mlx5_3:1"]}),
    ("NHC: check_hw_ib:  No IB port ib7:1 is ACTIVE (LinkUp 400 Gb/sec)",
     {"ib_port": ["ib7:1"]}),
    ("ib3 flapping, ticket to net", {"ib_port": ["ib3"]}),
    ("[remedy] rule=ib_port_down dev=mlx5_7 peer=leaf-r33-s2 action=DRAIN escalate=RMA-96033",
     {"ib_port": ["mlx5_7"], "switch": ["leaf-r33-s2"], "ticket": ["RMA-96033"]}),
    ("UFM alert: link leaf-r25-s6/P23 - node2676:ib7 symbol errors, optic swap scheduled "
     "2024-04-16", {"switch": ["leaf-r25-s6"], "ib_port": ["ib7"]}),
    ("CHG-12345 planned: spine-03 firmware upgrade", {"ticket": ["CHG-12345"],
                                                      "switch": ["spine-03"]}),
    ("see ticket 48213, vendor case #01234567", {"ticket": ["48213", "01234567"]}),
    # --- log lines (shared/reference/log_signatures.md)
    ("[155044.078590] NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
     {"pci": ["0000:06:00.0"], "xid": [79]}),
    ("NVRM: Xid (PCI:0004:01:00): 119, pid=430, name=nv_queue, Timeout waiting for RPC from "
     "GSP!", {"pci": ["0004:01:00.0"], "xid": [119]}),
    ("kernel: NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal "
     "error detected on link 1", {"pci": ["0000:c1:00.0"], "xid": [74]}),
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
     "reset gpu to activate.", {"pci": ["0000:10:1c.0"], "xid": [63]}),
    ("NVRM: Xid (PCI:0000:9b:00): 119, pid=<pid>, name=nvidia-smi, Timeout after 6s of "
     "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC)",
     {"pci": ["0000:9b:00.0"], "xid": [119], "gpu": [4]}),
    ("nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
     {"pci": ["0000:c2:00.0"]}),  # an SXid is not an Xid
    ("mlx5_core 0000:d2:00.0: poll_health:825:(pid 0): device's health compromised - "
     "reached miss count", {"pci": ["0000:d2:00.0"]}),
    ("NET/IB : mlx5_0:1 Got async event : port error", {"ib_port": ["mlx5_0:1"]}),
    ("NET/IB: Got completion from peer 10.0.0.7<53110> with status=12 opcode=1 len=0 vendor "
     "err 129 (Send) localGid ... hca mlx5_3", {"ib_port": ["mlx5_3"]}),
    ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
     {"pci": ["0000:00:01.0", "0000:01:00.0"]}),
    ("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff",
     {"nvme": ["nvme0"]}),
    ("EXT4-fs (md0): Remounting filesystem read-only | md/raid0:md0: Disk failure on "
     "nvme0n1p1 detected, failing array.", {"nvme": ["nvme0n1p1"]}),
    ("  29 | 06/04/2014 | 09:49:51 | Power Supply PS1 Status | Power Supply AC lost | Asserted",
     {"psu": ["PSU1"]}),
    ("   2 | 09/23/2026 | 14:03:40 | Fan FAN1 Tach | Lower Critical going low  | Asserted | "
     "Reading 0 < Threshold 1000 RPM", {"fan": ["FAN1"]}),
    ("{1}[Hardware Error]:   DIMM location: NODE 3 CPU0_DIMM_G1", {"dimm": ["CPU0_DIMM_G1"]}),
    ("EDAC MC3: 1 UE memory read error on CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (channel:0 slot:0 "
     "page:0x7e025e offset:0x400 grain:32)", {"dimm": ["CPU_SRCID#0_MC#3_CHAN#0_DIMM#0"]}),
    ("Memory #0x02 | Uncorrectable ECC (UnCorrectable ECC |  DIMMD7) | Asserted",
     {"dimm": ["DIMMD7"]}),
    ("   1 | 09/23/2026 | 14:03:11 | Temperature GPU5_Temp | Upper Non-critical going high",
     {"gpu": [5]}),
    ("NVRM: GPU at PCI:0000:3b:00: GPU-5f2a1b3c-aaaa-bbbb-cccc-1234567890ab",
     {"pci": ["0000:3b:00.0"]}),
    ("NVRM: GPU Board Serial Number: 1321234567890", {"gpu_serial": ["1321234567890"]}),
    ("GPU 00000000:3B:00.0: Unable to determine the device handle", {"pci": ["0000:3b:00.0"]}),
    ("4,1234,123456789,-;NVRM: Xid ... DEVICE=+pci:0000:3b:00.0", {"pci": ["0000:3b:00.0"]}),
]


@pytest.mark.parametrize(("sample", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_extract(sample, expected):
    assert _found(sample) == expected


NEGATIVES = [
    "Expected 8 GPUs, found 7",  # counts, not indexes
    "only 7 gpus visible",
    "ran for 12:30.5 then hung at 2024-07-01T12:00:00.123",  # times are not PCI addresses
    "[remedy] rule=job_hang_no_evidence node=node6863 xid=0 ib_errors=0 sel=clean",  # a count
    "torch2 swap1 core3 switching",  # not switch names
    "mlx5_core driver reloaded",  # a driver, not a device
    "nvme nvme list showed nothing",
    "PCIe slot 3 riser reseated",  # a PCIe slot in a text with no GPU
    "EDAC MC0: 1 CE memory read error (channel:0 slot:0)",
    "GPU-5f2a1b3c-aaaa-bbbb-cccc-1234567890ab",  # a UUID, not an index
    "H100-80GB SXM5",
    "",
]


@pytest.mark.parametrize("sample", NEGATIVES)
def test_no_false_entities(sample):
    assert _found(sample) == {}


def test_every_key_is_always_present():
    got = extract("nothing here")
    assert tuple(got) == KEYS
    assert all(v == [] for v in got.values())
    assert extract(None) == got  # type: ignore[arg-type]


def test_values_are_deduplicated_in_order_and_typed():
    got = extract("gpu3 xid 79, GPU 3 again: Xid 79; then gpu1 PCI:0000:3B:00 and 0000:3b:00.0")
    assert got["gpu"] == [3, 1]
    assert got["xid"] == [79]
    assert got["pci"] == ["0000:3b:00.0"]
    assert all(isinstance(v, int) for v in got["gpu"] + got["xid"])


_PLACEHOLDER_KEY = {"gpu": "gpu", "pci": "pci", "serial": "gpu_serial", "xid": "xid",
                    "port": "ib_port", "switch": "switch", "ticket": "ticket", "dimm": "dimm",
                    "psu": "psu", "fan": "fan", "nvme": "nvme"}


def _expected_in(name: str, value: object, got: list) -> bool:
    if name == "pci":
        return normalize_pci(str(value)) in got
    if name == "port":  # "mlx5_3" is found as written or with its port ("mlx5_3:1")
        return any(g == value or str(g).startswith(f"{value}:") for g in got)
    return value in got


def test_every_filled_placeholder_is_found():
    """Every drain-reason / admin-comment template, filled three times: each hardware
    placeholder's value comes back from extract(), normalized."""
    texts, checks = [], []
    for t in textdata.templates():
        if t.kind == "traceback":
            continue
        rng = random.Random(f"entities|{t.text}")
        names = [n for n in dict.fromkeys(re.findall(r"\{(\w+)\}", t.text))
                 if n in _PLACEHOLDER_KEY]
        for _ in range(3):
            slots = textdata.random_slots(rng, t.label)
            texts.append(textdata.fill(t.text, slots))
            checks.append([(n, slots[n]) for n in names])
    missed = []
    for text, got, want in zip(texts, extract_many(texts), checks, strict=True):
        for name, value in want:
            if not _expected_in(name, value, got[_PLACEHOLDER_KEY[name]]):
                missed.append((name, value, text))
    assert sum(len(c) for c in checks) > 2000
    assert not missed, missed[:10]


def test_extract_many_matches_extract():
    texts = [c[0] for c in CASES]
    assert extract_many(texts) == [extract(t) for t in texts]
