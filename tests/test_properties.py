"""Property-based tests of every parser and of ``parse_file`` / ``parse_batch``.

Inputs are arbitrary text, arbitrary bytes, and above all *real* lines damaged the way
real collections damage them (see :mod:`mutations`): from the table-driven parser
tests, the bundled sample corpus and, read at test time, the real logs of
``../shared/peer-data``. Whatever the input:

- no exception escapes a parser;
- every line is accounted for: ``lines == routine + event_lines + reject_lines``,
  events stay inside the file, rejects carry a reason;
- what comes out fits the schemas (``schemas.tables``: types, nullability, closed
  vocabularies, minimum/maximum, int32 ranges);
- parsing is deterministic, the Python and polars paths agree, ``parse_many`` equals
  ``parse`` file by file, and ``parse_batch`` equals ``parse_file`` file by file.

Sizes come from the hypothesis profile (``tests/conftest.py``: ``ci`` by default,
derandomized; ``HYPOTHESIS_PROFILE=dev`` for a longer hunt). Each ``@example`` below is
an input that once broke a parser.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import test_parse_joblog
import test_parse_kernel
import test_parse_sel_inventory
import test_parse_slurm
import test_parse_trainer
from accounting import check_accounting
from hypothesis import example, given
from hypothesis import strategies as st
from mutations import mutated_file, mutated_line, stored, text_of

from faultline.pipeline import fileparse
from faultline.pipeline.discover import discover
from faultline.pipeline.fileparse import parse_batch, parse_file
from faultline.pipeline.inflate import cap_lines, gunzip
from faultline.pipeline.parsers import (
    hosts,
    inventory,
    joblog,
    kernel,
    kernel_columns,
    kernel_messages,
    sacct,
    sel,
    slurmctld,
    trainer,
)
from faultline.pipeline.records import RAW_LIMIT, FileParse, ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.text import count_lines, split_lines
from faultline.schemas.tables import EVENTS, FILES, REJECTS, Table

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# --- which parser reads what, and where its files live in a corpus --------------------------

PARSE: dict[str, Callable[[str, ParseContext], FileParse]] = {
    "kernel": kernel.parse, "sel": sel.parse, "inventory": inventory.parse,
    "job": joblog.parse, "trainer": trainer.parse, "sacct": sacct.parse,
    "slurmctld": slurmctld.parse, "hosts": hosts.parse,
}
MANY = {"kernel": kernel.parse_many, "job": joblog.parse_many, "trainer": trainer.parse_many}
PATHS = {
    "kernel": "/c/hosts/node0042/kern.log", "sel": "/c/hosts/node0042/sel.txt",
    "inventory": "/c/hosts/node0042/gpus.csv", "job": "/c/jobs/81234/node0042.log",
    "trainer": "/c/jobs/81234/train.log", "sacct": "/c/slurm/sacct.txt",
    "slurmctld": "/c/slurm/slurmctld.log", "hosts": "/c/hosts.csv",
}
HEADER_LED = ("sacct", "inventory", "hosts")
CONTEXTS = st.builds(
    lambda tz, year: (tz, year),
    st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]),
    st.sampled_from([None, 2024, 1970, 2999]),
)


def ctx_for(source: str, tz: str = "UTC", year: int | None = None) -> ParseContext:
    c = fileparse.context_from_path(PATHS[source], tz)
    return ParseContext(c.path, c.host, c.job_id, tz, year)


# --- real lines -----------------------------------------------------------------------------

def _test_table_lines() -> dict[str, list[str]]:
    """The real-format lines of the table-driven parser tests."""
    slurm, si = test_parse_slurm, test_parse_sel_inventory
    texts = {
        "sacct": [slurm.MINIMAL, slurm.IDS, slurm.MULTILINE, slurm.RUNS],
        "sel": [si.SEL_FILE], "inventory": [si.INVENTORY],
        "hosts": ["host,aliases,addresses\nnode0042,node0042.cluster.local;node0042-bmc,"
                  "10.1.2.42;10.2.2.42\nnode0043,n43 node0043.local,10.1.2.43\n"],
    }
    pools = {s: [ln for t in ts for ln in split_lines(t)] for s, ts in texts.items()}
    pools["kernel"] = list(test_parse_kernel._POOL)
    pools["job"] = [c[1] for c in test_parse_joblog.LINES]
    pools["trainer"] = [c[1] for c in test_parse_trainer.LINES]
    pools["slurmctld"] = [c[1] for c in slurm.CTLD]
    pools["sel"] += [c[0] for c in si.SEL_CASES]
    return pools


def _corpus_lines(root: Path, per_source: int = 400) -> dict[str, list[str]]:
    """Lines of a corpus by sniffed source: every line some event covers first (the
    lines that nearly parse are where bugs hide), then routine ones, ``per_source`` at
    most, chosen by a fixed stride so the pool is the same on every run."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for path in discover([root]):
        data = Path(path).read_bytes()
        f = fileparse._prepare((path, data, None), IngestSettings(year=2024))
        if f.source not in PARSE:
            continue
        text = text_of(gunzip(data)[0] if f.compressed else data)
        lines = split_lines(text)
        fp = PARSE[f.source](text, f.ctx)
        hit = {n for e in fp.events for n in range(e.line_no, e.line_end + 1)}
        hit |= {r.line_no for r in fp.rejects}
        events, routine = found.setdefault(f.source, ([], []))
        events.extend(ln for i, ln in enumerate(lines, 1) if i in hit)
        routine.extend(ln for i, ln in enumerate(lines, 1) if i not in hit)
    pools = {}
    for source, (events, routine) in found.items():
        events = list(dict.fromkeys(events))
        routine = list(dict.fromkeys(routine))
        take = events[::max(1, len(events) // (per_source * 3 // 4))]
        take += routine[::max(1, len(routine) // max(1, per_source - len(take)))]
        pools[source] = take[:per_source]
    return pools


def _merge(*pools: dict[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in pools:
        for source, lines in p.items():
            out.setdefault(source, []).extend(ln for ln in lines if ln)
    return {s: list(dict.fromkeys(v)) for s, v in out.items()}


@functools.cache
def repo_pools() -> dict[str, list[str]]:
    root = Path(__file__).resolve().parent.parent / "fixtures" / "sample" / "corpus"
    return _merge(_test_table_lines(), _corpus_lines(root))


@pytest.fixture(scope="module")
def peer_pools(shared_dir) -> dict[str, list[str]]:
    peer = shared_dir / "peer-data"
    if not peer.is_dir():
        pytest.fail(f"{peer} is missing")
    for lic in ("gpud", "gcm", "loghub", "azurehpc-health-checks"):
        assert (peer / lic / "LICENSE").is_file(), f"{lic}: no LICENSE beside the data"
    return _corpus_lines(peer)


HEADERS = {
    "sacct": [split_lines(test_parse_slurm.MINIMAL)[0], split_lines(test_parse_slurm.RUNS)[0],
              "JobID,State,Start,End", "End;Start;State;JobID"],
    "inventory": ["index, pci.bus_id, uuid, serial",
                  "name, serial, memory.total [MiB], pci.bus_id, index, uuid"],
    "hosts": ["host,aliases,addresses", "Addresses,Host,Aliases"],
}


@st.composite
def damaged_file(draw: st.DrawFn, source: str, pool: list[str]) -> bytes:
    """Mutated real lines of ``source``; header-led formats keep a real (possibly
    damaged) header first, or the header is itself fair game."""
    body = draw(mutated_file(pool))
    if source in HEADER_LED and draw(st.integers(0, 3)):
        header = draw(mutated_line(HEADERS[source], max_edits=draw(st.integers(0, 1))))
        return header + b"\n" + body
    return body


# --- what every parse must satisfy ----------------------------------------------------------

def check_parse(fp: FileParse, text: str) -> None:
    """Accounting, and records that will fit the tables' columns."""
    check_accounting(fp)
    assert fp.lines == len(split_lines(text)) == count_lines(text.encode("utf-8",
                                                                          "surrogatepass"))
    for r in fp.rejects:
        assert isinstance(r.reason, str) and r.reason.strip()
        assert isinstance(r.raw, str) and len(r.raw) <= RAW_LIMIT
    for e in fp.events:
        assert e.ts is None or (isinstance(e.ts, int) and -INT64_MAX <= e.ts <= INT64_MAX)
        assert e.xid is None or 1 <= e.xid <= INT32_MAX, e
        assert e.rank is None or 0 <= e.rank <= INT32_MAX, e
        assert isinstance(e.message, str)
        for v in (e.host, e.device, e.job_id):
            assert v is None or isinstance(v, str)
        assert isinstance(e.attrs, dict)
        attrs = fileparse.attrs_json(e.attrs)
        assert attrs is None or isinstance(json.loads(attrs), dict)
    # the rows of these events and rejects build (Arrow checks int widths and types)
    parse_file_rows(fp)


def parse_file_rows(fp: FileParse) -> None:
    cols = {c: [] for c in EVENTS.column_names}
    for e in fp.events:
        for c in EVENTS.column_names:
            cols[c].append({"event_id": "x", "source": "kernel", "path": "p", "sha256": "s",
                            "attrs": fileparse.attrs_json(e.attrs), "gpu_index": None,
                            "gpu_serial": None}.get(c, getattr(e, c, None)))
    pa.Table.from_pydict(cols, schema=EVENTS.arrow_schema)


@contextlib.contextmanager
def engine(path: str) -> Iterator[None]:
    """Force the Python (``"python"``) or the polars (``"polars"``) selection path."""
    with pytest.MonkeyPatch.context() as mp:
        small = 10**9 if path == "python" else 0
        mp.setattr(kernel_columns, "_SMALL_FILE", small)
        mp.setattr(joblog, "SMALL_FILE_LINES", small)
        yield


def check_source(source: str, text: str, tz: str = "UTC", year: int | None = None
                 ) -> FileParse:
    """Every property of one parser on one text."""
    c = ctx_for(source, tz, year)
    fp = PARSE[source](text, c)
    check_parse(fp, text)
    assert PARSE[source](text, c) == fp  # deterministic
    if source in MANY:
        for path in ("python", "polars"):
            with engine(path):
                assert PARSE[source](text, c) == fp, path
        other = "2024-07-01T12:00:00Z hello\nplain\n"
        many = MANY[source]([(split_lines(other), c), (split_lines(text), c),
                             (split_lines(text), c)])
        assert many[1] == many[2] == fp
    return fp


# --- (a) arbitrary text and bytes -----------------------------------------------------------

SOURCES = sorted(PARSE)


@pytest.mark.parametrize("source", SOURCES)
@given(text=st.text(), ctxs=CONTEXTS)
def test_any_text(source, text, ctxs):
    check_source(source, text, *ctxs)


@pytest.mark.parametrize("source", SOURCES)
@given(data=st.binary())
def test_any_bytes(source, data):
    check_source(source, text_of(data))


@given(message=st.text(), program=st.none() | st.sampled_from(["kernel", "nvidia-smi", ""]),
       following=st.text())
def test_kernel_messages_classify_any_text(message, program, following):
    mm = kernel_messages.classify(message, program)
    assert mm == kernel_messages.classify(message, program)
    if mm is not None:
        assert kernel_messages.absorbs(mm, following) in (True, False)


# --- (b) mutated real lines -----------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES)
@given(data=st.data(), ctxs=CONTEXTS)
def test_mutated_real_lines(source, data, ctxs):
    raw = data.draw(damaged_file(source, repo_pools()[source]))
    check_source(source, text_of(raw), *ctxs)


@pytest.mark.shared
@pytest.mark.parametrize("source", ["kernel", "sacct"])
@given(data=st.data())
def test_mutated_peer_lines(peer_pools, source, data):
    raw = data.draw(damaged_file(source, peer_pools[source]))
    check_source(source, text_of(raw))


@given(data=st.data())
def test_mutated_kernel_messages(data):
    line = text_of(data.draw(mutated_line(repo_pools()["kernel"])))
    kl = kernel.parse_line(line, ctx_for("kernel"))
    if kl is not None:
        kernel_messages.classify(kl.message, kl.program)


@pytest.mark.parametrize("module", [joblog, trainer, slurmctld], ids=lambda m: m.__name__)
@given(data=st.data())
def test_parse_line_of_mutated_lines(module, data):
    source = {joblog: "job", trainer: "trainer", slurmctld: "slurmctld"}[module]
    line = text_of(data.draw(mutated_line(repo_pools()[source]))).replace("\n", " ")
    events = module.parse_line(line, ctx_for(source))
    assert all(e.line_no == 1 for e in events)


# --- parse_file / parse_batch: bytes in, Arrow tables out ----------------------------------

def check_table(table: pa.Table, spec: Table) -> None:
    """Schema, nullability, vocabularies and bounds of ``schemas.tables``."""
    assert table.schema == spec.arrow_schema
    table.validate(full=True)
    for col in spec.columns:
        values = table.column(col.name)
        if not col.nullable:
            assert values.null_count == 0, col.name
        present = [v for v in values.to_pylist() if v is not None]
        if col.values is not None:
            assert set(present) <= set(col.values), col.name
        if col.minimum is not None:
            assert all(v >= col.minimum for v in present), col.name
        if col.maximum is not None:
            assert all(v <= col.maximum for v in present), col.name


def check_tables(pf: fileparse.ParsedFile, items: list[tuple[str, bytes, float | None]]
                 ) -> None:
    for table, spec in ((pf.files, FILES), (pf.events, EVENTS), (pf.rejects, REJECTS)):
        check_table(table, spec)
    files = {r["path"]: r for r in pf.files.to_pylist()}
    assert list(files) == list(dict.fromkeys(p for p, *_ in items))
    by_path = {p: d for p, d, *_ in items}
    events = pf.events.to_pylist()
    rejects = pf.rejects.to_pylist()
    # event ids are unique but for files of the same bytes (load keeps one of those)
    owner = {(e["event_id"], e["sha256"]) for e in events}
    assert len({(e["event_id"], e["path"]) for e in events}) == len(events)
    assert len({eid for eid, _ in owner}) == len(owner)
    for path, row in files.items():
        data = by_path[path]
        assert row["sha256"] == hashlib.sha256(data).hexdigest()
        assert row["bytes"] == len(data)
        assert row["compressed"] == (data[:2] == b"\x1f\x8b")
        plain = gunzip(data)[0] if row["compressed"] else data
        assert row["lines"] == count_lines(plain)
        assert row["lines"] == row["routine_lines"] + row["event_lines"] + row["reject_lines"]
        covered = {n for e in events if e["path"] == path
                   for n in range(e["line_no"], e["line_end"] + 1)}
        rejected = {r["line_no"] for r in rejects if r["path"] == path}
        assert all(1 <= n <= row["lines"] for n in covered | rejected)
        assert not covered & rejected
        assert (len(covered), len(rejected)) == (row["event_lines"], row["reject_lines"])
        if row["compressed"] and row["problem"] is None:
            assert gunzip(data)[1] is None
    for r in rejects:
        assert r["reason"].strip()
    for e in events:
        assert e["line_no"] <= e["line_end"]
        assert e["attrs"] is None or isinstance(json.loads(e["attrs"]), dict)


def _rows(pf: fileparse.ParsedFile) -> dict[str, list]:
    return {t: sorted(map(repr, getattr(pf, t).to_pylist()))
            for t in ("files", "events", "rejects")}


@st.composite
def corpus_file(draw: st.DrawFn, pools: dict[str, list[str]]) -> tuple[str, bytes, None]:
    """One file of a corpus: damaged real lines of some source at its usual path (or
    arbitrary bytes anywhere), stored plain or gzipped, intact or not."""
    source = draw(st.sampled_from([*SOURCES, "binary"]))
    if source == "binary":
        path = draw(st.sampled_from(["/c/misc/blob.bin", "/c/hosts/node0042/kern.log"]))
        return path, draw(stored(draw(st.binary(max_size=256)))), None
    content = draw(damaged_file(source, pools[source]))
    path = PATHS[source].replace("node0042", f"node{draw(st.integers(0, 3)):04d}")
    return path, draw(stored(content)), None


SETTINGS = st.sampled_from([
    IngestSettings(), IngestSettings(tz="America/Los_Angeles"), IngestSettings(year=2999),
    IngestSettings(window=(0, 1_735_000_000_000_000)),
])


@given(data=st.binary(), settings=SETTINGS)
def test_parse_file_any_bytes(data, settings):
    items = [("/c/hosts/node0001/kern.log", data, None)]
    pf = parse_file(*items[0][:2], settings)
    check_tables(pf, items)
    assert _rows(parse_file(*items[0][:2], settings)) == _rows(pf)


@given(data=st.data(), settings=SETTINGS)
def test_parse_batch_of_damaged_files(data, settings):
    """Damaged files of every source (plain, gzip, cut, corrupt) in one batch: the
    tables fit the schemas, every line is counted, the same input gives the same rows,
    and they are the rows each file gives alone."""
    drawn = data.draw(st.lists(corpus_file(repo_pools()), min_size=1, max_size=6))
    items = list({p: (p, d, m) for p, d, m in drawn}.values())  # one entry per path
    pf = parse_batch(items, settings)
    check_tables(pf, items)
    assert _rows(parse_batch(iter(items), settings)) == _rows(pf)  # deterministic
    alone = [parse_file(p, d, settings, m) for p, d, m in items]
    assert _rows(pf) == {t: sorted(r for x in alone for r in _rows(x)[t])
                         for t in ("files", "events", "rejects")}


@pytest.mark.shared
@given(data=st.data())
def test_parse_batch_of_damaged_peer_files(peer_pools, data):
    pools = {**repo_pools(), **peer_pools}
    drawn = data.draw(st.lists(corpus_file(pools), min_size=1, max_size=4))
    items = list({p: (p, d, m) for p, d, m in drawn}.values())
    check_tables(parse_batch(items, IngestSettings()), items)


# --- reading bytes: gunzip and the line cap ---------------------------------------------------

@given(content=st.binary(max_size=4096), cut=st.integers(0, 4096), members=st.integers(1, 3))
# an empty member decompresses to nothing: that is its end, not a truncation
@example(content=b"", cut=0, members=1)
def test_gunzip_keeps_a_prefix_of_what_was_written(content, cut, members):
    packed = b"".join(gzip.compress(content, mtime=0) for _ in range(members))
    assert gunzip(packed) == (content * members, None)
    out, problem = gunzip(packed[:cut])
    assert (content * members).startswith(out)
    ends = {k * len(packed) // members for k in range(members + 1)}  # between members
    assert problem == (None if cut >= len(packed) or cut in ends else "truncated gzip")


@given(data=st.binary(max_size=2048).map(lambda b: b.replace(b"\r", b"")),
       limit=st.integers(1, 64))
def test_cap_lines_cuts_only_long_lines(data, limit):
    out, cut = cap_lines(data, limit)
    lines, capped = data.split(b"\n"), out.split(b"\n")
    assert len(capped) == len(lines)  # same line ends, so the same count
    assert capped == [ln[:limit] for ln in lines]
    assert cut == sum(len(ln) > limit for ln in lines)


# --- inputs that once broke a parser ---------------------------------------------------------

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, GPU has fallen off the bus."


@given(source=st.sampled_from(SOURCES), text=st.text(), tz=st.sampled_from(["UTC"]))
# year 9999 read in a zone west of UTC overflowed datetime (OverflowError, not ValueError)
@example(source="sel", tz="America/New_York", text="   4 | 12/31/9999 | 22:10:39 | Event "
         "Logging Disabled SEL_Status | Log area reset/cleared | Asserted")
@example(source="kernel", tz="America/New_York", text=f"[Fri Dec 31 23:00:00 9999] {XID79}")
@example(source="sacct", tz="America/New_York",
         text="JobID|State|Start|End\n1|FAILED|9999-12-31T23:00:00|9999-12-31T23:30:00\n")
# a UTC offset of 24 h or more passed the line's shape and made timezone() raise
@example(source="kernel", tz="UTC", text=f"2024-07-01T12:00:00+29:00 node0042 kernel: {XID79}")
# Xid 0 went to the xid column, whose minimum is 1
@example(source="kernel", tz="UTC", text=XID79.replace("79,", "0,"))
# 20-digit uptimes overflowed the int64 uptime columns (Python path: OverflowError;
# polars path: a failed strict cast)
@example(source="kernel", tz="UTC", text=f"[99999999999999999999.000000] {XID79}")
@example(source="kernel", tz="UTC", text=f"4,1,99999999999999999999999,-;{XID79}")
# Arabic-Indic digits: Python's \d and int() read them, polars' cast did not
@example(source="kernel", tz="UTC", text=f"[ ٣.٥] {XID79}")
# a rank wider than the 32-bit rank column failed the whole batch's Arrow table
@example(source="job", tz="UTC", text="2024-07-01T12:00:00.000001Z [rank99999999999]:[E701 "
         "12:10:00.523 ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout")
# "²" is str.isdigit() but int() rejects it
@example(source="inventory", tz="UTC",
         text="index, pci.bus_id, uuid, serial\n², 00000000:18:00.0, GPU-x, 1\n")
@example(source="sacct", tz="UTC", text="JobID|State|Start|End|NNodes|NodeList\n"
         "1|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00|²|n1\n")
@example(source="slurmctld", tz="UTC",
         text="[2024-07-01T12:00:29.114] error: Nodes n[²-3] not responding")
@example(source="sel", tz="UTC",
         text="   8 | Pre-Init  |²| System Event #0x01 | Timestamp Clock Sync | Asserted")
@example(source="kernel", tz="UTC", text=XID79.replace("pid=2231", "pid=²"))
# a --parsable row with the right number of delimiters but no trailing one had a field
# more than the header (zip(strict=True) raised)
@example(source="sacct", tz="UTC", text="JobID|JobName|User|State|Start|\n"
         "5|train|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00|line one")
def test_inputs_that_once_broke_a_parser(source, text, tz):
    check_source(source, text, tz)
