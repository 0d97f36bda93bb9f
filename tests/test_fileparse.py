"""Batch parsing: ``parse_batch`` over many files gives exactly the rows ``parse_file``
gives file by file, however the files are grouped; the shortcuts behind it (vectorized
selection across files, literal pre-checks, path caches) agree with the plain code."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pytest

from faultline.pipeline import fileparse, inflate
from faultline.pipeline.discover import discover
from faultline.pipeline.fileparse import context_from_path, parse_batch, parse_file
from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import joblog, kernel, kernel_messages, trainer
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.text import decode, split_lines

TABLES = ("files", "events", "rejects")
SETTINGS = (
    IngestSettings(),
    IngestSettings(tz="America/Los_Angeles"),
    IngestSettings(year=2023),
    IngestSettings(window=(1_735_000_000_000_000, 1_736_000_000_000_000)),
)


def _items(root: Path) -> list[tuple[str, bytes, float]]:
    items = []
    for path in discover([root]):
        p = Path(path)
        items.append((path, p.read_bytes(), p.stat().st_mtime))
    return items


def _rows(tables: list[pa.Table]) -> list[str]:
    rows = [repr(tuple(r.values())) for t in tables for r in t.to_pylist()]
    return sorted(rows)


def _per_file(items, settings) -> dict[str, list[str]]:
    parsed = [parse_file(p, d, settings, m) for p, d, m in items]
    return {t: _rows([getattr(x, t) for x in parsed]) for t in TABLES}


def _batched(items, settings, size: int) -> dict[str, list[str]]:
    parsed = [parse_batch(items[i:i + size], settings) for i in range(0, len(items), size)]
    for x in parsed:
        for t in TABLES:
            assert getattr(x, t).schema == getattr(parsed[0], t).schema
    return {t: _rows([getattr(x, t) for x in parsed]) for t in TABLES}


@pytest.fixture(scope="module")
def sample_items(repo_root) -> list[tuple[str, bytes, float]]:
    return _items(repo_root / "fixtures" / "sample" / "corpus")


@pytest.mark.parametrize("settings", SETTINGS, ids=["utc", "tz", "year", "window"])
def test_batch_gives_the_rows_of_each_file_alone_sample(sample_items, settings):
    want = _per_file(sample_items, settings)
    assert sum(len(v) for v in want.values()) > 10_000
    assert _batched(sample_items, settings, 256) == want


@pytest.mark.parametrize("settings", SETTINGS[:3], ids=["utc", "tz", "year"])
def test_batch_gives_the_rows_of_each_file_alone_peer_data(shared_dir, settings):
    items = _items(shared_dir / "peer-data")
    assert len(items) > 20
    want = _per_file(items, settings)
    assert _batched(items, settings, 256) == want
    assert _batched(items, settings, len(items)) == want


def test_how_files_are_grouped_does_not_matter(sample_items):
    settings = SETTINGS[0]
    want = _batched(sample_items, settings, len(sample_items))
    shuffled = list(sample_items)
    random.Random(7).shuffle(shuffled)
    for size in (3, 100):
        assert _batched(shuffled, settings, size) == want


def test_parsers_parse_many_equals_parse(sample_items):
    """Each batched parser, over every file of its source, against its own parse()."""
    by_source: dict[str, list[tuple[str, ParseContext]]] = {}
    for path, data, mtime in sample_items:
        f = fileparse._prepare((path, data, mtime), SETTINGS[0])
        raw = inflate.gunzip(data)[0] if f.compressed else data
        by_source.setdefault(f.source, []).append((decode(raw), f.ctx))
    for source, module in (("job", joblog), ("trainer", trainer), ("kernel", kernel)):
        files = by_source[source]
        assert len(files) > 2
        many = module.parse_many([(split_lines(text), ctx) for text, ctx in files])
        assert many == [module.parse(text, ctx) for text, ctx in files], source


def test_an_unreadable_item_keeps_its_problem():
    pf = parse_batch([("/x/jobs/1/h.log", b"", None, "unreadable: gone"),
                      ("/x/jobs/1/g.log", b"2024-07-01T12:00:00Z hello\n", None)],
                     IngestSettings())
    files = {r["path"]: r for r in pf.files.to_pylist()}
    assert files["/x/jobs/1/h.log"]["problem"] == "unreadable: gone"
    assert files["/x/jobs/1/h.log"]["lines"] == 0
    assert files["/x/jobs/1/g.log"]["problem"] is None
    assert files["/x/jobs/1/g.log"]["lines"] == 1


def test_trainer_times_stay_inside_their_file():
    """A file that opens with untimed lines does not inherit the previous file's time."""
    first = "2024-07-01 12:00:00,000 INFO step=1 loss=2.0\n" * 40
    second = ("Traceback (most recent call last):\n  File \"t.py\", line 1\n"
              "RuntimeError: boom\n" + "2024-07-01 13:00:00,000 INFO step=2 loss=1.0\n" * 40)
    ctxs = [ParseContext("/j/1/train.log"), ParseContext("/j/2/train.log")]
    many = trainer.parse_many([(split_lines(first), ctxs[0]), (split_lines(second), ctxs[1])])
    assert many == [trainer.parse(first, ctxs[0]), trainer.parse(second, ctxs[1])]
    tb = [e for e in many[1].events if e.kind == "traceback"]
    assert tb and tb[0].ts is None and tb[0].ts_quality == "untimed"


def test_python_and_polars_selection_agree(sample_items):
    files = [split_lines(d.decode("utf-8", "replace")) for p, d, _ in sample_items
             if "/jobs/" in p and not p.endswith(".gz")][:50]
    batch = LineBatch(files)
    assert batch.total > 1000
    for pattern in (joblog.CANDIDATE_RE, trainer.CANDIDATE_RE, kernel.SHAPE_PATTERN):
        assert (batch.match_indices(pattern) ==
                batch.match_indices(pattern, python_below=batch.total + 1))
        assert (batch.contains(pattern) ==
                batch.contains(pattern, python_below=batch.total + 1)).all()
    empty = LineBatch([[], []])
    assert empty.match_indices("x") == [[], []] and len(empty.contains("x")) == 0


def test_literal_needles():
    assert kernel_messages.literal_needles(r"Got completion from peer") == (
        "Got completion from peer",)
    assert kernel_messages.literal_needles(r"(?:a work|b work)\s*:?\s*-?\d+") == (
        "a work", "b work")
    assert kernel_messages.literal_needles(r"foo|\d+") is None  # an alternative has none
    assert kernel_messages.literal_needles(r"(?:foo|bar)?baz") == ("baz",)
    assert kernel_messages.literal_needles(r"(?:foo|bar)?\d") is None
    assert kernel_messages.literal_needles(r"(?i)checkpoint saved") is None


def test_rule_needles_hold_on_every_candidate_line(sample_items):
    """A job-log rule never matches a line that has none of its literals."""
    union = re.compile(joblog.CANDIDATE_RE)
    bodies = [joblog.line_info(ln).body for p, d, _ in sample_items if "/jobs/" in p
              for ln in split_lines(d.decode("utf-8", "replace")) if union.search(ln)]
    assert len(bodies) > 1000
    for _, _, rx, needles in joblog._RULE_CHECKS:
        if needles is None:
            continue
        for body in bodies:
            if rx.search(body):
                assert any(nd in body for nd in needles), (rx.pattern, body)


@pytest.mark.parametrize("path", [
    "/c/jobs/17/node1.log", "/c/jobs/17/train.log", "jobs/17/n.log.gz", "/c/hosts/n1/kern.log",
    "/c/jobs/17/jobs", "/c/jobs/hosts/x/y", "//c/hosts/n1/x", "./jobs/1/h.log", "/c/jobs/17/",
    "/c/hosts/n1/.", "hosts/n1", "/a/hosts/b/jobs/c/d.e.log", "/jobs/1/..", "x",
])
def test_context_from_path_reads_the_layout_like_purepath(path):
    parts = PurePosixPath(path).parts
    host = job_id = None
    if "jobs" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("jobs")
        if i + 1 < len(parts) - 1:
            job_id = parts[i + 1]
            stem = parts[-1].split(".")[0]
            host = None if stem.startswith("train") else stem
    elif "hosts" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("hosts")
        if i + 1 < len(parts) - 1:
            host = parts[i + 1]
    ctx = context_from_path(path, "UTC")
    assert (ctx.host, ctx.job_id) == (host, job_id)


@pytest.mark.parametrize("attrs", [
    {}, {"step": 3, "loss": 1.25}, {"loss": None, "step": 10**20}, {"b": [1, {"z": 1, "a": 2}]},
    {"nan": float("nan"), "inf": float("-inf")}, {"text": "é\n\"x\"\t\u2028"},
    {"when": dt.datetime(2024, 7, 1, tzinfo=dt.UTC)}, {"flag": True, "none": None},
    {3: "int key"},
])
def test_attrs_json_is_json_dumps(attrs):
    want = json.dumps(attrs, sort_keys=True, default=str) if attrs else None
    assert fileparse.attrs_json(attrs) == want


def _discover_with_os_walk(roots, exclude=()):
    """The reference: discover() as first written, with os.walk and a stat per file."""
    def inside(path, rs):
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in rs)
    real_roots = [os.path.realpath(r) for r in roots]
    skip = [os.path.abspath(e) for e in exclude]
    found = []
    for root in roots:
        root_abs = os.path.abspath(root)
        if os.path.isfile(root_abs):
            found.append(root_abs)
            continue
        for dirpath, dirnames, filenames in os.walk(root_abs, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not inside(os.path.join(dirpath, d), skip))
            for name in filenames:
                path = os.path.join(dirpath, name)
                if inside(path, skip) or any(path.startswith(s) for s in skip):
                    continue
                if os.path.islink(path):
                    target = os.path.realpath(path)
                    if not inside(target, real_roots) or not os.path.isfile(target):
                        continue
                elif not os.path.isfile(path):
                    continue
                found.append(path)
    return sorted(set(found))


def test_discover_finds_what_os_walk_finds(tmp_path, repo_root):
    c = tmp_path / "c"
    (c / "a" / "b").mkdir(parents=True)
    (c / "a" / "b" / "f.log").write_text("x\n")
    (c / "a" / "g.log").write_text("x\n")
    (c / "z.duckdb").write_text("")
    (c / "z.duckdb.wal").write_text("")
    (c / "staging").mkdir()
    (c / "staging" / "s.parquet").write_text("")
    outside = tmp_path / "outside.log"
    outside.write_text("x\n")
    (c / "link_in.log").symlink_to(c / "a" / "g.log")
    (c / "link_out.log").symlink_to(outside)
    (c / "broken.log").symlink_to(tmp_path / "nowhere")
    (c / "dirlink").symlink_to(c / "a", target_is_directory=True)
    os.mkfifo(c / "fifo")
    locked = c / "locked"
    locked.mkdir()
    (locked / "h.log").write_text("x\n")
    for roots, exclude in (([c], []), ([c], [c / "staging", c / "z.duckdb"]),
                           ([c / "a", c / "a" / "g.log", c], []),
                           ([repo_root / "fixtures" / "sample" / "corpus"], [])):
        assert list(discover(roots, exclude)) == _discover_with_os_walk(roots, exclude)


def test_clock_backwards_flags_object_events():
    """A kernel log's events (kept as objects, no columns) whose clock steps back by
    more than a second are flagged with the step; a step of less is not."""
    xid = ("{} node0000 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', "
           "name=<unknown>, GPU has fallen off the bus.\n")
    text = "".join(xid.format(t) for t in ("2025-01-02T06:00:10+00:00",
                                           "2025-01-02T06:00:00+00:00",
                                           "2025-01-02T06:00:09.5+00:00"))
    got = parse_file("hosts/node0000/kern.log", text.encode(), SETTINGS[0])
    attrs = [json.loads(a) if a else {} for a in got.events.column("attrs").to_pylist()]
    assert [a.get("clock_backwards_us") for a in attrs] == [None, 10_000_000, None]


# What syslog_year's search stood for: the first RFC 3164 head of the sniffed window,
# anywhere a line starts (``^`` with ``re.M``).
_HEAD_M = re.compile(r"^\[?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) *(\d{1,2}) ",
                     re.M)
_W = fileparse.SNIFF_BYTES
_SYSLOG = "Jul  1 12:00:00 node0001 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module"
_RFC3339 = "2025-01-02T06:00:10.123456+00:00 node0001 kernel: mlx5_core 0000:18:00.0: up"


@pytest.mark.parametrize("text", [
    _SYSLOG + "\n",
    _RFC3339 + "\n" + _SYSLOG.replace("Jul  1", "Mar 3") + "\n",  # a later line's
    "[Dec 31 23:59] ACPI: Early table checksum verification disabled\n",  # dmesg -H
    _RFC3339 + "\r\nFeb 28 23:59:59 node0001 kernel: x\r\n",  # after a CRLF line end
    _RFC3339 + " Jan 5 12:00:00\n",  # a month inside a line is no line's head
    "\rJan 5 12:00:00 h k: x\n" + _RFC3339 + "\rFeb 6 1 \n",  # \r opens no line
    _RFC3339 + "\u2028Jan 5 12:00:00 h k: x\n",  # nor a Unicode separator
    "x" * _W + "\nJan 1 00:00:00 h kernel: beyond the window\n",
    "x" * (_W - 7) + "\nJan 1 00:00:00 h kernel: its space is the window's end\n",
    "x" * (_W - 8) + "\nJan 1 00:00:00 h kernel: just inside\n",
    "",
    "Jan\n",
])
def test_syslog_year_takes_the_first_head_of_the_window(text):
    mtime = dt.datetime(2025, 2, 1, tzinfo=dt.UTC).timestamp()
    m = _HEAD_M.search(text[:_W])
    if m is None:
        want = None
    else:
        month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                 "Nov", "Dec"].index(m.group(1)) + 1
        want = 2025 if (month, int(m.group(2))) <= (2, 1) else 2024
    assert fileparse.syslog_year(text, IngestSettings(), mtime) == want
