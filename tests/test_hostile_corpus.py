"""A hostile corpus through the real ``faultline ingest``: the bundled sample plus every
kind of damage a real log collection shows, and things that happen to files while the
run goes on.

Each damaged file must end up flagged (``files.problem``) or its lines rejected with a
reason; nothing may crash; every file's lines must add up; and the untouched part of the
corpus must give exactly what a clean ingest of the sample gives (same events, same
interruptions). The damage:

=====================  ==============================================================
corrupt gzip           garbage after the gzip magic
truncated gzip         a valid gzip cut in half: the readable prefix is ingested
huge line              50 MB without a newline: cut to 64 KiB, memory stays bounded
binary                 an ELF header and random bytes
empty                  0 bytes, and a lone newline
vanishes               deleted between discovery and read
grows                  appended to between discovery and read, and again after it
unreadable             chmod 000 (tests run as root, where that blocks nothing, so the
                       read is refused the way the kernel refuses a non-root reader)
symlinks               to a file outside the corpus; a directory link to its parent;
                       a file link loop a -> b -> a
clock skew             one host's kernel log two hours ahead
duplicate              one kernel log under a second name
far future / past      lines stamped 2999 and 1970 (kernel, slurmctld, sacct)
=====================  ==============================================================
"""

from __future__ import annotations

import builtins
import datetime as dt
import errno
import gzip
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline import fileread, run, transforms
from faultline.pipeline.fileparse import UNKNOWN_REJECT_SAMPLE
from faultline.pipeline.inflate import MAX_LINE_BYTES, cap_lines, gunzip
from faultline.pipeline.parsers import slurmctld
from faultline.pipeline.parsers.slurmctld import MAX_LINE_HOSTS
from faultline.pipeline.records import ParseContext
from faultline.pipeline.text import count_lines
from faultline.pipeline.timeutil import OUT_OF_RANGE

SUMMARY = re.compile(r"^ingested (\d+) files \(\d+ new or changed\), (\d+) lines, (\d+) events, "
                     r"(\d+) interruptions, (\d+) rejects in [\d.]+ s(?: \(discover .*\))?$", re.M)
HUGE = 50 * 1024 * 1024
SKEW = dt.timedelta(hours=2)
SKEWED = ("hosts/node0013/kern.log", "hosts/node0013/kern.log.1")
DUPLICATE = ("hosts/node0016/kern.log", "hosts/node0016/kern.log.copy")
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, GPU has fallen off the bus."

# relative path -> what its files row must say: (problem, lines) where None means
# "no problem" and lines=-1 "count the bytes on disk"
FLAGGED = {
    "hosts/node0001/kern.log.3.gz": ("corrupt gzip", 0),
    "hosts/node0002/kern.log.2.gz": ("truncated gzip", "prefix"),
    "hosts/node0003/kern.log.huge": (f"1 line over {MAX_LINE_BYTES} bytes cut", 1),
    "hosts/node0007/kern.log.2": ("unreadable: Permission denied", 0),
    "slurm/sacct-archive.txt": ("unreadable: No such file or directory", 0),
    "hosts/node0005/kern.log.empty": (None, 0),
    "hosts/node0005/kern.log.blank": (None, 1),
}
GROWS = "jobs/1214274/node0099.log"


@dataclass
class Ingested:
    corpus: Path
    db: Path
    output: str
    read: dict[str, bytes]  # bytes the reader returned for files changed under it

    def rel(self, path: str) -> str:
        return path.removeprefix(str(self.corpus) + "/")

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            return con.execute(sql, params or []).fetchall()


def ingest_cli(corpus: Path, db: Path, *extra: str) -> str:
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db), *extra])
    assert result.exit_code == 0, result.output
    return result.output


def copy_sample(repo_root: Path, dest: Path) -> Path:
    shutil.copytree(repo_root / "fixtures" / "sample" / "corpus", dest)
    return dest


# --- building the damage ---------------------------------------------------------------------

def kernel_lines(host: str, day: str, n: int) -> bytes:
    """Routine kernel lines of ``host`` on ``day`` (``Mon DD``), one Xid early on."""
    out = []
    for i in range(n):
        msg = XID79 if i == n // 10 else f"usb 1-1: new high-speed USB device number {i}"
        out.append(f"{day} 03:{i // 60 % 60:02d}:{i % 60:02d} {host} kernel: {msg}\n")
    return "".join(out).encode()


def skew_rfc3339(data: bytes, by: dt.timedelta) -> bytes:
    """Every line's RFC 3339 stamp moved by ``by``, written as before."""
    def shift(m: re.Match[bytes]) -> bytes:
        return (dt.datetime.fromisoformat(m.group(0).decode()) + by).isoformat().encode()
    return re.sub(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", shift, data,
                  flags=re.M)


def damage(corpus: Path, outside: Path) -> None:
    """Everything in the module docstring that is in the files themselves."""
    rng = random.Random(7)
    for d in ("hosts/node0001", "hosts/node0002", "hosts/node0003", "hosts/node0004",
              "hosts/node0005", "hosts/node0006", "hosts/node0007", "hosts/node0009",
              "slurm", GROWS.rsplit("/", 1)[0]):
        (corpus / d).mkdir(parents=True, exist_ok=True)
    (corpus / "hosts/node0001/kern.log.3.gz").write_bytes(
        b"\x1f\x8b\x08\x00" + rng.randbytes(4096))
    packed = gzip.compress(kernel_lines("node0002", "Dec 20", 4000), mtime=0)
    (corpus / "hosts/node0002/kern.log.2.gz").write_bytes(packed[:len(packed) // 2])
    with (corpus / "hosts/node0003/kern.log.huge").open("wb") as f:
        f.write(b"\x01\x02 not a log line ")
        for _ in range(HUGE // (1 << 20)):
            f.write(b"A" * (1 << 20))
    (corpus / "hosts/node0004/core.bin").write_bytes(
        b"\x7fELF\x02\x01\x01\x00" + bytes(8) + rng.randbytes(64 * 1024))
    (corpus / "hosts/node0005/kern.log.empty").write_bytes(b"")
    (corpus / "hosts/node0005/kern.log.blank").write_bytes(b"\n")
    (corpus / "slurm/sacct-archive.txt").write_bytes(
        (corpus / "slurm/sacct.txt").read_bytes()[:200])  # vanishes after discovery
    (corpus / GROWS).write_bytes(b"2024-12-31T08:00:00.000001Z starting\n")
    unreadable = corpus / "hosts/node0007/kern.log.2"
    unreadable.write_bytes(kernel_lines("node0007", "Dec 20", 10))
    unreadable.chmod(0)
    (outside / "secret.log").write_bytes(kernel_lines("node0006", "Dec 30", 10))
    links = corpus / "hosts/node0006"
    (links / "outside.log").symlink_to(outside / "secret.log")
    (links / "loop").symlink_to("..")
    (links / "a.log").symlink_to("b.log")
    (links / "b.log").symlink_to("a.log")
    for rel in SKEWED:
        skewed = corpus / rel
        skewed.write_bytes(skew_rfc3339(skewed.read_bytes(), SKEW))
    shutil.copyfile(corpus / DUPLICATE[0], corpus / DUPLICATE[1])
    far = [f"{year}-12-30T10:00:00.000000+00:00 node0009 kernel: {XID79}"
           for year in (2999, 1970, 2999)]
    (corpus / "hosts/node0009/kern.log.far").write_text("\n".join(far) + "\n")
    (corpus / "slurm/slurmctld.log.far").write_text(
        "[2999-01-01T00:00:00.000] error: Nodes node0009 not responding, setting DOWN\n"
        "[1970-01-01T00:00:01.000] error: Nodes node0009 not responding, setting DOWN\n")
    (corpus / "slurm/sacct-far.txt").write_text(
        "JobID|JobName|User|State|Start|End|NNodes|NodeList\n"
        "9|clock-test|ops|FAILED|2999-01-01T00:00:00|2999-01-01T01:00:00|1|node0009\n")


class LiveFilesystem:
    """What happens to files while ingest runs: one vanishes and one grows between
    discovery and read, the grown one grows again while it is read (the bytes read are
    what gets recorded), and a mode-000 file is refused as the kernel refuses a
    non-root reader (root reads it anyway)."""

    def __init__(self, corpus: Path) -> None:
        self.vanish = str(corpus / "slurm/sacct-archive.txt")
        self.grow = str(corpus / GROWS)
        self.read: dict[str, bytes] = {}
        self._discover = run.discover
        self._read_local = fileread._read_local

    def discover(self, roots, exclude=(), skipped=None):
        paths = list(self._discover(roots, exclude, skipped))
        assert self.vanish in paths and self.grow in paths
        os.remove(self.vanish)
        with open(self.grow, "ab") as f:
            f.write(b"2024-12-31T08:00:01.000001Z NCCL WARN grew after discovery\n")
        return iter(paths)

    def read_local(self, path: str, cap: int) -> tuple[bytes, float]:
        """``fileread._read_local``, as the world around it behaves."""
        if os.path.exists(path) and os.stat(path).st_mode & 0o444 == 0:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        data, mtime = self._read_local(path, cap)
        if path == self.grow:
            self.read[path] = data
            with builtins.open(path, "ab") as g:
                g.write(b"2024-12-31T08:00:02.000001Z written while the file was read\n")
        return data, mtime


@pytest.fixture(scope="module")
def clean(tmp_path_factory, repo_root) -> Ingested:
    root = tmp_path_factory.mktemp("clean")
    corpus = copy_sample(repo_root, root / "corpus")
    db = root / "clean.duckdb"
    return Ingested(corpus, db, ingest_cli(corpus, db), {})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, repo_root) -> Ingested:
    root = tmp_path_factory.mktemp("hostile")
    corpus = copy_sample(repo_root, root / "corpus")
    outside = root / "outside"
    outside.mkdir()
    damage(corpus, outside)
    live = LiveFilesystem(corpus)
    db = root / "hostile.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run, "discover", live.discover)
        mp.setattr(fileread, "_read_local", live.read_local)
        output = ingest_cli(corpus, db)
    assert live.read, "the reader never opened the growing file"
    return Ingested(corpus, db, output, {os.path.relpath(p, corpus): d
                                         for p, d in live.read.items()})


# --- the run as a whole -------------------------------------------------------------------------

def test_ingest_exits_0_with_a_summary_line(hostile):
    m = SUMMARY.search(hostile.output)
    assert m, hostile.output
    files, lines, events, interruptions, rejects = (int(x) for x in m.groups())
    assert (files, lines, events, rejects) == hostile.query(
        "SELECT (SELECT count(*) FROM files), (SELECT sum(lines) FROM files), "
        "(SELECT count(*) FROM events), (SELECT count(*) FROM rejects)")[0]
    assert interruptions == 26


def test_every_file_accounts_for_every_line(hostile):
    rows = hostile.query("SELECT path, lines, routine_lines, event_lines, reject_lines "
                         "FROM files")
    for path, lines, routine, ev, rej in rows:
        assert lines == routine + ev + rej and min(routine, ev, rej) >= 0, path
    bad = hostile.query("""
        SELECT f.path FROM files f
        LEFT JOIN (SELECT path, count(DISTINCT line_no) n, max(line_no) hi FROM rejects
                   GROUP BY path) r ON r.path = f.path
        LEFT JOIN (SELECT path, max(line_end) hi, min(line_no) lo FROM events
                   GROUP BY path) e ON e.path = f.path
        WHERE (f.source <> 'unknown' AND coalesce(r.n, 0) <> f.reject_lines)
           OR (f.source = 'unknown' AND coalesce(r.n, 0) > f.reject_lines)
           OR coalesce(r.hi, 0) > f.lines
           OR coalesce(e.hi, 0) > f.lines OR coalesce(e.lo, 1) < 1
    """)
    assert bad == []
    assert hostile.query("SELECT count(*) FROM rejects WHERE trim(reason) = ''") == [(0,)]
    assert hostile.query("SELECT max(length(raw)) FROM rejects")[0][0] <= 512


# --- each kind of damage -------------------------------------------------------------------------

def _files(ing: Ingested) -> dict[str, tuple]:
    """relative path -> (problem, lines, source, duplicate_of (relative), bytes, sha256)"""
    return {ing.rel(p): (problem, lines, source, dup and ing.rel(dup), nbytes, sha)
            for p, problem, lines, source, dup, nbytes, sha in ing.query(
                "SELECT path, problem, lines, source, duplicate_of, bytes, sha256 FROM files")}


@pytest.mark.parametrize("rel", sorted(FLAGGED))
def test_damaged_file_is_flagged(hostile, rel):
    problem, lines = FLAGGED[rel]
    got_problem, got_lines, *_ = _files(hostile)[rel]
    assert got_problem == problem
    if lines == "prefix":
        readable, why = gunzip((hostile.corpus / rel).read_bytes())
        assert why == "truncated gzip" and got_lines == count_lines(readable) > 1000
    else:
        assert got_lines == lines


def test_truncated_gzip_keeps_its_readable_events(hostile):
    rel = "hosts/node0002/kern.log.2.gz"
    rows = hostile.query("SELECT kind, host, xid FROM events WHERE path = ?",
                         [str(hostile.corpus / rel)])
    assert rows == [("xid", "node0002", 79)]


def test_huge_line_is_one_reject_with_its_raw_cut(hostile):
    rel = "hosts/node0003/kern.log.huge"
    rows = hostile.query("SELECT line_no, reason, length(raw) FROM rejects WHERE path = ?",
                         [str(hostile.corpus / rel)])
    assert len(rows) == 1
    line_no, reason, raw_len = rows[0]
    assert line_no == 1 and reason in ("unrecognized kernel line", "unrecognized file format")
    assert raw_len == 512
    assert _files(hostile)[rel][4] == HUGE + 18  # bytes on disk, not the cut length


def test_binary_file_is_rejected_line_by_line(hostile):
    """Every line counts as rejected; ``rejects`` keeps the first lines as a sample."""
    _problem, lines, source, *_ = _files(hostile)["hosts/node0004/core.bin"]
    path = str(hostile.corpus / "hosts/node0004/core.bin")
    rejected = hostile.query("SELECT count(DISTINCT line_no), max(line_no), min(reason), "
                             "max(reason) FROM rejects WHERE path = ?", [path])[0]
    (reject_lines,), = hostile.query("SELECT reject_lines FROM files WHERE path = ?", [path])
    assert source == "unknown" and lines > 100
    assert reject_lines == lines
    assert rejected == (UNKNOWN_REJECT_SAMPLE, UNKNOWN_REJECT_SAMPLE,
                        "unrecognized file format", "unrecognized file format")


def test_a_file_that_grew_is_recorded_as_read(hostile):
    _problem, lines, _source, _dup, nbytes, sha = _files(hostile)[GROWS]
    data = hostile.read[GROWS]
    # the pre-pass may read the file's head first (NCCL host names): each read grows it,
    # and what is recorded is exactly what the parse read, never the disk's later state
    assert b"grew after discovery" in data
    assert (hostile.corpus / GROWS).read_bytes().startswith(data)
    assert (nbytes, sha, lines) == (len(data), hashlib.sha256(data).hexdigest(),
                                    data.count(b"\n"))
    assert (hostile.corpus / GROWS).stat().st_size > nbytes  # the disk moved on


def test_symlinks_out_of_the_corpus_and_loops_are_not_followed(hostile):
    """Not read, and not lost either: each link gets a files row saying why."""
    files = _files(hostile)
    read = {p for p, row in files.items() if row[0] is None or row[1]}
    assert not {p for p in read if p.startswith("hosts/node0006/")} - {
        "hosts/node0006/kern.log", "hosts/node0006/kern.log.1", "hosts/node0006/sel.txt",
        "hosts/node0006/gpus.csv", "hosts/node0006/dmesg.txt"}
    expected = {
        "hosts/node0006/outside.log": "symlink to outside the corpus not followed",
        "hosts/node0006/loop": "symlinked directory not followed",
        "hosts/node0006/a.log": "broken symlink or symlink loop",
        "hosts/node0006/b.log": "broken symlink or symlink loop",
    }
    for rel, why in expected.items():
        problem, lines, _source, _dup, nbytes, _sha = files[rel]
        assert (problem, lines, nbytes) == (why, 0, 0), rel
    assert not [p for p in files if "/loop/" in p]
    secret = hostile.query("SELECT count(*) FROM events WHERE path LIKE '%secret%' "
                           "OR path LIKE '%outside%'")
    assert secret == [(0,)]
    assert "files could not be read whole or were not followed" in hostile.output


def test_duplicate_keeps_one_copy_of_its_events(hostile):
    original, copy = (str(hostile.corpus / p) for p in DUPLICATE)
    files = _files(hostile)
    assert files[DUPLICATE[1]][3] == DUPLICATE[0] and files[DUPLICATE[0]][3] is None
    # files of no bytes (empty, unreadable, vanished) are no one's duplicates
    assert all(dup is None for _p, _n, _s, dup, nbytes, _h in files.values() if nbytes == 0)
    counts = dict(hostile.query("SELECT path, count(*) FROM events WHERE path IN (?, ?) "
                                "GROUP BY path", [original, copy]))
    assert counts.get(copy, 0) == 0 and counts[original] > 0


def test_far_future_and_far_past_times_are_rejected(hostile):
    reasons = hostile.query(
        "SELECT regexp_extract(path, '[^/]+$'), line_no, reason FROM rejects "
        "WHERE path LIKE '%.far' ORDER BY ALL")
    assert reasons == [("kern.log.far", n, OUT_OF_RANGE) for n in (1, 2, 3)] + [
        ("slurmctld.log.far", n, OUT_OF_RANGE) for n in (1, 2)]
    # a job record whose times are out of range keeps the record, without the times
    far_job = hostile.query("SELECT ts, ts_quality, attrs->>'start', attrs->>'end' "
                            "FROM events WHERE kind = 'job_record' AND job_id = '9'")
    assert far_job == [(None, "untimed", None, None)]
    assert hostile.query("SELECT count(*) FROM events WHERE ts < '2000-01-01' "
                         "OR ts >= '2100-01-01'") == [(0,)]


# --- the untouched part is what a clean ingest gives ---------------------------------------------

def _events(ing: Ingested, exclude: tuple[str, ...] = ()) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for path, *row in ing.query("SELECT path, event_id, ts, ts_quality, host, kind, xid, "
                                "gpu_index, gpu_serial, device, job_id, line_no, line_end "
                                "FROM events"):
        rel = ing.rel(path)
        if rel not in exclude:
            out.setdefault(rel, set()).add(tuple(row))
    return out


@pytest.mark.slow
def test_the_damaged_database_passes_the_data_quality_suites(hostile):
    """Damage is recorded, not stored as broken rows: every expectation still holds."""
    result = CliRunner().invoke(app, ["check", "--db", str(hostile.db)])
    assert result.exit_code == 0, result.output
    assert "all passed" in result.output


def test_untouched_files_give_the_events_of_a_clean_ingest(clean, hostile):
    want = _events(clean, exclude=SKEWED)
    got = _events(hostile)
    assert {p: got.get(p) for p in want} == want
    clean_files = {p: row for p, row in _files(clean).items() if p not in SKEWED}
    hostile_files = _files(hostile)
    for rel, row in clean_files.items():
        assert hostile_files[rel][:4] == row[:4], rel  # problem, lines, source, dup


def test_interruptions_survive_the_damage(clean, hostile):
    """Same interruptions; only those whose evidence sits on the skewed host may be
    explained differently (its events now lie two hours after the failure)."""
    sql = ("SELECT interruption_id, job_id, failed_at, planned, component, culprit_host "
           "FROM interruptions ORDER BY 1")
    before, after = clean.query(sql), hostile.query(sql)
    assert [r[:4] for r in before] == [r[:4] for r in after]
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all("node0013" in (b[5], a[5]) for b, a in changed), changed
    assert len(changed) <= 2


def test_skewed_host_keeps_its_own_clock(clean, hostile):
    q = ("SELECT path, line_no, kind, ts, ts_quality FROM events WHERE host = 'node0013' "
         "AND source = 'kernel' ORDER BY ALL")
    before, after = clean.query(q), hostile.query(q)
    assert len(before) > 5 and len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        assert (clean.rel(b[0]), *b[1:3], b[4]) == (hostile.rel(a[0]), *a[1:3], a[4])
        assert a[3] - b[3] == SKEW


# --- pieces ------------------------------------------------------------------------------------

_PEAK = """
import os, re, sys
from faultline.pipeline.fileparse import parse_batch
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.transforms import _read_all

def peak_kib():
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1])

small, huge = sys.argv[1], sys.argv[2:]
parse_batch(_read_all([small]), IngestSettings(year=2024))  # imports and first-use costs
before = peak_kib()
for path in huge:
    pf = parse_batch(_read_all([path]), IngestSettings(year=2024))
    assert pf.files.num_rows == 1 and pf.files["lines"][0].as_py() == 1
print((peak_kib() - before) // 1024)
"""


def test_a_huge_line_costs_about_its_size_in_memory(tmp_path):
    """50 MB without a newline, as a kernel, job and trainer log (their parsers copy
    lines into polars and into messages): the peak grows by about the bytes read, not
    by many copies of them. VmHWM, as ru_maxrss survives exec."""
    huge = tmp_path / "hosts" / "node0001" / "kern.log"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as f:
        f.write(b"2024-12-30 10:00:00,000 ERROR NCCL WARN Traceback step=1 loss=2 ")
        for _ in range(HUGE // (1 << 20)):
            f.write(b"A" * (1 << 20))
    paths = [huge]
    for rel in ("jobs/7/node0001.log", "jobs/7/train.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(huge, tmp_path / rel)
        paths.append(tmp_path / rel)
    small = tmp_path / "jobs" / "7" / "node0002.log"
    small.write_bytes(b"2024-12-30T10:00:00.000001Z hello\n")
    out = subprocess.run([sys.executable, "-c", _PEAK, str(small), *map(str, paths)],
                         capture_output=True, text=True, check=True)
    grew_mib = int(out.stdout.strip().splitlines()[-1])
    assert grew_mib < 2 * HUGE / 2**20, f"peak grew by {grew_mib} MiB for a 50 MiB line"


def test_a_line_naming_more_hosts_than_a_cluster_has_gives_one_event():
    """``n[0-999999]`` would be a million events of one line; past MAX_LINE_HOSTS hosts
    it is one event without a host (the list stays in attrs as written)."""
    line = "[2024-12-30T10:00:00.000] error: Nodes n[0-{}] not responding, setting DOWN"
    ctx = ParseContext("slurmctld.log")
    fp = slurmctld.parse(line.format(MAX_LINE_HOSTS), ctx)  # one host too many
    assert [(e.host, e.attrs["nodelist"]) for e in fp.events] == [
        (None, f"n[0-{MAX_LINE_HOSTS}]")]
    assert [e.host for e in slurmctld.parse(line.format(2), ctx).events] == ["n0", "n1", "n2"]


def test_gunzip_keeps_what_is_readable_and_says_what_went_wrong():
    body = b"".join(b"line %d\n" % i for i in range(50_000))
    packed = gzip.compress(body, mtime=0)
    assert gunzip(packed) == (body, None)
    assert gunzip(packed + gzip.compress(b"more\n")) == (body + b"more\n", None)
    cut, why = gunzip(packed[:len(packed) // 2])
    assert why == "truncated gzip" and body.startswith(cut) and len(cut) > len(body) // 3
    assert gunzip(packed[:5]) == (b"", "truncated gzip")
    assert gunzip(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)[1] == "corrupt gzip"
    assert gunzip(packed + b"garbage") == (body, "trailing data after gzip")
    bomb, why = gunzip(gzip.compress(bytes(8 << 20)), limit=1 << 20)
    assert (len(bomb), why) == (1 << 20, f"gzip content over {1 << 20} bytes not read")


@pytest.mark.parametrize(("data", "limit", "want", "cut"), [
    (b"", 4, b"", 0),
    (b"abcd\nabcd", 4, b"abcd\nabcd", 0),
    (b"abcde", 4, b"abcd", 1),
    (b"abcdefgh\nab\r\nabcdefgh\r\n", 4, b"abcd\nab\r\nabcd\n", 2),
    (b"\n" * 9, 4, b"\n" * 9, 0),
    (b"ab\n" * 5 + b"x" * 30, 4, b"ab\n" * 5 + b"xxxx", 1),
])
def test_cap_lines(data, limit, want, cut):
    assert cap_lines(data, limit) == (want, cut)
    assert count_lines(want) == count_lines(data)


# --- Beam multi-process -------------------------------------------------------------------------

TABLES = ("files", "events", "rejects", "attempts", "interruptions", "interruption_evidence")


def _dump(db: Path, corpus: Path) -> dict[str, list]:
    prefix = str(corpus) + "/"
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: sorted(str(r).replace(prefix, "") for r in
                          con.execute(f"SELECT * FROM {t}").fetchall())
                for t in TABLES}


@pytest.mark.slow
def test_two_workers_give_the_tables_of_one(tmp_path, repo_root):
    """The damage that is in the files (none changing under the run: those hooks live
    in the driver process only), on a slice of the sample with the skewed and the
    duplicated host: Beam's multi-process mode gives the rows one process gives."""
    sample = repo_root / "fixtures" / "sample" / "corpus"
    corpus = tmp_path / "corpus"
    shutil.copytree(sample / "slurm", corpus / "slurm")
    shutil.copy(sample / "hosts.csv", corpus / "hosts.csv")
    for host in ("node0002", "node0013", "node0016", "node0017"):
        shutil.copytree(sample / "hosts" / host, corpus / "hosts" / host)
    for job in sorted((sample / "jobs").iterdir())[:2]:
        shutil.copytree(job, corpus / "jobs" / job.name)
    outside = tmp_path / "outside"
    outside.mkdir()
    damage(corpus, outside)
    os.remove(corpus / "slurm/sacct-archive.txt")
    dumps = []
    for workers in (1, 2):
        db = tmp_path / f"w{workers}.duckdb"
        assert SUMMARY.search(ingest_cli(corpus, db, "--workers", str(workers)))
        dumps.append(_dump(db, corpus))
    assert dumps[0]["events"] and dumps[0]["rejects"] and dumps[0]["interruptions"]
    assert {t: len(v) for t, v in dumps[1].items()} == {t: len(v) for t, v in dumps[0].items()}
    assert dumps[1] == dumps[0]


def test_a_file_over_the_size_bound_is_cut_at_a_line_end(tmp_path):
    """A worker holds a file in memory whole: past the bound (1 GiB; 100 bytes here)
    the file is read up to its last line end before the bound, and says so."""
    path = tmp_path / "kern.log"
    line = b"2024-12-30T06:00:00.000000+00:00 node0001 kernel: routine line\n"
    path.write_bytes(line * 10)
    data, _mtime, problem = transforms.read_bytes(str(path), limit=100)
    assert data == line  # the second line would end past byte 100
    assert problem == f"file over 100 bytes: only its first {len(line)} bytes read"
    data, _mtime, problem = transforms.read_bytes(str(path), limit=len(line) * 10)
    assert (len(data), problem) == (len(line) * 10, None)
    no_newline = tmp_path / "blob.bin"
    no_newline.write_bytes(b"x" * 500)
    data, _mtime, problem = transforms.read_bytes(str(no_newline), limit=100)
    assert len(data) == 100 and "only its first 100 bytes" in problem
