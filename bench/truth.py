"""How many of a simulated corpus's interruptions a database got right.

    python bench/truth.py DB TRUTH_DIR

The simulator writes the ground truth of every interruption of the training run
(``truth/interruptions.csv``: job, failure time, component, culprit host). Each is
matched to the database's interruption of the same job whose ``failed_at`` is nearest
(within ``--within`` seconds), and the script prints, as one JSON object: how many were
matched, how many have the truth's component, and how many name the truth's culprit host
where the truth names one (the hardware suspect ``culprit_host``, else the host where a
software root surfaced, ``surfaced_host``, as the previous sessions counted it). The
figures the bench quotes for ``llama3`` ("466 of 466 components") come from here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb


def check(db: Path, truth: Path, within_s: float = 600.0) -> dict:
    """Matched, component and culprit-host agreement of ``db`` against ``truth``."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("CREATE TEMP TABLE truth AS SELECT * FROM read_csv(?, header = true, "
                    "all_varchar = true)", [str(truth / "interruptions.csv")])
        n, hosts, matched, component, host_ok = con.execute("""
            WITH t AS (SELECT interruption, job_id, component,
                              nullif(culprit_host, '') AS culprit_host,
                              failed_at::TIMESTAMPTZ AS failed_at FROM truth),
            m AS (
                SELECT t.interruption, t.component AS want, t.culprit_host AS want_host,
                       i.component AS got, coalesce(i.culprit_host, i.surfaced_host) AS got_host,
                       row_number() OVER (PARTITION BY t.interruption ORDER BY
                           abs(epoch(i.failed_at) - epoch(t.failed_at))) AS k
                FROM t JOIN interruptions i ON i.job_id = t.job_id
                 AND abs(epoch(i.failed_at) - epoch(t.failed_at)) <= ?)
            SELECT (SELECT count(*) FROM t), (SELECT count(culprit_host) FROM t), count(*),
                   count(*) FILTER (WHERE got = want),
                   count(*) FILTER (WHERE got_host = want_host)
            FROM m WHERE k = 1""", [within_s]).fetchone()
    finally:
        con.close()
    return {"truth": n, "matched": matched, "component_equal": component,
            "truth_hosts": hosts, "culprit_host_equal": host_ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("truth", type=Path, help="the simulator's truth/ directory")
    ap.add_argument("--within", type=float, default=600.0,
                    help="seconds between the truth's and the database's failure time")
    args = ap.parse_args()
    print(json.dumps(check(args.db, args.truth, args.within)))


if __name__ == "__main__":
    main()
