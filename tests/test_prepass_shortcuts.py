"""The driver's pre-parse shortcuts equal what they stand for: each is checked against
the plain computation it replaces, on a table of tricky inputs and on the bundled
sample's real paths and lines (the zone decision and the pre-pass must not change by a
byte: ``tests/test_tzinfer.py`` checks their results, this file their parts)."""

from __future__ import annotations

import gzip

import pytest

from faultline.pipeline.discover import discover
from faultline.pipeline.fileparse import context_from_path, path_job_id
from faultline.pipeline.parsers.joblog_lines import NCCL_PREFIX_RE
from faultline.pipeline.prepass import corpus_facts, nccl_prefix_hosts
from faultline.pipeline.sniff import path_hint, path_hints
from faultline.pipeline.text import decode, head_lines, split_lines, tail_lines
from faultline.pipeline.tzevidence import decide_zone, gather

TRICKY_PATHS = [
    "jobs/1214431/node0003.log", "/c/jobs/1214431/node0003.log.gz", "jobs/7/train_rank0.log",
    "jobs/7/sacct.txt", "jobs/7/kern.log", "jobs/7/slurm-7.out", "jobs/7/jobs",
    "jobs/7/", "jobs//x.log", "jobs/7/sub/x.log", "x/jobs/7/x.log\n", "myjobs/7/x.log",
    "hosts/node1/kern.log", "hosts/node1/kern.log.1.gz", "hosts/node1/dmesg",
    "hosts/node1/sel.txt", "hosts/node1/selinux.log", "hosts/node1/gpus.csv",
    "hosts/node1/gpu.csv.gz", "hosts/node1/gpus.csvx", "hosts.csv", "a/hosts.csv.gz",
    "slurm/sacct.txt", "slurm/slurmctld.log", "slurm/slurmd.log", "slurm/slurmdbd.log",
    "slurm/sinfo.txt", "slurm/scontrol_show_nodes.txt", "slurm-123.out", "x/slurm-1_2.out.gz",
    "slurm-x.out", "train.log", "sacct", "kern.log/", "kern.log\n", "a/b/messages-20241101",
    "", ".", "/", "sacct/x.log", "train/x.log", "jobs/1/x/../y.log",
]


def _sample_paths(repo_root) -> list[str]:
    return list(discover([repo_root / "fixtures" / "sample" / "corpus"]))


@pytest.mark.parametrize("prefix", ["", "/data/corpus/"])
def test_path_hints_are_path_hint(prefix, repo_root):
    paths = [prefix + p for p in TRICKY_PATHS] + _sample_paths(repo_root)
    assert path_hints(paths) == [path_hint(p) for p in paths]
    # one name seen first under jobs/, then elsewhere, and the other way round
    again = ["jobs/1/kern.log", "hosts/n/kern.log", "hosts/n/x.log", "jobs/2/x.log"]
    assert path_hints(again) == ["job", "kernel", None, "job"]


def test_path_job_id_is_the_contexts(repo_root):
    paths = [*TRICKY_PATHS, "a/jobs/b/jobs/c/x.log", "jobs/5/slurm-9.out", "x/slurm-9.out",
             "jobs/jobs", "jobs/5/jobs", "/jobs/5/x", "jobs/5"]
    paths += _sample_paths(repo_root)
    assert [path_job_id(p) for p in paths] == [context_from_path(p, "UTC").job_id
                                               for p in paths]


CHUNKS = [b"", b"\n", b"\n\n", b"a", b"a\n", b"a\nb", b"a\r\nb\r\n", b"a\rb\n", b"\r\n\r",
          b"caf\xc3", b"caf\xc3\n\xa9x\n", b"\xe2\x82\n\xac", b"x\xff\ny\n", b"1\n2\n3\n4\n5\n6",
          b"1\n2\n3\n4\n5\n6\n", b"\n".join(b"line %d" % i for i in range(100))]


@pytest.mark.parametrize("data", CHUNKS)
@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_head_and_tail_lines_are_split_lines(data, n):
    assert head_lines(data, n) == split_lines(decode(data))[:n]
    assert tail_lines(data, n) == split_lines(decode(data))[1:][-n:]


def test_head_and_tail_lines_on_real_files(repo_root):
    for path in _sample_paths(repo_root)[::7]:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        for cut in (data[:4096], data[-4096:], data):
            assert head_lines(cut, 40) == split_lines(decode(cut))[:40], path
            assert tail_lines(cut, 40) == split_lines(decode(cut))[1:][-40:], path


def _hosts_one_by_one(lines: list[str]) -> set[str]:
    return {m.group(1) for line in lines if (m := NCCL_PREFIX_RE.search(line, 0, 400))}


NCCL_LINES = [
    "2024-12-31T07:36:30.982391Z node0005:314815:314875 [0] NCCL INFO Bootstrap : Using eth0",
    "node0006:314815:314875 [0] NCCL INFO Init COMPLETE",  # the host at the line's start
    "  12: gpu-a.b_c:1:2 [7] NCCL INFO x",  # srun --label
    "2024-01-01 10:00:00,123 x\tgpu-tab:1:2 [0] NCCL INFO after a tab",
    "2024-01-01T10:00:00Z 0042:1:2 [0] NCCL INFO a digit first",
    "2024-01-01T10:00:00Z first:1:2 [0] second:3:4 [1] NCCL INFO two prefixes",
    "2024-01-01T10:00:00Z" + " " * 390 + "late:1:2 [0] NCCL INFO past 400 characters",
    "2024-01-01T10:00:00Z" + " " * 370 + "edge:1:2 [0] NCCL INFO ends before 400",
    "2024-01-01T10:00:00Z\x1fsep:1:2 [0] NCCL INFO unit separator: Python's \\s only",
    "2024-01-01T10:00:00Z\u3000ideo:1:2 [0] NCCL INFO ideographic space",
    "2024-01-01T10:00:00Z nöde:1:2 [0] NCCL INFO non-ASCII host",
    "2024-01-01T10:00:00Z ünicode-after:1:2 [0] NCCL INFO x", "2024-01-01T10:00:00Z héllo",
    "2024-01-01T10:00:00Z node:1:2 [x] NCCL INFO no device number", "NCCL INFO bare", "",
    "2024-01-01T10:00:00Z node\u0661:1:2 [0] NCCL INFO Arabic-Indic digit",
    "2024-01-01T10:00:00Z host:\u0661:2 [0] NCCL INFO Arabic-Indic pid",
]


@pytest.mark.parametrize("lines", [NCCL_LINES, NCCL_LINES[:3], [], [NCCL_LINES[9]]])
def test_nccl_prefix_hosts_are_the_searchs(lines):
    assert nccl_prefix_hosts(lines) == _hosts_one_by_one(lines)


def test_nccl_prefix_hosts_on_real_lines(repo_root):
    lines = []
    for path in _sample_paths(repo_root):
        if path_hint(path) == "job":
            with open(path, "rb") as f:
                data = f.read()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            lines += decode(data).splitlines()
    found = nccl_prefix_hosts(lines)
    assert found and found == _hosts_one_by_one(lines)


def test_shared_hints_decide_alike(repo_root):
    paths = _sample_paths(repo_root)
    hints = path_hints(paths)
    assert gather(paths, hints) == gather(paths)
    zone = decide_zone(paths, None, hints=hints)
    assert zone == decide_zone(paths, None)
    assert corpus_facts(paths, zone.zone, hints) == corpus_facts(paths, zone.zone)
