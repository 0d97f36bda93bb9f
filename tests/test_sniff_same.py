"""``sniff``'s shortcuts (banner and header pre-checks) decide exactly what its plain
form decides: the plain form, frozen below as it stood before them, against the real
one on the head of every file of the fixtures and of ../shared/peer-data, and on
table-driven lines made to sit on each pre-check's edge."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest

from faultline.pipeline import sniff as S
from faultline.pipeline.fileparse import SNIFF_BYTES
from faultline.pipeline.inflate import cap_lines, gunzip
from faultline.pipeline.parsers import (
    nvbugreport,
    nvsmi,
    redfish,
    sacct,
    sacct_json,
    sel,
    slurm_nodes,
    slurmd,
    structured,
)
from faultline.pipeline.text import decode, split_lines


def plain_sniff(lines: list[str], path: str = "") -> str:
    """``sniff`` as it was, every check run on every file."""
    sample = list(islice(filter(str.strip, lines[: S.SAMPLE_LINES * 4]), S.SAMPLE_LINES))
    hint = plain_path_hint(S._as_posix(path))
    if not sample:
        return hint or "unknown"
    first = sample[0].lstrip("\ufeff")
    if nvbugreport.looks_like_bug_report(sample):
        return "nvidia_bug_report"
    if nvsmi.looks_like_nvsmi(sample):
        return "nvidia_smi"
    if sacct.looks_like_sacct(first):
        return "sacct"
    if first[:1] == "{" or first[:2] == "[{" or first.rstrip() == "[":
        head = "\n".join(lines[:400])
        if redfish.looks_like_redfish(head):
            return "sel"
        if sacct_json.looks_like_sacct_json(head):
            return "sacct"
    if sel.looks_like_freeipmi(first):
        return "sel"
    if slurm_nodes.looks_like_slurm_nodes(first):
        return "slurm_nodes"
    if S._INVENTORY_HEADER.search(first):
        return "inventory"
    if S._HOSTS_HEADER.search(first):
        return "hosts"
    if (first.startswith("{") or "=" in first) and structured.looks_structured(sample):
        return "kernel"
    if hint and plain_confirms(hint, sample[:8]):
        return hint
    job_sig = S._LINE_SIGNATURES["job"]
    scores = {name: sum(1 for ln in sample if rx.search(ln)) for name, rx in
              S._LINE_SIGNATURES.items() if name != "job"}
    scores["job"] = sum(1 for ln in sample if job_sig.search(ln)
                        and not S._SYSLOG_TAG.search(ln))
    scores["kernel"] = sum(1 for ln in sample if S._KERNEL.search(ln)
                           and (not job_sig.search(ln) or S._SYSLOG_TAG.search(ln)))
    best = max(scores.values())
    if best < S.MIN_SHARE * len(sample):
        if hint == "job" and S.SLURM_OUT_RE.search(path):
            return "job"
        return hint if hint and scores.get(hint, 0) > 0 else "unknown"
    top = [name for name, s in scores.items() if s == best]
    if len(top) > 1 and hint in top:
        return hint
    if top[:2] == ["slurmctld", "slurmd"]:
        return "slurmd" if any(slurmd.SLURMD_MARKERS.match(ln) for ln in sample) else "slurmctld"
    return top[0]


def plain_path_hint(path: str) -> str | None:
    """``path_hint`` as it was: every pattern in turn on the whole path."""
    return next((source for rx, source in S._PATH_HINTS if rx.search(path)), None)


def plain_confirms(source: str, lines: list[str]) -> bool:
    """``_confirms`` as it was: each line's signature and syslog tag searched apart."""
    if source in ("sacct", "inventory", "hosts", "slurm_nodes"):
        return False
    job_sig = S._LINE_SIGNATURES["job"]
    if source == "job":
        fits = sum(1 for ln in lines if job_sig.search(ln) and not S._SYSLOG_TAG.search(ln))
    elif source == "kernel":
        fits = sum(1 for ln in lines if S._KERNEL.search(ln)
                   and (not job_sig.search(ln) or S._SYSLOG_TAG.search(ln)))
    else:
        rx = S._LINE_SIGNATURES.get(source)
        fits = sum(1 for ln in lines if rx and rx.search(ln))
    return fits > S.MIN_SHARE * len(lines)


def head_lines(data: bytes) -> list[str]:
    """The lines ``fileparse._prepare`` sniffs a file by."""
    if data[:2] == b"\x1f\x8b":
        data = gunzip(data)[0]
    return split_lines(decode(cap_lines(data)[0])[:SNIFF_BYTES])


def _every_file(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_same_source_for_every_fixture_file(repo_root):
    files = _every_file(repo_root / "fixtures")
    decided = {}
    for p in files:
        lines, path = head_lines(p.read_bytes()), str(p)
        got = S.sniff(lines, path)
        assert got == plain_sniff(lines, path), path
        # and under a path that hints nothing, or another source
        for other in ("/c/x.txt", "/c/jobs/7/n1.log", "/c/hosts/n1/kern.log"):
            assert S.sniff(lines, other) == plain_sniff(lines, other), (path, other)
        decided[got] = decided.get(got, 0) + 1
    assert len(files) > 400
    assert {"job", "kernel", "trainer", "sacct", "sel", "slurmctld", "inventory",
            "hosts"} <= set(decided), decided


def test_same_source_for_every_peer_data_file(shared_dir):
    files = _every_file(shared_dir / "peer-data")
    assert len(files) > 20
    for p in files:
        lines, path = head_lines(p.read_bytes()), str(p)
        assert S.sniff(lines, path) == plain_sniff(lines, path), path


# First lines on each pre-check's edge: every header shape, its case variants, and
# text that fails the pre-check only by a hair (non-ASCII folding, leading space).
EDGE_FIRST_LINES = [
    "JobID|JobName|State|Start|End|NodeList",
    "jobid,jobname,state",
    "  ID | Date | Time | Name | Type | Event",
    "id,date,time,name,type,event",
    "REASON               USER      TIMESTAMP           NODELIST",
    "  REASON USER TIMESTAMP NODELIST",
    "NodeName=node001 Arch=x86_64 CoresPerSocket=32",
    "nodename=node001 State=IDLE",
    "REASON|NODELIST|USER",
    "index, name, pci.bus_id, uuid",
    "INDEX , UUID, serial",
    "Index, serial",
    "name, pci.bus_id",
    "uuid, pci.bus_id, memory.total",
    "host,aliases,address",
    "  hostname , ip",
    "Name,Address",
    "p\u017fci.bus_id",  # the long s, which re.I folds to s
    "pci.bu\u017f_id, uuid",
    "\u212aernel, host",
    "host\u017fname, ip",
    "index\u212a, serial",
    "\ufeffhost,alias",
    "\ufeffJobID|State",
    "\x1c host, ip",
    "\u2003host, ip",
    "Start of NVIDIA bug report log file",
    "==============NVSMI LOG==============",
    "Attached GPUs : 8",
    "{\"MESSAGE\": \"NVRM: Xid\", \"__REALTIME_TIMESTAMP\": \"1\"}",
    "[",
    "[{\"Id\": \"1\"}]",
    "__CURSOR=s=abc",
    "2024-07-01T12:00:00Z node1:1:2 [0] NCCL INFO | pipe",
    "2024-07-01T12:00:00Z W0701 12:00:00.000 1 run.py:1] name=x",
]
NEXT_LINES = [
    [],
    ["2024-07-01T12:00:01Z node1:1:2 [0] NCCL INFO Bootstrap"] * 6,
    ["GPU 00000000:07:00.0", "    Product Name : NVIDIA H100"],
    ["Start of NVIDIA bug report log file"],
    ["2024-07-01 12:00:00,000 INFO step=1 loss=2.0"] * 6,
    ["Jul  1 12:00:00 node1 kernel: NVRM: Xid (PCI:0000:07:00): 79"] * 6,
    # collector-stamped, or a syslog line whose stamp looks like a collector's
    ["2024-07-01T12:00:01Z node1 kernel: NVRM: Xid (PCI:0000:07:00): 79"] * 6,
    ["2024-07-01T12:00:01Z [rank3]:[E701 12:00:01.5 ProcessGroupNCCL.cpp:1] x"] * 6,
    ["2024-07-01T12:00:01Z node1 torchrun[12]: [rank3]:[E701 12:00:01.5 x] y"] * 6,
]
PATHS = ["/c/x.txt", "/c/jobs/7/n1.log", "/c/hosts/n1/sel.txt", "/c/gpus.csv",
         "/c/hosts.csv", "/c/slurm/sacct.txt", "/c/sinfo-R.txt", "/c/hosts/n1/kern.log"]


@pytest.mark.parametrize("first", EDGE_FIRST_LINES)
def test_same_source_on_each_precheck_edge(first):
    for rest in NEXT_LINES:
        for path in PATHS:
            lines = [first, *rest]
            assert S.sniff(lines, path) == plain_sniff(lines, path), (lines, path)


def _a_header_check_accepts(first: str) -> bool:
    return bool(sacct.looks_like_sacct(first) or sel.looks_like_freeipmi(first)
                or slurm_nodes.looks_like_slurm_nodes(first)
                or S._INVENTORY_HEADER.search(first) or S._HOSTS_HEADER.search(first))


def test_the_header_precheck_passes_every_header_a_check_accepts():
    """Each header a check accepts gets past the pre-check, the folded non-ASCII ones
    included (else the edge test could compare two answers wrong alike)."""
    accepted = [f for f in (ln.lstrip("\ufeff") for ln in EDGE_FIRST_LINES)
                if _a_header_check_accepts(f)]
    assert len(accepted) >= 14, accepted
    assert any(not f.isascii() for f in accepted)
    for first in accepted:
        assert S._may_be_header(first), first
    assert not S._may_be_header("2024-07-01T12:00:00Z W0701 12:00:00.000 1 run.py:1] hi")


def test_path_hint_is_the_plain_one():
    """Worked out once per file name and directory, as every pattern on the whole
    path decides it."""
    paths = [*PATHS, "jobs/1/x.log", "a/jobs/b/jobs/c/x.log", "jobs/7/", "jobs//x.log",
             "jobs/7/sub/x.log", "x/jobs/7/x.log\n", "jobs/7\n/x.log", "jobs/7/\n",
             "myjobs/7/x.log", "jobs/7/slurm-7.out", "jobs/7/kern.log", "jobs/7/sacct.txt",
             "jobs/7/train_rank0.log", "jobs/jobs", "", ".", "/", "kern.log/",
             "x/slurm-1_2.out.gz", "hosts/n1/gpus.csv", "hosts/n1/selinux.log"]
    for path in paths:
        assert S.path_hint(path) == plain_path_hint(path), path
