"""CPU per file of one source, the way a Beam worker spends it: read, parse, write.

    python bench/perfile.py --db DB [--source job] [--limit 4096] [--repeat 3]
                            [--parse-only [--batch 256]]

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

``--parse-only``: the files' bytes are read before the clock starts and only
``parse_batch`` is timed, in batches of ``--batch`` files (what the job-log and
trainer columns of issue 14 were measured with: ``--source job --limit 2560``).

Measured on llama3's job logs (2 shared cores): 322-337 us per file before the
per-file and per-batch work of issue 14's h-file branch, 263-280 us after.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from faultline.pipeline import transforms
from faultline.pipeline.fileparse import parse_batch
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


def parse_us(paths: list[str], settings: IngestSettings, repeat: int, batch: int
             ) -> float:
    """Best CPU microseconds per file of ``parse_batch`` alone (bytes read beforehand)."""
    batches = []
    for i in range(0, len(paths), batch):
        items = []
        for p in paths[i:i + batch]:
            f = Path(p)
            items.append((p, f.read_bytes(), f.stat().st_mtime))
        batches.append(items)

    def one_pass() -> float:
        c0 = time.process_time()
        for items in batches:
            parse_batch(items, settings)
        return time.process_time() - c0

    one_pass()
    best = min(one_pass() for _ in range(max(1, repeat)))
    return best / max(1, len(paths)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="an ingested database (read only)")
    ap.add_argument("--source", default="job", help="files.source to take (default job)")
    ap.add_argument("--limit", type=int, default=4096, help="files to take (default 4096)")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes (default 3)")
    ap.add_argument("--tz", default="UTC", help="zone for times without one (default UTC)")
    ap.add_argument("--parse-only", action="store_true",
                    help="time parse_batch alone, the bytes read before the clock")
    ap.add_argument("--batch", type=int, default=256,
                    help="files per parse_batch call with --parse-only (default 256)")
    args = ap.parse_args()
    with duckdb.connect(args.db, read_only=True) as con:
        paths = [r[0] for r in con.execute(
            "SELECT path FROM files WHERE source = ? AND bytes > 0 ORDER BY hash(path) "
            "LIMIT ?", [args.source, args.limit]).fetchall()]
    if not paths:
        raise SystemExit(f"no {args.source} files in {args.db}")
    if args.parse_only:
        us = parse_us(paths, IngestSettings(tz=args.tz), args.repeat, args.batch)
        print(f"{args.source}: {len(paths)} files, batches of {args.batch}: {us:.1f} us "
              f"CPU per file (parse_batch alone), best of {args.repeat}")
        return
    us = per_file_us(paths, IngestSettings(tz=args.tz), args.repeat)
    print(f"{args.source}: {len(paths)} files, batches of {transforms.BATCH_SIZE}: "
          f"{us:.1f} us CPU per file (read + parse + Parquet write), best of {args.repeat}")


if __name__ == "__main__":
    main()
