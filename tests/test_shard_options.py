"""Staging shards are written for least CPU where they stay local, zstd where they
travel (pipeline/staging.py: shard_options), and the loader reads both alike."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from faultline.pipeline.staging import shard_options
from faultline.pipeline.transforms import WriteShards

LINES = [  # real kernel lines, as an events shard carries them
    "NVRM: Xid (PCI:0000:1b:00): 79, pid=1912, GPU has fallen off the bus.",
    "mlx5_core 0000:c1:00.0: mlx5_fw_fatal_reporter_err_work:245:(pid 7): "
    "Driver is in error state. Unloading",
]


@pytest.mark.parametrize(("location", "codec"), [
    ("/var/tmp/db.duckdb.staging", "lz4"),
    ("relative/db.duckdb.staging", "lz4"),
    ("gs://bucket/shards/faultline-0123", "zstd"),
    ("s3://bucket/shards/faultline-0123", "zstd"),
])
def test_codec_follows_the_location(location, codec):
    assert shard_options(location)["compression"] == codec


@pytest.mark.parametrize("remote_like", [False, True])
def test_a_written_shard_reads_back_the_same(tmp_path, remote_like):
    staging = tmp_path / "db.duckdb.staging"
    table = pa.table({"path": ["/logs/kern.log"] * 2, "message": LINES,
                      "line_no": pa.array([3, 9], pa.int64())})
    shard = WriteShards(str(staging))
    if remote_like:  # what a bucket gets, written here
        shard.options = shard_options("gs://bucket/x")
    [path] = shard.process(("0" * 24, "events", table))
    codec = pq.ParquetFile(path).metadata.row_group(0).column(1).compression
    assert codec == ("ZSTD" if remote_like else "LZ4")
    got = duckdb.connect().execute("SELECT path, message, line_no FROM read_parquet(?) "
                                   "ORDER BY line_no", [path]).fetchall()
    assert got == [("/logs/kern.log", LINES[0], 3), ("/logs/kern.log", LINES[1], 9)]
