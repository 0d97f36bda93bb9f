"""The driver's pre-parse shortcuts equal what they stand for: each is checked against
the plain computation it replaces, on a table of tricky inputs and on the bundled
sample's real paths and lines (the zone decision and the pre-pass must not change by a
byte: ``tests/test_tzinfer.py`` checks their results, this file their parts)."""

from __future__ import annotations

import gzip

import pytest

from faultline.pipeline.discover import discover
from faultline.pipeline.fileparse import context_from_path, path_job_id, path_job_ids
from faultline.pipeline.parsers.joblog_lines import NCCL_PREFIX_RE
from faultline.pipeline.prepass import corpus_facts, nccl_prefix_hosts
from faultline.pipeline.sniff import path_hint, path_hints
from faultline.pipeline.text import decode, head_lines, split_lines, tail_lines
from faultline.pipeline.tzevidence import _job_logs, decide_zone, gather

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
    "", ".", "/", "sacct/x.log", "train/x.log", "jobs/1/x/../y.log", "jobs/7\n/x.log",
    "jobs/7/\n",
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
    assert path_job_ids(paths) == [path_job_id(p) for p in paths]



@pytest.mark.parametrize("prefix", ["", "/data/corpus/"])
def test_job_logs_are_grouped_by_path_job_id(prefix, repo_root):
    """The zone decision's job logs, worked out once per directory, are those each
    path's own :func:`path_job_id` gives (a trainer's log left out)."""
    paths = [prefix + p for p in (*TRICKY_PATHS, "jobs/5/slurm-9.out", "jobs/5/x.log",
                                  "jobs/5/jobs", "jobs/5/.", "jobs/6/slurm-6.out")]
    paths += _sample_paths(repo_root)
    hints = path_hints(paths)
    want: dict[str, list[str]] = {}
    for p, h in zip(paths, hints, strict=True):
        if h == "job" and not p.rsplit("/", 1)[-1].startswith("train") and (
                job := path_job_id(p)):
            want.setdefault(job, []).append(p)
    assert _job_logs(paths, hints) == want
    assert len(want) > 3


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


OFFSET_LINES = [
    "2024-11-04T07:13:25.661407-08:00 host kernel: NVRM: Xid (PCI:0000:9b:00): 79",
    "2024-11-04T07:13:26.661407-08:00 host kernel: the same day and offset",
    "2024-11-04 07:13:27,5+0530 host kernel: space, comma, offset without a colon",
    "[2024-11-04T07:13:28.123456789+00:00] sched: nine digits",
    "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: dmesg --decode",
    "2024-02-30T12:00:00+01:00 host kernel: no such date",
    "2024-02-30T13:00:00+01:00 host kernel: no such date, again",
    "2024-06-30T24:00:00+01:00 x", "2024-06-30T12:60:00+01:00 x", "2024-06-30T12:00:60+01:00 x",
    "2024-06-30T12:00:00+24:00 x", "2024-06-30T12:00:00+23:59 x", "1969-12-31T23:59:59+01:00 x",
    "2150-01-01T00:00:00+01:00 x", "Nov  4 07:13:25 host kernel: RFC 3164", "",
    "2024-11-04T07:13:25.661407Z host kernel: a collector's Z: no offset",
    "2024-11-04T07:13:29-08:00 hôst kernel: non-ASCII after the stamp",
    "2024-11-04T07:13:\u0663\u0660-08:00 host kernel: Arabic-Indic seconds",
    "\u0662\u0660\u0662\u0664-11-04T07:13:30-08:00 host kernel: Arabic-Indic year",
]


def _offsets_one_by_one(chunks):
    """offsets_in as it read each line before the vectorized pass (parse_iso's reading
    of the stamp, read as UTC, less the offset)."""
    from zoneinfo import ZoneInfo

    from faultline.pipeline.timeutil import in_range, parse_iso
    from faultline.pipeline.tzinfer import Observation
    from faultline.pipeline.tzstamps import OFFSET_STAMP

    out = []
    for lines in chunks:
        out.append([])
        for line in lines:
            if not (m := OFFSET_STAMP.match(line)):
                continue
            sign = -1 if m.group(2)[0] == "-" else 1
            digits = m.group(2)[1:].replace(":", "")
            minutes = int(digits[:2]) * 60 + int(digits[2:])
            wall = parse_iso(m.group(1) + "Z", ZoneInfo("UTC"))
            if wall is None or minutes >= 24 * 60:
                continue
            at = wall[0] - sign * minutes * 60 * 1_000_000
            if in_range(at):
                out[-1].append(Observation(at, sign * minutes * 60, "offset"))
    return out


@pytest.mark.parametrize("chunks", [
    [OFFSET_LINES], [OFFSET_LINES[:3], [], OFFSET_LINES[3:12], OFFSET_LINES[12:]],
    [[], []], [OFFSET_LINES[-2:], OFFSET_LINES[:2]], [["no stamp"]],
])
def test_offsets_many_is_one_by_one(chunks):
    from faultline.pipeline.tzevidence import offsets_in
    from faultline.pipeline.tzstamps import offsets_many
    got = offsets_many(chunks)
    assert got == _offsets_one_by_one(chunks) == [offsets_in(c) for c in chunks]
    if chunks == [OFFSET_LINES]:  # the valid ones, the Arabic-Indic digits among them
        assert len(got[0]) == 9 and {o.offset_s for o in got[0]} == {-28800, 19800, 0, 86340}


PAIRED_LINES = [
    "2024-11-11T03:29:02.654989Z W1110 19:29:02.654989 184832 torch/distributed/run.py:793] x",
    "2024-11-11T03:29:22.654989Z gpu-051:184833:184893 [0] NCCL INFO Bootstrap : Using eth0",
    "2024-11-01T16:22:35.716505Z [2024-11-01 09:22:35] host:1:2 [0] NCCL WARN x",
    "2024-11-01T16:22:35.716505Z 2024-11-01 09:22:35,716 INFO x",
    "2024-11-01T16:22:35Z [rank3]:[W1101 09:22:35.716505 x",
    "2024-11-01T16:22:35Z [default3]:I1101 09:22:35.716505 x",
    "2024-11-01T16:22:35.716505Z  W1101 09:22:35 two spaces: no pair",
    "2024-11-01 16:22:35Z W1101 09:22:35 no T: no pair", "W1101 09:22:35 no collector",
    "2024-11-01T16:22:35.716505Z W1101 09:22:35.716505 ünicode after the stamps",
    "2024-11-01T16:22:35.716505Z W\u0661\u0661\u0660\u0661 09:22:35 Arabic-Indic month",
]


@pytest.mark.parametrize("chunks", [[PAIRED_LINES], [PAIRED_LINES[:4], [], PAIRED_LINES[4:]]])
def test_maybe_paired_keeps_what_pairs(chunks):
    from faultline.pipeline.tzevidence import paired_in
    from faultline.pipeline.tzstamps import maybe_paired
    kept = maybe_paired(chunks)
    assert [paired_in(k) for k in kept] == [paired_in(c) for c in chunks]
    flat = [ln for k in kept for ln in k]
    assert PAIRED_LINES[1] not in flat and PAIRED_LINES[-1] in flat  # not ASCII: kept
    assert len([ln for ln in flat if ln.isascii()]) == 5


def test_stamps_of_the_sample_read_alike(repo_root):
    from faultline.pipeline.tzevidence import _chunks, paired_in
    from faultline.pipeline.tzstamps import maybe_paired, offsets_many
    paths = _sample_paths(repo_root)
    chunks = [c for p, h in zip(paths, path_hints(paths), strict=True)
              if h in ("kernel", "job") for c in _chunks(p, tail=True)]
    found = offsets_many(chunks)
    assert any(found) and found == _offsets_one_by_one(chunks)
    assert [paired_in(k) for k in maybe_paired(chunks)] == [paired_in(c) for c in chunks]


def test_sealable_decides_each_directory_once(repo_root):
    """Sealable job directories, decided on a directory's first file, are those every
    path decides (a plain per-path loop, as it was)."""
    from faultline.pipeline import ingest_state

    paths = [*TRICKY_PATHS, "c/jobs/1/a.log", "c/jobs/1/b.log", "c/jobs/1/", "c/jobs/2/",
             "c/jobs/2/x.log", "c/jobs/3/x\n", "c/jobs/7\n/x.log", "c/jobs/1/sub/x.log"]
    paths += _sample_paths(repo_root)
    jobs = {j: (0, 10) for j in ("1", "2", "3", "7", "7\n", "1214431", "sub")}
    jobs.update({p.split("/jobs/")[1].split("/")[0]: (0, 10) for p in paths if "/jobs/" in p})
    window = (0, 10 + ingest_state.SEAL_AFTER_US + 1)
    plain: set[str] = set()
    for p in paths:
        m = ingest_state._JOB_DIR.match(p)
        if m is not None and (span := jobs.get(m.group(2))) is not None \
                and span[1] + ingest_state.SEAL_AFTER_US < window[1]:
            plain.add(m.group(1))
    got = ingest_state.sealable(paths, jobs, window)
    assert got == sorted(plain)
    assert "c/jobs/1" in got and len(got) > 3
