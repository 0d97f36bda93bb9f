"""Build ``collective_hangs`` from the ``flight_recorder_dump`` events, in the load step.

The analysis needs every rank's dump of a job at once, so it runs once the shards are
merged (:func:`faultline.pipeline.load.load_shards`), per job, on the dumps' summaries;
ranks map to hosts and GPUs through the job's own lines: the events of that job and rank
(their host, and the GPU index the inventory gave their PCI address), else NCCL's init
lines in the job's logs (:func:`init_places`), else the dump file's host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb

from faultline.classifiers.hangs import Hang, RankDump, analyse
from faultline.pipeline.inflate import gunzip
from faultline.pipeline.parsers import jobout
from faultline.pipeline.parsers.flight_recorder import rank_from_path
from faultline.pipeline.text import decode, split_lines
from faultline.schemas import arrowrows
from faultline.schemas.tables import COLLECTIVE_HANGS

_IDENTITY = re.compile(jobout.IDENTITY_RE)


def rebuild(con: duckdb.DuckDBPyConnection) -> int:
    """Replace ``collective_hangs``; returns its rows."""
    rows = con.execute("""
        SELECT coalesce(job_id, ''), rank, path, host, attrs FROM events
        WHERE kind = 'flight_recorder_dump' AND rank IS NOT NULL ORDER BY path""").fetchall()
    # a dump with the same bytes as another rank's is still that rank's dump: the load
    # keeps one file's events (files.duplicate_of), the rank and job are in each path
    for path, job, attrs in con.execute("""
            SELECT f.path, coalesce(e.job_id, ''), e.attrs FROM files f
            JOIN events e ON e.path = f.duplicate_of AND e.kind = 'flight_recorder_dump'
            WHERE f.source = 'flight_recorder' ORDER BY f.path""").fetchall():
        rank = rank_from_path(path)
        if rank is not None:
            summary = json.loads(attrs)
            summary["rank"] = rank
            rows.append((job, rank, path, None, json.dumps(summary)))
    con.execute("DELETE FROM collective_hangs")
    by_job: dict[str, list[RankDump]] = {}
    dump_host: dict[tuple[str, int], str] = {}
    for job, rank, path, host, attrs in rows:
        by_job.setdefault(job, []).append(RankDump(rank, path, json.loads(attrs)))
        if host:
            dump_host.setdefault((job, rank), host)
    out = []
    for job, dumps in sorted(by_job.items()):
        hangs = analyse(job, dumps)
        places = places_of(con, job, {r for h in hangs for r in h.culprit_ranks}, dump_host)
        out.extend(_row(h, places) for h in hangs)
    if out:
        table = arrowrows.rows_table(out, COLLECTIVE_HANGS)
        con.register("new_hangs", table)
        con.execute("INSERT INTO collective_hangs SELECT * FROM new_hangs")
        con.unregister("new_hangs")
    return len(out)


def places_of(con: duckdb.DuckDBPyConnection, job: str, ranks: set[int],
              dump_host: dict[tuple[str, int], str]) -> dict[int, tuple[str | None, int | None]]:
    """rank -> (host, GPU index) from the job's events of that rank."""
    if not ranks:
        return {}
    found = con.execute("""
        SELECT rank, mode(host) AS host, max(gpu_index) AS gpu FROM events
        WHERE coalesce(job_id, '') = ? AND rank IN (SELECT unnest(?::INTEGER[]))
          AND host IS NOT NULL AND kind <> 'flight_recorder_dump'
        GROUP BY rank""", [job, sorted(ranks)]).fetchall()
    places = {r: (h, g) for r, h, g in found if g is not None}
    lacking = ranks - set(places)
    if lacking:
        inits = init_places(con, job)
        for r in lacking:
            if r in inits:
                places[r] = inits[r]
    for r in ranks:
        if r not in places and (job, r) in dump_host:
            places[r] = (dump_host[(job, r)], None)
    for r, h, g in found:
        places.setdefault(r, (h, g))
    return places


def init_places(con: duckdb.DuckDBPyConnection, job: str
                ) -> dict[int, tuple[str | None, int | None]]:
    """rank -> (host, GPU index) from NCCL's init lines in the job's own logs
    (``host:pid:tid [cudaDev] NCCL INFO comm 0x.. rank R nRanks N ... busId ..``,
    :func:`faultline.pipeline.parsers.jobout.identities`): the one way to place a rank
    that wrote nothing else, such as the one that never entered a collective. The job
    logs are read again here, for the jobs with dumps only (a file gone since its
    ingest places nothing). The GPU index is the inventory's for the busId's PCI
    address, else NCCL's cudaDev."""
    paths = [p for (p,) in con.execute(
        "SELECT path FROM files WHERE source = 'job' AND duplicate_of IS NULL "
        "AND (path LIKE ? OR path LIKE ?) ORDER BY path",
        [f"%/jobs/{job}/%", f"%slurm-{job}.out%"]).fetchall()]
    inventory = {(h, pci): int(i) for h, pci, i in con.execute(
        "SELECT host, attrs->>'pci', max(CAST(attrs->>'index' AS INTEGER)) FROM events "
        "WHERE kind = 'gpu_inventory' AND attrs->>'index' IS NOT NULL GROUP BY ALL"
    ).fetchall()}
    out: dict[int, tuple[str | None, int | None]] = {}
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        if data[:2] == b"\x1f\x8b":
            data, _problem = gunzip(data)
        lines = split_lines(decode(data))
        idx = [i for i, ln in enumerate(lines) if _IDENTITY.search(ln)]
        _labels, ranks = jobout.identities(lines, idx, jobout.is_labelled(lines))
        for r, place in ranks.items():
            gpu = inventory.get((place.host, place.device), place.cuda_dev)
            out.setdefault(r, (place.host, gpu))
    return out


def _row(h: Hang, places: dict[int, tuple[str | None, int | None]]) -> dict:
    host, gpu = places.get(h.culprit_ranks[0], (None, None)) if h.culprit_ranks else (None, None)
    return {"job_id": h.job_id, "pg_id": h.pg_id, "pg_name": h.pg_name, "pg_desc": h.pg_desc,
            "is_p2p": h.is_p2p, "collective_seq_id": h.collective_seq_id, "op": h.op,
            "sizes": json.dumps(h.sizes), "dtypes": json.dumps(h.dtypes), "ranks": h.ranks,
            "missing_ranks": h.missing_ranks, "verdict": h.verdict,
            "culprit_ranks": h.culprit_ranks, "culprit_host": host, "culprit_gpu": gpu,
            "evidence_path": h.evidence_path, "dumps": h.dumps}
