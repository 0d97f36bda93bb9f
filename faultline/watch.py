"""``faultline watch``: keep ingesting what is new and print each interruption once.

Each cycle calls the ingest entry point (:func:`faultline.pipeline.run.ingest`) in this
process with one worker, so it reads exactly what ``faultline ingest`` would read (new,
grown and changed files) and commits in the same single transaction; then it compares
the ``interruptions`` table with what was printed before.

*Decided*: an interruption is printed on the first cycle after which it is a row of
``interruptions``, that is once its attempt's end record is in the job records and its
run went on (the next attempt's record is there too: INTERFACE.md's definition, the one
a batch ingest applies). Its verdict is the batch verdict over the logs read so far.

*Revision*: a later cycle in which the same ``interruption_id`` (run, job id and the
attempt's start: stable across cycles) has another component, culprit host or culprit
GPU prints a revision naming what it was and what it is now; one that is no longer an
interruption at all prints a revision to ``withdrawn``. Nothing is printed twice.

What was printed is kept in ``<db>.watch.json`` (plain JSON) beside the database, so a
restarted watch, or a second one on the same database, goes on where the last left
off. It is written after a cycle's lines are printed; a Ctrl-C between the two can
print those lines again next time (never lose them). A watch started on a database
that already holds interruptions prints only the ones that come after. The state is
read and written under the database's lock, so two watches never print the same line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICT = ("component", "culprit_host", "culprit_gpu")
STATE_VERSION = 1
COLUMNS = ("interruption_id", "run", "job_id", "failed_at", "planned", "component",
           "category", "signal_family", "culprit_host", "culprit_gpu",
           "culprit_gpu_serial", "surfaced_host", "surfaced_gpu", "root_event_id",
           "rule_id", "confidence")


def state_path(db: Path) -> Path:
    return db.with_name(db.name + ".watch.json")


@dataclass
class CycleResult:
    """What one cycle did: ``status`` ok, busy (another process held the lock),
    waiting (no log recognized yet) or error (``message`` says why)."""

    status: str
    records: list[dict[str, Any]] = field(default_factory=list)  # printed, in order
    new_files: int = 0
    seconds: float = 0.0
    message: str = ""


def current(con: Any) -> dict[str, dict[str, Any]]:
    """Every interruption with its root line, as the JSON fields watch prints."""
    rows = con.execute(f"""
        SELECT {', '.join('i.' + c for c in COLUMNS)},
               e.message, e.path, e.line_no, e.host
        FROM interruptions i LEFT JOIN events e ON e.event_id = i.root_event_id
        ORDER BY i.failed_at, i.interruption_id
    """).fetchall()  # noqa: S608 - column names are constants of this module
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        rec = dict(zip(COLUMNS, r[:len(COLUMNS)], strict=True))
        failed = rec["failed_at"]
        if isinstance(failed, dt.datetime):
            rec["failed_at"] = failed.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
        if rec["confidence"] is not None:
            rec["confidence"] = float(rec["confidence"])
        msg, path, line_no, host = r[len(COLUMNS):]
        rec["root_line"], rec["root_path"], rec["root_line_no"] = msg, path, line_no
        rec["root_host"] = host
        out[rec["interruption_id"]] = rec
    return out


def _verdict(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: rec.get(k) for k in VERDICT}


def changes(printed: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]],
            db: Path) -> list[dict[str, Any]]:
    """What to print, given the verdicts printed before and the table now: new
    interruptions and revisions, in order of failure time. Pure: the caller records."""
    out: list[dict[str, Any]] = []
    for iid, rec in now.items():
        was = printed.get(iid)
        explain = f"faultline explain --db {db} {iid}"
        if was is None:
            out.append({"kind": "interruption", **rec, "explain": explain})
        elif _verdict(rec) != _verdict(was):
            out.append({"kind": "revision", **rec, "was": was, "explain": explain})
    for iid, was in printed.items():
        if iid not in now and was.get("component") != "withdrawn":
            out.append({"kind": "revision", "interruption_id": iid, "component": "withdrawn",
                        "culprit_host": None, "culprit_gpu": None, "was": was,
                        "failed_at": was.get("failed_at")})
    out.sort(key=lambda r: (r.get("failed_at") or "", r["interruption_id"]))
    return out


def render_text(rec: dict[str, Any]) -> str:
    """A record as the lines an operator reads (``--format text``)."""
    where = _where(rec)
    if rec["kind"] == "revision":
        was = rec["was"]
        return (f"revised: {rec['interruption_id']} ({rec.get('run')} job {rec.get('job_id')}, "
                f"failed {rec.get('failed_at')}): was {was.get('component')}"
                f"{_where(was, ' on ')}, now {rec['component']}{_where(rec, ' on ')}"
                + (f"\n  {rec['explain']}" if rec.get("explain") else ""))
    root = rec.get("root_line")
    head = (f"{rec['failed_at']}  {rec['run']} job {rec['job_id']}  {rec['component']}"
            f"{'  ' + where if where else ''}")
    lines = [head]
    if root:
        loc = f"{rec['root_path']}:{rec['root_line_no']}" if rec.get("root_path") else ""
        lines.append(f"  root: {' '.join(root.split())[:300]}" + (f"  ({loc})" if loc else ""))
    else:
        lines.append(f"  root: none ({rec.get('rule_id')})")
    lines.append(f"  {rec['explain']}")
    return "\n".join(lines)


def _where(rec: dict[str, Any], lead: str = "") -> str:
    """Culprit host/GPU, else where the root surfaced (marked so), else nothing."""
    host, gpu = rec.get("culprit_host"), rec.get("culprit_gpu")
    tag = ""
    if host is None and rec.get("surfaced_host"):
        host, gpu, tag = rec.get("surfaced_host"), rec.get("surfaced_gpu"), " (surfaced)"
    if host is None:
        return ""
    return f"{lead}{host}" + (f" GPU {gpu}" if gpu is not None else "") + tag


def render_jsonl(rec: dict[str, Any]) -> str:
    """One JSON object on one line (``--format jsonl``)."""
    return json.dumps(rec, sort_keys=True, default=str)


class Watcher:
    """The watch loop's state and its :meth:`cycle`; :meth:`run` is the loop itself.

    ``emit`` is called with each record to print (its ``kind`` is ``interruption`` or
    ``revision``); ``ingest_kw`` are :func:`faultline.pipeline.run.ingest`'s options."""

    def __init__(self, corpus: list[Path], db: Path, emit: Callable[[dict[str, Any]], None],
                 **ingest_kw: Any) -> None:
        self.corpus = corpus
        self.db = db.resolve()
        self.emit = emit
        self.ingest_kw = {"workers": 1, **ingest_kw}
        self.cycles = 0
        self._ingested = False
        self._fresh = not self.db.exists()  # a new database: nothing was printed yet

    def cycle(self) -> CycleResult:
        """Ingest what is new, then print what is newly decided or revised. Raises
        :class:`~faultline.pipeline.run.IngestError` on the first cycle for bad input
        (the caller exits 2 as ingest does); on later cycles it says so and goes on.
        Ctrl-C inside propagates: the ingest rolls back what it was writing."""
        from faultline.pipeline.run import DatabaseBusy, IngestError, NothingRecognized
        from faultline.pipeline.run import ingest as run_ingest

        t0 = time.perf_counter()
        first = not self._ingested  # bad input is bad usage until one cycle has worked
        self.cycles += 1
        try:
            summary = run_ingest(self.corpus, self.db, **self.ingest_kw)
        except DatabaseBusy as exc:
            return CycleResult("busy", message=str(exc), seconds=time.perf_counter() - t0)
        except NothingRecognized as exc:
            return CycleResult("waiting", message=str(exc), seconds=time.perf_counter() - t0)
        except IngestError as exc:
            if first:
                raise
            return CycleResult("error", message=str(exc), seconds=time.perf_counter() - t0)
        self._ingested = True
        try:
            records = self._report()
        except DatabaseBusy as exc:
            return CycleResult("busy", message=str(exc), new_files=summary.new_files,
                               seconds=time.perf_counter() - t0)
        return CycleResult("ok", records, summary.new_files, time.perf_counter() - t0)

    def _report(self) -> list[dict[str, Any]]:
        """Under the database's lock: read the table and the state, print, record."""
        from faultline import db as fdb
        from faultline.pipeline.run import exclusive

        with exclusive(self.db):
            con = fdb.connect(self.db, read_only=True)
            try:
                now = current(con)
            finally:
                con.close()
            state = self._load_state()
            if state is None:  # an existing database met for the first time
                state = {} if self._fresh else {
                    i: {**_verdict(r), "failed_at": r["failed_at"]} for i, r in now.items()}
            self._fresh = False
            todo = changes(state, now, self.db)
            done: list[dict[str, Any]] = []
            try:
                for rec in todo:
                    self.emit(rec)
                    state[rec["interruption_id"]] = {**_verdict(rec),
                                                     "failed_at": rec.get("failed_at")}
                    done.append(rec)
            finally:
                self._save_state(state)
        return done

    def _load_state(self) -> dict[str, dict[str, Any]] | None:
        path = state_path(self.db)
        if self._fresh:  # the database is new: an old state file is another's
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return None
        printed = data.get("printed")
        return printed if isinstance(printed, dict) else None

    def _save_state(self, printed: dict[str, dict[str, Any]]) -> None:
        path = state_path(self.db)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, "printed": printed},
                                  sort_keys=True), encoding="utf-8")
        tmp.replace(path)

    def run(self, interval: float, status: Callable[[str], None],
            cycles: int | None = None) -> None:
        """Cycle every ``interval`` seconds (from one cycle's start to the next) until
        Ctrl-C (``KeyboardInterrupt`` propagates) or ``cycles`` cycles are done."""
        last_message = ""
        while cycles is None or self.cycles < cycles:
            started = time.monotonic()
            res = self.cycle()
            if res.status != "ok" and res.message != last_message:
                status(f"{res.status}: {res.message}; trying again in {interval:g} s")
            last_message = res.message
            if res.status == "ok" and (res.records or res.new_files):
                n_new = sum(r["kind"] == "interruption" for r in res.records)
                status(f"cycle {self.cycles}: {res.new_files} files new or changed, "
                       f"{n_new} new interruptions, {len(res.records) - n_new} revisions, "
                       f"{res.seconds:.1f} s")
            if cycles is not None and self.cycles >= cycles:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
