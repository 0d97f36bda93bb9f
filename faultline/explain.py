"""``faultline explain``: the evidence chain behind one root cause, as data then text.

What a reader needs to trust or overturn a verdict: every message whole (wrapped, never
cut), a line the cascade wrote on many hosts once with the hosts that wrote it, the
reasoning behind a straggler verdict (which ranks reported the watchdog timeout, which
never did), and an operator's override with its note, author and time.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from faultline.classifiers import fr_tier
from faultline.report import ReportError, _fmt, _when

_ROLE_ORDER = {"root": 0, "corroborating": 1, "contradicting": 2, "history": 3}
_ROLE_STYLE = {"root": "bold red", "corroborating": "green", "contradicting": "yellow",
               "history": "dim"}
_DIGITS = re.compile(r"\d+")
_STAMP = re.compile(r"^\s*\[[^\]]*\]\s*")  # a leading [timestamp] some writers add
HOSTS_NAMED = 8  # hosts listed by name in a grouped line; the rest are counted


def _shape(message: str, host: str | None) -> str:
    """A message with what differs from host to host taken out (the host's own name,
    a leading timestamp, pids, ports and addresses' numbers): equal shapes are the
    same line written by many hosts."""
    m = _STAMP.sub("", message)
    if host:
        m = m.replace(host, "<host>")
    return _DIGITS.sub("#", m)


def group_evidence(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Evidence rows grouped by (role, kind, xid, shape), in role then time order; each
    group keeps its first row and the hosts and paths that wrote the same line."""
    groups: dict[tuple, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (_ROLE_ORDER.get(r["role"], 9), r["ts"] is None,
                                         r["ts"] or 0, r["event_id"])):
        key = (r["role"], r["kind"], r["xid"], _shape(r["message"], r["host"]))
        g = groups.get(key)
        if g is None:
            groups[key] = g = {**r, "hosts": [], "events": 0, "messages": set(),
                               "lines": set()}
        g["events"] += 1
        g["messages"].add(r["message"])
        g["lines"].add((r.get("path"), r.get("line_no")))
        if r["host"] and r["host"] not in g["hosts"]:
            g["hosts"].append(r["host"])
    out = []
    for g in groups.values():
        g["identical"] = len(g.pop("messages")) == 1
        g["one_line"] = len(g.pop("lines")) == 1  # one line naming many hosts
        out.append(g)
    return out


def _ranges(ranks: list[int]) -> str:
    """0,1,2,3,8 -> '0-3, 8'."""
    out: list[str] = []
    for r in sorted(set(ranks)):
        if out and r == int(out[-1].rsplit("-", 1)[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)


def straggler_reasoning(con: duckdb.DuckDBPyConnection, head: dict[str, Any]
                        ) -> dict[str, Any] | None:
    """For a verdict from watchdog timeouts alone: per host, the ranks whose watchdog
    fired (as the rebuild read them: the job's timeouts from the attempt's start to 5
    min after the failure), the ranks a host is short of, and hosts that never wrote
    one."""
    if not str(head["rule_id"]).startswith("nccl.watchdog"):
        return None
    from faultline.pipeline.hostlist import try_expand_hostlist

    att = con.execute("""
        SELECT started_at, nodelist FROM attempts
        WHERE run = ? AND job_id = ? AND ended_at = ? ORDER BY started_at LIMIT 1
    """, [head["run"], head["job_id"], head["failed_at"]]).fetchall()
    if not att:
        return None
    started, nodelist = att[0]
    ranks: dict[str, set[int]] = {}
    for host, rank in con.execute("""
            SELECT coalesce(host, ''), rank FROM events
            WHERE kind = 'nccl_watchdog' AND job_id = ?
              AND ts BETWEEN ? AND ? + INTERVAL 300 SECOND
            """, [head["job_id"], started, head["failed_at"]]).fetchall():
        ranks.setdefault(host, set())
        if rank is not None:
            ranks[host].add(rank)
    hosts = try_expand_hostlist(nodelist or "")
    full = max((len(r) for h, r in ranks.items() if h), default=0)
    reported = [{"host": h, "ranks": _ranges(sorted(r)), "count": len(r),
                 "short": len(r) < full} for h, r in sorted(ranks.items()) if h]
    missing: list[int] = []
    culprit = head.get("culprit_host") or head.get("surfaced_host")
    if culprit in ranks and ranks[culprit] and len(ranks[culprit]) < full:
        base = min(ranks[culprit]) // 8 * 8  # the host's ranks, 8 GPUs a node
        missing = sorted(set(range(base, base + full)) - ranks[culprit])
    return {"full": full, "reported": reported,
            "silent": [h for h in hosts if h not in ranks],
            "culprit_missing_ranks": _ranges(missing), "hosts": len(hosts)}


def explain(con: duckdb.DuckDBPyConnection, interruption_id: str) -> dict[str, Any]:
    """Everything ``render_explain`` prints about one interruption."""
    rows = con.execute("SELECT * FROM interruptions WHERE interruption_id = ?",
                       [interruption_id]).fetchall()
    if not rows:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        held = "overrides" in tables and con.execute(
            "SELECT count(*) FROM overrides WHERE interruption_id = ?",
            [interruption_id]).fetchall()[0][0]
        raise ReportError(f"no interruption {interruption_id!r}" + (
            " (an override is stored for it: it applies if an ingest builds it)"
            if held else ""))
    cols = [d[0] for d in con.description]
    head = dict(zip(cols, rows[0], strict=True))
    ev = con.execute("""
        SELECT x.role, e.ts, e.host, e.kind, e.xid, e.gpu_index, e.message, e.path,
               e.line_no, e.event_id
        FROM interruption_evidence x JOIN events e USING (event_id)
        WHERE x.interruption_id = ? AND x.role <> 'symptom'
    """, [interruption_id]).fetchall()
    evidence = [dict(zip(("role", "ts", "host", "kind", "xid", "gpu_index", "message",
                          "path", "line_no", "event_id"), r, strict=True)) for r in ev]
    symptoms = con.execute("""
        SELECT e.host, e.kind, count(*) FROM interruption_evidence x
        JOIN events e USING (event_id)
        WHERE x.interruption_id = ? AND x.role = 'symptom'
        GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
    """, [interruption_id]).fetchall()
    override = None
    if "overrides" in {r[0] for r in con.execute("SHOW TABLES").fetchall()}:
        o = con.execute("SELECT component, note, created_by, created_at, origin "
                        "FROM overrides WHERE interruption_id = ?",
                        [interruption_id]).fetchall()
        if o:
            override = dict(zip(("component", "note", "created_by", "created_at",
                                 "origin"), o[0], strict=True))
    return {"interruption": head, "evidence": evidence,
            "evidence_groups": group_evidence(evidence),
            "symptoms": [{"host": h, "kind": k, "count": n} for h, k, n in symptoms],
            "override": override, "straggler": straggler_reasoning(con, head),
            "hangs": hang_words(con, str(head["job_id"]))}


def hang_words(con: duckdb.DuckDBPyConnection, job_id: str) -> list[str]:
    """The job's Flight Recorder verdicts (``collective_hangs``), each in words."""
    if "collective_hangs" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}:
        return []
    rows = con.execute("""
        SELECT verdict, coalesce(CAST(pg_id AS VARCHAR), pg_name), pg_desc, op,
               collective_seq_id, culprit_ranks, missing_ranks, culprit_host, culprit_gpu,
               evidence_path, is_p2p, sizes, dtypes
        FROM collective_hangs WHERE job_id = ? ORDER BY is_p2p, pg_name""",
                       [job_id]).fetchall()
    out = []
    for (verdict, pg, desc, op, seq, culprits, missing, host, gpu, path, p2p, sizes,
         dtypes) in rows:
        if verdict == "incomplete_dumps":
            out.append(f"PG {pg} {desc} {op or '?'} #{seq}: no dump from ranks "
                       f"{_ranges(list(missing))}, no culprit named")
        elif culprits:
            detail = fr_tier.mismatch_detail(op, sizes, dtypes, list(culprits)) \
                if verdict == "mismatch" else None
            out.append(fr_tier.words(verdict, pg, desc, op, seq, list(culprits), host, gpu,
                                     p2p, detail) + f" ({path})")
        else:
            out.append(f"PG {pg} {desc} {op or '?'} #{seq}: every member entered, none "
                       "finished: no single rank stands out")
    return out


def render_explain(data: dict[str, Any], console: Console) -> None:
    """The chain as text; every message printed whole, wrapped to the terminal."""
    i = data["interruption"]
    console.print(f"[bold]{i['interruption_id']}[/]  run {escape(i['run'])}  job "
                  f"{escape(i['job_id'])}  failed at {i['failed_at']}")
    kind = "planned" if i["planned"] else "unexpected"
    console.print(f"root cause: [bold]{escape(i['component'])}[/] ({i['category']}, "
                  f"{kind}); signal family {escape(i['signal_family'] or '-')}; decided by "
                  f"{escape(i['rule_id'])} with confidence {i['confidence']:.2f}")
    if (o := data.get("override")) is not None:
        console.print(f"[cyan]override[/] by {escape(o['created_by'])} at "
                      f"{_when(o['created_at'])}: {escape(o['component'])}"
                      + (f" - {escape(o['note'])}" if o["note"] else " (no note)")
                      + "; the evidence below is what the classifiers saw "
                      f"(faultline overrides remove --db DB {i['interruption_id']} to "
                      "let them decide again)")
    console.print(f"culprit: {escape(_culprit_text(i))}; lost work "
                  f"{_fmt(i['lost_seconds'], '.0f')} s; downtime "
                  f"{_fmt(i['downtime_seconds'], '.0f')} s")
    if i.get("surfaced_host") and i.get("surfaced_host") != i["culprit_host"]:
        where = i["surfaced_host"]
        if i.get("surfaced_gpu") is not None:
            where += f" GPU {i['surfaced_gpu']}"
        if i.get("surfaced_gpu_serial"):
            where += f" (serial {i['surfaced_gpu_serial']})"
        console.print(f"surfaced on: {escape(where)}")
    if data["evidence_groups"]:
        t = Table.grid(padding=(0, 1))
        t.add_column(no_wrap=True, min_width=13)
        t.add_column(overflow="fold")  # wraps; a long token folds, nothing is cut
        for g in data["evidence_groups"]:
            t.add_row(f"[{_ROLE_STYLE.get(g['role'], '')}]{g['role']}[/]",
                      escape(f"{g['ts']} {g['host'] or '-'} {g['kind']}: {g['message']}"))
            where = f"{g['path']}:{g['line_no']}"
            if len(g["hosts"]) > 1:
                names = ", ".join(g["hosts"][:HOSTS_NAMED])
                more = len(g["hosts"]) - HOSTS_NAMED
                seen = (f"one line naming {len(g['hosts'])} hosts" if g["one_line"]
                        else f"the same line on {len(g['hosts'])} hosts"
                        + ("" if g["identical"] else " (numbers differ)"))
                where = (f"{seen}: {names}" + (f" and {more} more" if more > 0 else "")
                         + f"; {'at' if g['one_line'] else 'first at'} {where}")
            t.add_row("", f"[dim]{escape(where)}[/]")
        console.print(t)
    if (s := data.get("straggler")) is not None:
        _render_straggler(s, i, console)
    for words in data.get("hangs") or []:
        console.print(f"Flight Recorder: {escape(words)}")
    if data["symptoms"]:
        by_host: dict[str, int] = {}
        for s in data["symptoms"]:
            by_host[s["host"] or "-"] = by_host.get(s["host"] or "-", 0) + s["count"]
        total = sum(by_host.values())
        top = sorted(by_host.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        console.print(f"symptoms: {total} events on {len(by_host)} hosts; most on "
                      + ", ".join(f"{escape(h)} ({n})" for h, n in top))


def _culprit_text(i: dict[str, Any]) -> str:
    """The hardware suspect (host, GPU, serial, UUID), or why there is none: a
    software or unknown cause has no part to replace, only a place it surfaced."""
    if not i["culprit_host"]:
        return "- (no hardware suspect)" if i.get("surfaced_host") else "-"
    culprit = i["culprit_host"]
    if i["culprit_gpu"] is not None:
        culprit += f" GPU {i['culprit_gpu']}"
    ids = [f"serial {i['culprit_gpu_serial']}" if i["culprit_gpu_serial"] else "",
           f"uuid {i['culprit_gpu_uuid']}" if i.get("culprit_gpu_uuid") else ""]
    if any(ids):
        culprit += " (" + ", ".join(x for x in ids if x) + ")"
    return culprit + ", hardware suspect"


def _render_straggler(s: dict[str, Any], i: dict[str, Any], console: Console) -> None:
    full = [r for r in s["reported"] if not r["short"]]
    short = [r for r in s["reported"] if r["short"]]
    console.print(f"why: only NCCL watchdog timeouts; {len(s['reported'])} of the job's "
                  f"{s['hosts']} hosts reported one, most from {s['full']} ranks each")
    if full:
        more = len(full) - HOSTS_NAMED
        console.print(f"  reported on every rank: {len(full)} hosts ("
                      + escape(", ".join(r["host"] for r in full[:HOSTS_NAMED]))
                      + (f" and {more} more" if more > 0 else "") + ")")
    for r in short:
        line = (f"  reported by fewer ranks: {r['host']}: {r['count']} of {s['full']} "
                f"(ranks {r['ranks']})")
        if r["host"] == (i["culprit_host"] or i.get("surfaced_host")) \
                and s["culprit_missing_ranks"]:
            line += f"; never reported: ranks {s['culprit_missing_ranks']}"
        console.print(escape(line))
    if s["silent"]:
        console.print("  never reported a timeout: " + escape(", ".join(s["silent"])))
    straggler = i["culprit_host"] or i.get("surfaced_host")
    if i["rule_id"] == "nccl.watchdog_straggler" and straggler:
        console.print(f"  so the straggler is {escape(straggler)}: the one host "
                      "whose ranks did not all time out, i.e. the one the others waited "
                      "for")
    elif not short and not s["silent"]:
        console.print("  every host timed out on every rank: no straggler stands out")
    else:
        console.print("  more than one host fell short: no single straggler")
