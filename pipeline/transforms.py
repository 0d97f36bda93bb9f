"""The Beam side of ingest: batches of file paths in, Parquet shards out.

Elements are batches of paths and Arrow tables, never single lines: one ``ParseFiles``
call reads and parses a whole batch of files with :func:`parse_batch` (the lines of all
its files of a source are filtered in one vectorized pass), so Beam's per-element cost,
polars' per-call cost and Arrow's per-table cost are paid once per batch. The DoFns hold
only their settings (picklable, no global state) and write nothing but their shards, so
the same pipeline runs on the DirectRunner, in multi-process mode, and on Flink, Spark
or Dataflow, where the shard directory is a shared filesystem or bucket path.

Shard names derive from the batch's content (its first path, and each later part's
own first path, see :func:`parse_parts`), so a retried bundle overwrites its own shards
instead of adding duplicates. The driver hands the listing over in :func:`spread`
order, so every batch costs about the same.
"""


from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from faultline.pipeline.fileparse import BatchItem, ParsedFile, parse_batch
from faultline.pipeline.inflate import MAX_PLAIN_BYTES
from faultline.pipeline.objstore import open_uri, stat_uri
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.staging import TABLES, shard_options


def read_bytes(path: str, limit: int = MAX_PLAIN_BYTES
               ) -> tuple[bytes, float | None, str | None]:
    """A file's bytes as stored, its modification time (an object's last-modified
    time, for a URI), and what went wrong reading it whole.

    A worker holds a whole file (and its decoded text) in memory, so a file over
    ``limit`` bytes, the same bound gzip content gets, is cut at its last line end
    before the limit instead of taking the worker, and the whole ingest, down."""
    if "://" not in path:
        data, mtime = _read_local(path, limit + 1)
    else:  # an object store's "mtime" is its last-modified time (re-runs compare it)
        mtime = stat_uri(path)[1]
        with open_uri(path) as f:
            data = f.read(limit + 1)
    if len(data) <= limit:
        return data, mtime, None
    cut = data.rfind(b"\n", 0, limit) + 1 or limit
    return data[:cut], mtime, f"file over {limit} bytes: only its first {cut} bytes read"


def _read_local(path: str, cap: int) -> tuple[bytes, float]:
    """A local file's first ``cap`` bytes and its modification time after reading.

    Through the file descriptor: ``open(path).read(cap)`` lets the buffered reader
    set up a buffer of ``cap`` bytes (the 1 GiB bound) per file, 20 us of a job log's
    25 us here; this asks for the size ``fstat`` gives (one more byte, to see a file
    that grew), and the time comes from the file read even if its path was replaced
    meanwhile."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode)
        parts: list[bytes] = []
        got = 0
        while got < cap:
            ask = min(cap - got, max(st.st_size - got + 1, 1 << 16))
            chunk = os.read(fd, ask)
            if chunk:
                parts.append(chunk)
                got += len(chunk)
            if not chunk or (regular and len(chunk) < ask):  # a short read is the end
                break
        return (parts[0] if len(parts) == 1 else b"".join(parts)), os.fstat(fd).st_mtime
    finally:
        os.close(fd)


ALWAYS_WRITTEN = ("files", "events", "rejects")


def batch_key(batch: list[str | list[str] | dict]) -> str:
    """The name its shards get (``<key>-n<rows>.parquet``): from the batch's first path,
    so a retried batch overwrites its own shards."""
    return _key(_path_of(batch[0]))


def _key(first: str) -> str:
    return hashlib.sha256(first.encode("utf-8", "surrogateescape")).hexdigest()[:24]


# Paths per batch (a Beam element, a Dask task): enough that a batch of ~3 KB job logs
# pays its Parquet shards and polars calls once per thousand files (write cost per
# file 22 us at 256, 16 us at 1024 on llama3's job logs), see MAX_PARSE_BYTES for big files.
BATCH_SIZE = 1024
# A batch is parsed in parts of at most this many bytes as stored (each part its own
# shards): the rows of a part stay in memory until its tables are built, so a batch of
# big kernel logs is bounded by this, not by its number of files.
MAX_PARSE_BYTES = 64 << 20


def spread(paths: list) -> list:
    """``paths`` in a golden-ratio stride order: item ``i`` is ``paths[i * s % n]``
    with ``s`` about ``n / phi`` and prime to ``n``, so every run of consecutive items
    (any batch, however the batcher aligns it) samples the whole listing evenly.

    The listing is sorted, so a directory of big kernel logs would otherwise be a few
    heavy batches among thousands of light ones, and the local runner deals whole
    batches to its workers round-robin up front (Beam's ``GroupingBuffer.partition``):
    one worker got the heavy ones while the other idled at the end. Deterministic: the
    same listing gives the same batches, so a retried batch writes the same shards."""
    n = len(paths)
    if n < 3:
        return list(paths)
    s = round(n * 0.6180339887498949)
    while math.gcd(s, n) != 1:
        s += 1
    return [paths[i * s % n] for i in range(n)]


class ParseFiles(beam.DoFn):
    """A batch of paths -> one (table name, Arrow table) per output table, for each
    part of at most ``max_bytes`` of it (:data:`MAX_PARSE_BYTES`)."""

    def __init__(self, settings: IngestSettings, max_bytes: int = MAX_PARSE_BYTES) -> None:
        self.settings = settings
        self.max_bytes = max_bytes

    def process(self, batch: list[str | list[str]]) -> Iterator[tuple[str, str, pa.Table]]:
        for key, parsed in parse_parts(batch, self.settings, self.max_bytes):
            for name in TABLES:
                table = getattr(parsed, name)
                # the resume tables only when they have rows: most batches have none
                if table is not None and (table.num_rows or name in ALWAYS_WRITTEN):
                    yield key, name, table


def parse_parts(batch: list[str | list[str] | dict], settings: IngestSettings,
                max_bytes: int = MAX_PARSE_BYTES) -> Iterator[tuple[str, ParsedFile]]:
    """``(shard key, tables)`` of each part of ``batch``: its files in order, a part
    closed once the bytes read for it reach ``max_bytes``. Files are read as the parse
    asks for them, so a part holds at most one file past the bound. The first part's
    key is :func:`batch_key` of the batch; each later one is named by its own first
    path, so a retried batch writes the same shards again."""
    items = _read_all(batch)
    after: list[BatchItem | None] = [next(items, None)]
    while after[0] is not None:
        first = after[0][0]
        parsed = parse_batch(_part(after, items, max_bytes), settings)
        yield _key(first), parsed


def _part(after: list[BatchItem | None], items: Iterator[BatchItem], max_bytes: int
          ) -> Iterator[BatchItem]:
    """The items of one part: ``after[0]`` and what follows it, up to the bound; the
    item after the part (None at the end) is left in ``after[0]``."""
    item, used = after[0], 0
    while item is not None:
        used += len(item[1])
        yield item
        item = next(items, None)
        if used >= max_bytes:
            break
    after[0] = item


def _path_of(entry: str | list[str] | dict) -> str:
    if isinstance(entry, dict):
        return entry["path"]
    return entry if isinstance(entry, str) else entry[0]


def _read_all(paths: list[str | list[str] | dict]) -> Iterator[BatchItem]:
    """Each file's bytes, read when the parser asks for them. A ``[path, reason]``
    entry is a path discovery passed over: recorded with its reason, never read. A
    ``{"path", "resume"}`` entry is a grown file a re-run may parse from a window on
    (:mod:`faultline.pipeline.resume`)."""
    for path in paths:
        spec = None
        if isinstance(path, dict):
            path, spec = path["path"], path["resume"]
        if not isinstance(path, str):
            yield path[0], b"", None, path[1]
            continue
        try:
            data, mtime, problem = read_bytes(path)
        except OSError as exc:  # vanished or unreadable since discovery
            yield path, b"", None, f"unreadable: {exc.strerror or exc}"
        else:
            if problem is not None:
                yield path, data, mtime, problem
            elif spec is not None:
                yield path, data, mtime, None, spec
            else:
                yield path, data, mtime


class WriteShards(beam.DoFn):
    """Write each batch's tables as Parquet under ``<staging>/<table>/``, compressed as
    :func:`~faultline.pipeline.staging.shard_options` says for that location."""

    def __init__(self, staging: str) -> None:
        self.staging = staging
        self.options = shard_options(staging)

    def process(self, item: tuple[str, str, pa.Table]) -> Iterator[str]:
        key, name, table = item
        path = FileSystems.join(self.staging, name, f"{key}-n{table.num_rows}.parquet")
        with FileSystems.create(path) as f:  # local parents are created as needed
            pq.write_table(table, f, **self.options)
        yield path


class ParseCorpus(beam.PTransform):
    """Paths -> Parquet shards of the files, events and rejects tables."""

    def __init__(self, settings: IngestSettings, staging: str,
                 batch_size: int = BATCH_SIZE) -> None:
        super().__init__()
        self.settings = settings
        self.staging = staging
        self.batch_size = batch_size

    def expand(self, paths: beam.PCollection[str]) -> beam.PCollection[str]:
        return (
            paths
            | "Batch" >> beam.BatchElements(min_batch_size=1,
                                            max_batch_size=self.batch_size)
            | "Spread" >> beam.Reshuffle()
            | "Parse" >> beam.ParDo(ParseFiles(self.settings))
            | "Write" >> beam.ParDo(WriteShards(self.staging))
        )
