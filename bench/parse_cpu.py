"""CPU per file of ``parse_batch`` on a sample of one source's files (in-process).

The files are a fixed sample (``ORDER BY hash(path)``) of those a database holds for
``--source``, read before the clock starts and parsed in batches of ``--batch`` as
the ingest's workers parse them; the figure is the best of ``--repeat`` passes of
``time.process_time`` (every thread's CPU, so polars' threads count), after one warm
pass. Used for issue 14's job-log and trainer columns::

    python bench/parse_cpu.py --db /tmp/llama3/new.duckdb --source job --files 2560
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="a database an ingest left (read only)")
    ap.add_argument("--source", default="job")
    ap.add_argument("--files", type=int, default=2560)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tz", default="UTC")
    args = ap.parse_args()
    import duckdb

    from faultline.pipeline.fileparse import parse_batch
    from faultline.pipeline.settings import IngestSettings

    with duckdb.connect(args.db, read_only=True) as con:
        paths = [p for p, in con.execute(
            "SELECT path FROM files WHERE source = ? AND bytes > 0 ORDER BY hash(path) "
            "LIMIT ?", [args.source, args.files]).fetchall()]
    settings = IngestSettings(tz=args.tz)
    batches = []
    for i in range(0, len(paths), args.batch):
        items = []
        for p in paths[i:i + args.batch]:
            f = Path(p)
            items.append((p, f.read_bytes(), f.stat().st_mtime))
        batches.append(items)

    def one_pass() -> float:
        c0 = time.process_time()
        for items in batches:
            parse_batch(items, settings)
        return time.process_time() - c0

    one_pass()
    best = min(one_pass() for _ in range(max(1, args.repeat)))
    print(f"{args.source}: {len(paths)} files, best of {args.repeat}: {best:.3f} CPU s, "
          f"{best / max(1, len(paths)) * 1e6:.0f} us per file")


if __name__ == "__main__":
    main()
