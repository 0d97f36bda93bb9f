"""How a batch is cut and named: ``spread`` deals the listing so every batch holds its
share of each directory (and loses or repeats no path), and ``parse_parts`` parses a
batch in parts bounded by bytes whose rows together are exactly those of the whole
batch, under names that a retry gives again."""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pytest

from faultline.pipeline import transforms
from faultline.pipeline.batching import even_size
from faultline.pipeline.fileparse import parse_batch
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.transforms import batch_key, parse_parts, spread


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 17, 1000, 1001, 4096, 12_345])
def test_spread_is_a_permutation(n):
    paths = [f"/c/{i:05d}" for i in range(n)]
    out = spread(paths)
    assert sorted(out) == paths
    assert spread(list(paths)) == out  # deterministic


@pytest.mark.parametrize(("n", "most", "workers", "sizes"), [
    (11_864, 1024, 2, [989] * 11 + [985]),  # small x4: was 11 x 1,024 + 600
    (12_500, 1024, 2, [893] * 13 + [891]),  # 13 batches at 1,024: a whole one more
    (100, 1024, 2, [50, 50]),  # a small listing still keeps both workers busy
    (1024, 1024, 1, [1024]),
    (3, 1024, 4, [1, 1, 1]),  # fewer paths than workers: one each
    (950_658, 1024, 2, [1023] * 929 + [291]),  # llama3: the batch size it was, near enough
])
def test_even_batches_share_the_listing_between_the_workers(n, most, workers, sizes):
    """The local runner deals batches to its workers round-robin up front: batches of
    equal size, as many as a multiple of the workers, end the workers together."""
    size = even_size(n, most, workers)
    assert size <= most
    got = [min(size, n - i) for i in range(0, n, size)]
    assert got == sizes
    assert sum(got) == n


@pytest.mark.parametrize("offset", [0, 1, 100, 255])
@pytest.mark.parametrize("size", [64, 256, 1024])
def test_spread_gives_every_batch_its_share_of_a_heavy_directory(offset, size):
    """A sorted listing: 40 big kernel logs among 4,000 job logs. In order they fall
    into one batch; spread, every run of ``size`` paths (wherever the batcher starts
    cutting) holds its share of them, give or take three."""
    paths = sorted([f"/c/hosts/n{i:02d}/kern.log" for i in range(40)]
                   + [f"/c/jobs/{i:04d}/n.log" for i in range(4000)])
    assert sum("hosts/" in p for p in paths[:size]) == min(40, size)
    out = spread(paths)
    share = 40 * size / len(paths)
    heavy = [sum("hosts/" in p for p in out[i:i + size])
             for i in range(offset, len(out) - size + 1, size)]
    assert heavy and all(abs(h - share) <= 3 for h in heavy), (share, heavy)


def test_spread_keeps_entries_of_every_kind():
    entries = ["/c/a", ["/c/b", "socket"], {"path": "/c/c", "resume": "{}"}, "/c/d"]
    out = spread(entries)
    assert sorted(map(repr, out)) == sorted(map(repr, entries))


def _corpus(tmp_path, sizes: list[int]) -> list[str]:
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / "jobs" / "7" / f"node{i:02d}.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"".join(b"2024-07-01T12:00:%02d.000000Z node%02d:1:2 [0] NCCL WARN "
                               b"line %d\n" % (k % 60, i, k) for k in range(n)))
        paths.append(str(p))
    return paths


def _rows(tables: list[pa.Table]) -> list[str]:
    return sorted(repr(tuple(r.values())) for t in tables for r in t.to_pylist())


@pytest.mark.parametrize("max_bytes", [1, 100, 5_000, 20_000, 10**9])
def test_parts_give_the_rows_of_the_whole_batch(tmp_path, max_bytes):
    paths = _corpus(tmp_path, [3, 80, 1, 200, 0, 40, 120, 7])
    batch = [*paths, [str(tmp_path / "gone.sock"), "socket"]]
    whole = parse_batch(transforms._read_all(batch), IngestSettings())
    parts = list(parse_parts(batch, IngestSettings(), max_bytes))
    for name in ("files", "events", "rejects"):
        assert _rows([getattr(p, name) for _k, p in parts]) == _rows([getattr(whole, name)])
    keys = [k for k, _p in parts]
    assert keys[0] == batch_key(batch)  # what dask_run.missing_batches looks for
    assert len(set(keys)) == len(keys)
    assert [k for k, _p in parse_parts(batch, IngestSettings(), max_bytes)] == keys
    # each part closes at the first file that brings it to the bound
    sizes = collections.Counter()
    for _k, p in parts:
        sizes[p.files.num_rows] += 1
    if max_bytes == 1:  # every file its own part, the unread entry with the last
        assert len(parts) == len(paths)
    if max_bytes == 10**9:
        assert len(parts) == 1


def test_a_part_holds_at_most_one_file_past_the_bound(tmp_path):
    paths = _corpus(tmp_path, [100] * 12)
    each = os.path.getsize(paths[0])
    parts = list(parse_parts(paths, IngestSettings(), 3 * each + 1))
    assert [p.files.num_rows for _k, p in parts] == [4, 4, 4]
    parts = list(parse_parts(paths, IngestSettings(), 3 * each))
    assert [p.files.num_rows for _k, p in parts] == [3, 3, 3, 3]


def test_parse_files_writes_each_part(tmp_path):
    paths = _corpus(tmp_path, [50] * 6)
    each = os.path.getsize(paths[0])
    out = list(transforms.ParseFiles(IngestSettings(), 2 * each).process(paths))
    files = [(k, t.num_rows) for k, name, t in out if name == "files"]
    assert [n for _k, n in files] == [2, 2, 2]
    assert files[0][0] == batch_key(paths)
    assert {name for _k, name, _t in out} >= {"files", "events", "rejects"}


@pytest.mark.parametrize(("n", "size"), [(0, 4), (1, 4), (4, 4), (9, 4), (1000, 1024)])
def test_the_listing_is_read_in_whole_consecutive_batches(tmp_path, n, size):
    """ReadListing: every entry once, in the listing's order, in batches of ``size``
    but the last; entries of every kind; a blank line (a listing written by hand) is
    no entry."""
    from faultline.pipeline.staging import Staging

    entries = [f"/c/{i}" if i % 3 else ([f"/c/{i}", "too big"] if i % 2 else
               {"path": f"/c/{i}", "resume": {"read_to": i}}) for i in range(n)]
    listing = Staging.for_db(tmp_path / "x.duckdb").write_listing(entries)
    with open(listing, "ab") as f:
        f.write(b"\n")
    batches = list(transforms.ReadListing(listing, size).process(b""))
    assert [e for b in batches for e in b] == entries
    assert all(len(b) == size for b in batches[:-1])
    assert len(batches) == -(-n // size)


def test_the_pipeline_process_needs_no_parser():
    """The process that builds the pipeline imports the transforms (the DoFns it
    pickles), not the parsers or polars: only the workers parse
    (:func:`transforms.parse_parts` imports them)."""
    import subprocess
    import sys

    code = ("import sys; import faultline.pipeline.transforms, faultline.pipeline.beamrun; "
            "print(sorted(m for m in ('polars', 'faultline.pipeline.fileparse') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/")
    assert out.stdout.strip() == "[]"
