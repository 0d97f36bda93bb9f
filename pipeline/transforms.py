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
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

# BATCH_SIZE, spread, read_bytes and _read_local live in Beam-free modules (the driver
# uses them without importing Beam) and are re-exported here, where they were
from faultline.pipeline.batching import BATCH_SIZE, spread  # noqa: F401 (re-exported)
from faultline.pipeline.fileread import _read_local, read_bytes  # noqa: F401 (re-exported)
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.staging import TABLES, shard_options

if TYPE_CHECKING:
    from faultline.pipeline.fileparse import BatchItem, ParsedFile

ALWAYS_WRITTEN = ("files", "events", "rejects")


def batch_key(batch: list[str | list[str] | dict]) -> str:
    """The name its shards get (``<key>-n<rows>.parquet``): from the batch's first path,
    so a retried batch overwrites its own shards."""
    return _key(_path_of(batch[0]))


def _key(first: str) -> str:
    return hashlib.sha256(first.encode("utf-8", "surrogateescape")).hexdigest()[:24]


# A batch is parsed in parts of at most this many bytes as stored (each part its own
# shards): the rows of a part stay in memory until its tables are built, so a batch of
# big kernel logs is bounded by this, not by its number of files.
MAX_PARSE_BYTES = 64 << 20


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
    path, so a retried batch writes the same shards again.

    The parsers (polars among them) are imported here, by the process that parses: the
    process that builds and runs the pipeline only pickles this module's DoFns, and
    importing them there cost it 0.35 CPU s while the driver discovered the corpus on
    the same two cores (:mod:`faultline.pipeline.forkloop`'s workers import them ahead)."""
    from faultline.pipeline.fileparse import parse_batch

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


class ReadListing(beam.DoFn):
    """The listing file's entries (one JSON value a line, :meth:`Staging.write_listing`)
    in batches of ``batch_size``, in its order: the whole listing is read by one
    worker, from the pipeline's one impulse.

    This replaces ``ReadFromText | Map(json.loads) | BatchElements``: that read is a
    stage of its own on the portable runners (its split goes through a reshuffle of
    its own) and moved every path through Beam as an element, three times; here one
    bundle turns the listing into whole batches, which the ``Spread`` reshuffle then
    deals out. On small x4 the parse began 0.1 s sooner (one bundle of 0.1 s instead
    of two). Batches are consecutive runs of the listing, so a re-run cuts them, and
    names their shards, the same way."""

    def __init__(self, listing: str, batch_size: int) -> None:
        self.listing = listing
        self.batch_size = batch_size

    def process(self, _impulse: bytes) -> Iterator[list[str | list[str] | dict]]:
        from apache_beam.io.filesystem import CompressionTypes

        batch: list[str | list[str] | dict] = []
        with FileSystems.open(self.listing,
                              compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for line in f:
                if line.strip():
                    batch.append(json.loads(line))
                if len(batch) == self.batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch


class ParseCorpus(beam.PTransform):
    """A listing of paths (its file's path or URI) -> Parquet shards of the files,
    events and rejects tables: applied to the pipeline itself (``p | ParseCorpus(...)``)."""

    def __init__(self, listing: str, settings: IngestSettings, staging: str,
                 batch_size: int = BATCH_SIZE) -> None:
        super().__init__()
        self.listing = listing
        self.settings = settings
        self.staging = staging
        self.batch_size = batch_size

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection[str]:
        return (
            root
            | "Start" >> beam.Impulse()
            | "ReadPaths" >> beam.ParDo(ReadListing(self.listing, self.batch_size))
            | "Spread" >> beam.Reshuffle()
            | "Parse" >> beam.ParDo(ParseFiles(self.settings))
            | "Write" >> beam.ParDo(WriteShards(self.staging))
        )
