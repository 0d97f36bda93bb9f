"""Recall and false alarms of the kernel rules on real lines (tests/data/real_kernel_lines.toml).

The set holds lines per-node checkers flag (gpud's kmsg matchers and tests,
node-problem-detector, NVSentinel, Azure's HPC health checks), lines operators pasted
into public issues, and routine lines of real syslogs (loghub, gpud and Azure
captures), each with its source URL. A line is read the way ``faultline rules check``
reads an example: as a message, else as a whole kernel log line (dmesg, syslog...).
Run with ``-s`` to see the numbers; the asserts keep them from sliding back.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from faultline.pipeline.parsers.kernel_rules import ruleset
from faultline.pipeline.parsers.kernel_rules_check import read_line
from faultline.schemas.event_kinds import EVENT_KINDS

DATA = Path(__file__).parent / "data" / "real_kernel_lines.toml"


@pytest.fixture(scope="module")
def real() -> dict:
    return tomllib.loads(DATA.read_text(encoding="utf-8"))


def test_the_set_is_big_enough_and_every_line_has_a_source(real):
    events, routine = real["event"], real["routine"]
    assert len(events) >= 150 and len(routine) >= 100
    for entry in events + routine:
        assert entry["source"].startswith("https://"), entry
        assert entry["license"], entry
    assert all(e["kind"] in EVENT_KINDS for e in events)
    # at least the families the per-node checkers look for
    kinds = {e["kind"] for e in events}
    assert {"xid", "io_error", "fs_error", "nvme_error", "nfs_timeout", "nfs_recovered",
            "nfs_error", "os_limit", "nic_cmd_failed", "nvlink_error", "segfault",
            "soft_lockup", "hung_task", "oom_kill", "pcie_aer", "ib_link_down",
            "kernel_panic", "peermem_error"} <= kinds


def _measure(events: list[dict], routine: list[dict]) -> tuple[int, int, list, list, list]:
    rs = ruleset()
    found, right, misses, wrong = 0, 0, [], []
    for e in events:
        mm, _ = read_line(rs, e["line"], None)
        if mm is None:
            misses.append(e["line"])
            continue
        found += 1
        if mm.kind == e["kind"]:
            right += 1
        else:
            wrong.append((e["kind"], mm.kind, e["line"]))
    alarms = []
    for r in routine:
        mm, _ = read_line(rs, r["line"], None)
        if mm is not None:
            alarms.append((mm.kind, r["line"]))
    return found, right, misses, wrong, alarms


def _report(name: str, events: list[dict], routine: list[dict]) -> tuple:
    found, right, misses, wrong, alarms = got = _measure(events, routine)
    n_ev, n_rt = len(events), len(routine)
    kinds = len({e["kind"] for e in events})
    print(f"\n{name}: {n_ev} event lines ({kinds} kinds), {n_rt} routine lines")
    print(f"  recall {found}/{n_ev} = {found / n_ev:.1%}; kind right {right}/{n_ev} = "
          f"{right / n_ev:.1%}; false alarms {len(alarms)}/{n_rt} = {len(alarms) / n_rt:.1%}")
    for line in misses:
        print("  missed:", line)
    for want, got_kind, line in wrong:
        print(f"  kind {got_kind} (expected {want}):", line)
    for kind, line in alarms:
        print(f"  false alarm {kind}:", line)
    return got


def test_recall_kind_accuracy_and_false_alarms_on_real_lines(real):
    events, routine = real["event"], real["routine"]
    tuned = ([e for e in events if not e.get("held_out")],
             [r for r in routine if not r.get("held_out")])
    held = ([e for e in events if e.get("held_out")],
            [r for r in routine if r.get("held_out")])
    found, right, misses, wrong, alarms = _report("all real lines", events, routine)
    _report("written against (families were added for these)", *tuned)
    _report("held out (collected after the rules were written)", *held)
    assert len(held[0]) >= 10 and len(held[1]) >= 20
    assert found / len(events) >= 0.97, misses
    assert right / len(events) >= 0.95, wrong
    assert not alarms
