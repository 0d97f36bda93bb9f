"""``nvidia-smi -q`` reports and nvidia-bug-report logs: the memory-health counters an
operator collects from a broken node become events, and a bug report's kernel sections
are read like the kernel logs they copy. Real data: tests/data/nvidia/SOURCES.md."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from accounting import check_accounting, us

from faultline.classifiers import signals
from faultline.pipeline.fileparse import parse_file
from faultline.pipeline.parsers import nvbugreport, nvsmi
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import sniff

DATA = Path(__file__).parent / "data" / "nvidia"
GPUD = "peer-data/gpud/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log"


def rule_component(e) -> str | None:
    rule = signals.rule_for(e.kind, e.message, e.xid, json.dumps(e.attrs))
    return rule.component if rule else None


def _kinds(fp) -> list[tuple[str, str | None]]:
    return [(e.kind, e.device) for e in fp.events]


def test_a_healthy_report_gives_the_boards_and_nothing_else():
    text = (DATA / "nvsmi-535-excerpt.txt").read_text()
    fp = nvsmi.parse(text, ParseContext("/c/node7/nvidia-smi-q.txt", host="node7"))
    check_accounting(fp)
    assert _kinds(fp) == [("gpu_inventory", "0000:01:00.0"), ("gpu_inventory", "0000:23:00.0")]
    first = fp.events[0]
    assert first.attrs == {"index": 0, "pci": "0000:01:00.0", "serial": None,
                           "uuid": "GPU-370465f5-30e0-6877-b85c-16729f41b90f"}
    assert first.ts == us("2024-07-08T08:11:21") and first.ts_quality == "assumed_tz"
    assert sniff(text.splitlines(), "/c/whatever.txt") == "nvidia_smi"


def test_remap_failure_and_uncorrectable_ecc_are_events_on_their_board():
    text = (DATA / "nvsmi-remap-failure.txt").read_text()
    fp = nvsmi.parse(text, ParseContext("/c/x", host="node7", tz="America/New_York"))
    check_accounting(fp)
    found = {(e.kind, e.device): e for e in fp.events if e.kind != "gpu_inventory"}
    assert set(found) == {("gpu_ecc_uncorrectable", "0000:01:00.0"),
                          ("gpu_row_remap_failure", "0000:23:00.0")}
    remap = found[("gpu_row_remap_failure", "0000:23:00.0")]
    assert remap.attrs == {"uncorrectable_rows": 4, "pending": True, "index": 1}
    lines = text.split("\n")
    assert lines[remap.line_no - 1].strip().startswith("Correctable Error")
    assert lines[remap.line_end - 1].strip() == "Remapping Failure Occurred        : Yes"
    assert remap.ts == us("2024-07-08T08:11:21", "America/New_York")
    assert found[("gpu_ecc_uncorrectable", "0000:01:00.0")].attrs["dram"] == 2
    assert rule_component(remap) == "GPU HBM3 Memory"
    assert rule_component(found[("gpu_ecc_uncorrectable", "0000:01:00.0")]) == \
        "GPU HBM3 Memory"


@pytest.mark.parametrize(("rows", "kind", "component"), [
    # Ampere+ form, as NVIDIA's memory error management guide lists the fields
    ({"Remapped Rows": ["Pending : Yes", "Remapping Failure Occurred : No"]},
     "gpu_row_remap_pending", "GPU HBM3 Memory"),
    ({"ECC Errors": ["Volatile", "    SRAM Uncorrectable : 3", "    DRAM Uncorrectable : 0"]},
     "gpu_ecc_uncorrectable", "GPU SRAM Memory"),
    # pre-Ampere form (Volta and older): page retirement, single/double bit counters
    ({"Retired Pages": ["Single Bit ECC : 2", "Double Bit ECC : 1",
                        "Pending Page Blacklist : No"]}, "gpu_retired_pages",
     "GPU HBM3 Memory"),
    ({"ECC Errors": ["Volatile", "    Single Bit", "        Device Memory : 0",
                     "    Double Bit", "        Device Memory : 5"]},
     "gpu_ecc_uncorrectable", "GPU HBM3 Memory"),
])
def test_each_counter_family(rows, kind, component):
    body = ["Timestamp : Tue Jul  9 01:02:03 2024", "Attached GPUs : 1", "GPU 00000000:3B:00.0"]
    for section, fields in rows.items():
        body += [f"    {section}"] + [f"        {f}" for f in fields]
    fp = nvsmi.parse("\n".join(body) + "\n", ParseContext("/c/x"))
    check_accounting(fp)
    hits = [e for e in fp.events if e.kind != "gpu_inventory"]
    assert [(e.kind, e.device) for e in hits] == [(kind, "0000:3b:00.0")]
    assert rule_component(hits[0]) == component


def _bug_report(host_line: str, sections: list[tuple[str, list[str]]]) -> str:
    sep = nvbugreport.SEPARATOR
    out = [sep, "", f"{nvbugreport.START}.  Please include this file, along", "",
           "nvidia-bug-report.sh Version: 35049061", "", "Date: Tue Jul  9 03:00:00 UTC 2024",
           host_line, "command line flags: ", ""]
    for title, body in sections:
        out += [sep, "", title, *body, ""]
    return "\n".join(out) + "\n"


@pytest.mark.shared
def test_a_bug_report_reads_its_kernel_sections_and_its_nvidia_smi(shared_dir):
    kern = (shared_dir / GPUD).read_text().splitlines()
    smi = (DATA / "nvsmi-remap-failure.txt").read_text().splitlines()
    text = _bug_report("uname: Linux gpu-node-17 5.15.0-105-generic #115-Ubuntu SMP x86_64",
                       [("*** /etc/issue", ["Ubuntu 22.04.4 LTS \\n \\l"]),
                        ("*** /var/log/kern.log", kern),
                        ("/usr/bin/lspci -d \"10de:*\" -v -xxx", ["3b:00.0 3D controller: x"]),
                        ("/usr/bin/nvidia-smi --query", smi)])
    data = gzip.compress(text.encode())
    settings = IngestSettings()
    parsed = parse_file("/c/nvidia-bug-report.log.gz", data, settings)
    row = parsed.files.to_pylist()[0]
    assert row["source"] == "nvidia_bug_report"
    assert row["lines"] == text.count("\n")
    assert row["routine_lines"] + row["event_lines"] + row["reject_lines"] == row["lines"]
    events = parsed.events.to_pylist()
    alone = parse_file("/c/hosts/gpu-node-17/dmesg.txt", "\n".join(kern).encode() + b"\n",
                       settings).events.to_pylist()
    lines = text.split("\n")
    kernel_events = [e for e in events if e["kind"] not in (
        "gpu_inventory", "gpu_row_remap_failure", "gpu_ecc_uncorrectable")]
    assert [(e["kind"], e["xid"], e["ts"]) for e in kernel_events] == [
        (e["kind"], e["xid"], e["ts"]) for e in alone]
    assert {e["host"] for e in events} == {"gpu-node-17"}  # from the uname line
    for e in kernel_events:  # line numbers point into the whole report
        assert lines[e["line_no"] - 1] == kern[e["line_no"] - 1 - (
            lines.index("*** /var/log/kern.log") + 1)]
    assert any(e["xid"] == 119 for e in kernel_events)
    assert {e["kind"] for e in events} >= {"gpu_row_remap_failure", "gpu_inventory"}


# --- counters read after the stop -----------------------------------------------------

FAILED = 1_720_000_000.0
ATTEMPT = ("run", "7", FAILED - 3600, FAILED, "FAILED", "node[1-2]", None, 1)


def _cand(dt: float, host: str, kind: str, message: str, **attrs):
    from faultline.classifiers.interruptions import Candidate

    return Candidate(f"e{kind}{dt}", FAILED + dt, host, kind, None, message, attrs, 1,
                     None, "0000:23:00.0")


def _decide(cands, watchdog=None):
    from faultline.classifiers.interruptions import decide
    from faultline.pipeline.parsers.hosts import HostResolver

    return decide(cands, watchdog or {}, ["node1", "node2"], FAILED, ATTEMPT, {},
                  HostResolver())


def test_a_report_read_after_a_hang_names_the_memory_that_failed():
    """Only watchdog timeouts before the stop; an hour later the operator's
    nvidia-smi -q on node2 shows a row remapping failure: that is the cause."""
    remap = _cand(3600, "node2", "gpu_row_remap_failure",
                  "nvidia-smi: GPU 0000:23:00.0: row remapping failure occurred: ...",
                  uncorrectable_rows=4, pending=True, index=1)
    d = _decide([remap], watchdog={"node1": {0, 1}, "node2": {8, 9}})
    assert (d.component, d.root, d.culprit_host) == ("GPU HBM3 Memory", remap, "node2")
    assert d.rule_id == "gpu.row_remap_failure.read_after"


def test_a_report_read_after_does_not_override_a_cause_seen_before_the_stop():
    xid = _cand(-20, "node1", "xid", "NVRM: Xid (PCI:0000:23:00): 79, pid=1, name=python, "
                "GPU has fallen off the bus.")
    xid.xid = 79
    late = _cand(3600, "node2", "gpu_ecc_uncorrectable",
                 "nvidia-smi: GPU 0000:23:00.0: volatile uncorrectable DRAM ECC errors: ...",
                 dram=2, sram=0, index=1)
    d = _decide([xid, late])
    assert (d.component, d.root) == ("Faulty GPU", xid)
    too_late = _cand(3 * 3600, "node2", "gpu_row_remap_failure", "nvidia-smi: ...")
    assert _decide([too_late]).component == "Unattributed"  # hours later: not this stop
