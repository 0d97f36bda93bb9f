"""CPU per file of one source, the way a Beam worker spends it: read, parse, write.

    python bench/perfile.py --db DB [--source job] [--limit 4096] [--repeat 3]

Takes ``--limit`` files of ``--source`` from an ingested database's ``files`` table
(a fixed pseudo-random choice: ``ORDER BY hash(path)``), cuts them into batches as
ingest does (:func:`faultline.pipeline.transforms.spread`, then
:data:`~faultline.pipeline.transforms.BATCH_SIZE` paths each) and runs each batch
through ``ParseFiles`` (read the bytes, sniff, parse, build the Arrow tables, in parts
of at most ``MAX_PARSE_BYTES``) and a zstd Parquet write of every table into memory
(``WriteShards``' cost without the disk). Prints the best of ``--repeat`` runs in CPU
microseconds per file (``time.process_time``: on a machine shared with other jobs wall
time swings with their load, CPU time much less). The first pass warms caches and
is not counted.

Measured on llama3's job logs (2 shared cores): 322-337 us per file before the
per-file and per-batch work of issue 14's h-file branch, 263-280 us after.
"""

from __future__ import annotations

import argparse
import io
import time

import duckdb
import pyarrow.parquet as pq

from faultline.pipeline import transforms
from faultline.pipeline.settings import IngestSettings


def per_file_us(paths: list[str], settings: IngestSettings, repeat: int) -> float:
    """Best CPU microseconds per file over ``repeat`` passes (after one warm-up)."""
    order = transforms.spread(paths)
    size = transforms.BATCH_SIZE
    batches = [order[i:i + size] for i in range(0, len(order), size)]
    parse = transforms.ParseFiles(settings)

    def one_pass() -> None:
        for batch in batches:
            for _key, _name, table in parse.process(batch):
                pq.write_table(table, io.BytesIO(), compression="zstd")

    one_pass()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        one_pass()
        best = min(best, time.process_time() - t0)
    return best / max(1, len(paths)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="an ingested database (read only)")
    ap.add_argument("--source", default="job", help="files.source to take (default job)")
    ap.add_argument("--limit", type=int, default=4096, help="files to take (default 4096)")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes (default 3)")
    ap.add_argument("--tz", default="UTC", help="zone for times without one (default UTC)")
    args = ap.parse_args()
    with duckdb.connect(args.db, read_only=True) as con:
        paths = [r[0] for r in con.execute(
            "SELECT path FROM files WHERE source = ? AND bytes > 0 ORDER BY hash(path) "
            "LIMIT ?", [args.source, args.limit]).fetchall()]
    if not paths:
        raise SystemExit(f"no {args.source} files in {args.db}")
    us = per_file_us(paths, IngestSettings(tz=args.tz), args.repeat)
    print(f"{args.source}: {len(paths)} files, batches of {transforms.BATCH_SIZE}: "
          f"{us:.1f} us CPU per file (read + parse + Parquet write), best of {args.repeat}")


if __name__ == "__main__":
    main()
