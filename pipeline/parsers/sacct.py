"""sacct dumps: one ``job_record`` event per job, steps folded in; and the attempts.

Read by the header row, whatever the columns, their order and the delimiter::

    JobID|JobName|State|Start|End|NodeList|ExitCode|Reason|AdminComment
    81234|llama3-405b|NODE_FAIL|2024-07-01T08:00:12|2024-07-01T12:00:31|node[0000-2047]|0:0|None|
    81234.batch|batch|CANCELLED|2024-07-01T08:00:12|2024-07-01T12:00:31|node0000|0:15||

- Delimiter: detected from the header (field names are words; what separates them is the
  delimiter, ``|`` for ``--parsable2``, any string given to ``--delimiter`` such as
  ``|#``). A header ending in the delimiter means ``--parsable``: every row ends in it too.
- Free text with embedded newlines: a physical line that leaves a record short of fields
  is joined with the next (as ``gcm``'s ``get_sacct_lines`` does); a record that ends up
  with the wrong number of fields is rejected, every physical line of it.
- Rows: ``81234.batch``/``.extern``/``.0`` fold into the job row above them (same base id);
  ``123_4``, ``123_[1-3]`` and ``123+0`` stay text. A job row whose id repeats (``sacct -D``
  shows each requeue) starts a new record: one attempt each. A step whose job row is not
  right above it joins the last record of its job, or stands for its job if there is none.
- Times: ``Unknown``/``None``/empty are missing; zone-less times read in ``ctx.tz``.

:func:`attempts` turns ``job_record`` events into rows of the ``attempts`` table.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from faultline.pipeline.hostlist import HostlistError, expand_hostlist
from faultline.pipeline.parsers import sacct_json
from faultline.pipeline.parsers.joblog import cap
from faultline.pipeline.records import INT32_MAX, FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range, parse_iso

# A job starting more than this after its run's end so far starts a new run.
RUN_GAP_US = 24 * 3600 * 1_000_000
MISSING = frozenset({"", "Unknown", "None", "N/A", "(null)"})

# sacct column -> attrs key (matched case-insensitively). Everything else goes to "extra".
KNOWN_COLUMNS = {
    "jobid": "job_id",
    "jobname": "job_name",
    "user": "user",
    "state": "state",
    "start": "start",
    "end": "end",
    "nodelist": "nodelist",
    "exitcode": "exit_code",
    "reason": "reason",
    "admincomment": "admin_comment",
    "comment": "comment",
}
NODE_COUNT_COLUMNS = ("nnodes", "allocnodes")
_HEADER_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_STATE = re.compile(r"^([A-Za-z_]+)\+?(?:\s+by\s+(\S+))?$")


class NotSacct(ValueError):
    """The first line is not a sacct header (no JobID column, or not a word list)."""


@dataclass(frozen=True, slots=True)
class Header:
    columns: tuple[str, ...]
    delimiter: str
    trailing: bool  # --parsable: every row ends with the delimiter

    @property
    def separators(self) -> int:
        """Delimiters a complete row holds."""
        return len(self.columns) - 1 + (1 if self.trailing else 0)

    def split(self, record: str) -> list[str]:
        fields = record.split(self.delimiter)
        if self.trailing and fields and fields[-1] == "":
            fields.pop()
        return fields


def read_header(line: str) -> Header:
    """The columns and delimiter of a sacct header line; :class:`NotSacct` if it is none."""
    text = line.strip()
    runs = re.findall(r"[^A-Za-z0-9_]+", text)
    if not runs:
        columns: tuple[str, ...] = (text,) if text else ()
        header = Header(columns, "|", False)
    else:
        delimiter = Counter(runs).most_common(1)[0][0]
        trailing = text.endswith(delimiter)
        body = text[: -len(delimiter)] if trailing else text
        header = Header(tuple(body.split(delimiter)), delimiter, trailing)
    if not header.columns or not all(_HEADER_WORD.match(c) for c in header.columns):
        raise NotSacct(f"not a sacct header: {text[:80]!r}")
    if "jobid" not in {c.lower() for c in header.columns}:
        raise NotSacct("sacct header has no JobID column")
    return header


def looks_like_sacct(first_line: str) -> bool:
    """Whether ``first_line`` is a sacct header this parser can read (for sniffing)."""
    if "jobid" not in first_line.lower():  # a header has a JobID column (ASCII words)
        return False
    try:
        read_header(first_line)
    except NotSacct:
        return False
    return True


@dataclass(slots=True)
class Record:
    """One logical sacct row: its fields and the physical lines (0-based) it spans."""

    first: int
    last: int
    fields: list[str]
    lines: list[str]


def records(lines: list[str], header: Header, start: int,
            rejects: list[Reject]) -> list[Record]:
    """Logical rows from physical ``lines[start:]``, re-joining embedded newlines.

    Lines of records that cannot be completed (too many fields, or still short at the
    end of the file) are appended to ``rejects``.
    """
    want = header.separators
    delim = header.delimiter
    header_text = lines[start - 1].strip() if start else None
    out: list[Record] = []
    open_lines: list[str] = []
    open_first = -1
    open_count = 0

    def reject_open(reason: str) -> None:
        for k in range(len(open_lines)):
            rejects.append(Reject.of(open_first + k + 1, reason, open_lines[k]))

    for i in range(start, len(lines)):
        line = lines[i]
        count = line.count(delim)
        if open_lines:
            if open_count + count <= want:
                open_lines.append(line)
                open_count += count
                if open_count == want:
                    fields = header.split("\n".join(open_lines))
                    if len(fields) == len(header.columns):
                        out.append(Record(open_first, i, fields, open_lines))
                    else:
                        reject_open("sacct_field_count")
                    open_lines = []
                continue
            reject_open("sacct_field_count")
            open_lines = []
        if not line.strip() or line.strip() == header_text:
            continue  # blank, or the header repeated (concatenated dumps): routine
        # --parsable rows end with the delimiter: one that does not has a field too many
        if count == want and len(fields := header.split(line)) == len(header.columns):
            out.append(Record(i, i, fields, [line]))
        elif count == want:
            rejects.append(Reject.of(i + 1, "sacct_field_count", line))
        elif count < want:
            open_lines, open_first, open_count = [line], i, count
        else:
            rejects.append(Reject.of(i + 1, "sacct_field_count", line))
    if open_lines:
        reject_open("sacct_truncated_row")
    return out


def rejoined(text: str, joiner: str = "\\n") -> list[str]:
    """The dump's header and logical rows as single lines, embedded newlines replaced by
    ``joiner`` (gcm's ``get_sacct_lines`` writes a literal backslash-n); for checks."""
    lines = split_lines(text)
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return []
    header = read_header(lines[first])
    recs = records(lines, header, first + 1, [])
    return [lines[first], *(joiner.join(r.lines) for r in recs)]


# --- fields to attrs -------------------------------------------------------------------------


# Free text keeps its spaces and newlines; every other known column is trimmed.
FREE_TEXT = frozenset({"comment", "admincomment", "systemcomment", "submitline"})


def _value(raw: str, column: str) -> str | None:
    """A field's value: None when missing; trimmed unless free text or an unknown column."""
    v = raw.strip()
    if v in MISSING:
        return None
    return v if column in KNOWN_COLUMNS and column not in FREE_TEXT else raw


def _time(raw: str | None, ctx: ParseContext) -> tuple[int, bool] | None:
    """A time field; unreadable or out of range (timeutil.in_range) is missing, like
    ``Unknown``: the record stays, its attempt just lacks that end."""
    if raw is None:
        return None
    got = parse_iso(raw, ctx.zone)
    return got if got is not None and in_range(got[0]) else None


def normalize_state(raw: str | None) -> tuple[str | None, str | None]:
    """``CANCELLED by 0`` -> (``CANCELLED``, ``"0"``); ``COMPLETED`` -> (``COMPLETED``, None)."""
    if raw is None:
        return None, None
    m = _STATE.match(raw.strip())
    if m is None:
        return raw.strip(), None
    return m.group(1).upper(), m.group(2)


def split_job_id(job_id: str) -> tuple[str, str | None]:
    """``81234.batch`` -> (``81234``, ``batch``); ``123_4`` -> (``123_4``, None)."""
    base, dot, step = job_id.partition(".")
    return base, (step if dot else None)


@dataclass(slots=True)
class _Job:
    row: dict[str, str | None]  # the job row's fields by lower-cased column (or a step's)
    first: int
    last: int
    lines: list[str]
    steps: list[dict] = field(default_factory=list)
    from_step: bool = False


def _node_count(row: dict[str, str | None], nodelist: str | None) -> int | None:
    for col in NODE_COUNT_COLUMNS:
        v = row.get(col)
        # isdecimal, not isdigit ("²" is a digit int() cannot read); attempts.nodes is
        # a 32-bit column
        if v is not None and v.strip().isdecimal() and int(v) <= INT32_MAX:
            return int(v)
    if nodelist is None:
        return None
    try:
        return len(expand_hostlist(nodelist))
    except HostlistError:
        return None


def job_event(job: _Job, header: Header, ctx: ParseContext) -> ParsedEvent:
    """The ``job_record`` event of one folded job."""
    row = job.row
    lower_to_name = {c.lower(): c for c in header.columns}
    state, cancelled_by = normalize_state(row.get("state"))
    start = _time(row.get("start"), ctx)
    end = _time(row.get("end"), ctx)
    nodelist = row.get("nodelist")
    attrs: dict = {
        "job_id": row.get("jobid"),
        "job_name": row.get("jobname"),
        "user": row.get("user"),
        "state": state,
        "start": start[0] if start else None,
        "end": end[0] if end else None,
        "nodelist": nodelist,
        "nodes": _node_count(row, nodelist),
        "exit_code": row.get("exitcode"),
        "reason": row.get("reason"),
        "admin_comment": row.get("admincomment"),
        "comment": row.get("comment"),
    }
    if cancelled_by is not None:
        attrs["cancelled_by"] = cancelled_by
    extra = {lower_to_name[k]: v for k, v in row.items()
             if k not in KNOWN_COLUMNS and v is not None}
    if extra:
        attrs["extra"] = extra
    if job.steps:
        attrs["steps"] = job.steps
    if job.from_step:
        attrs["from_step"] = True
    when = end or start
    quality = "untimed" if when is None else ("exact" if when[1] else "assumed_tz")
    return ParsedEvent(
        line_no=job.first + 1, line_end=job.last + 1, kind="job_record",
        message=cap("\n".join(job.lines)), ts=when[0] if when else None,
        ts_quality=quality, host=None, job_id=attrs["job_id"], attrs=attrs,
    )


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one sacct dump (see the module docstring); ``sacct --json`` output goes to
    :mod:`.sacct_json`."""
    if text.lstrip("\ufeff \t\r\n")[:1] == "{":
        return sacct_json.parse(text, ctx)
    lines = split_lines(text)
    fp = FileParse(lines=len(lines), shape="sacct")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return fp
    try:
        header = read_header(lines[first])
    except NotSacct:
        fp.rejects.extend(Reject.of(i + 1, "sacct_no_header", ln)
                          for i, ln in enumerate(lines) if ln.strip())
        return fp
    fp.shape = "sacct_parsable" if header.trailing else "sacct_parsable2"
    lower = [c.lower() for c in header.columns]
    jid_col = lower.index("jobid")
    jobs: list[_Job] = []
    last_of: dict[str, _Job] = {}
    for rec in records(lines, header, first + 1, fp.rejects):
        raw_id = rec.fields[jid_col].strip()
        if not raw_id:
            fp.rejects.extend(Reject.of(k + 1, "sacct_no_jobid", lines[k])
                              for k in range(rec.first, rec.last + 1))
            continue
        row = {c: _value(v, c) for c, v in zip(lower, rec.fields, strict=True)}
        base, step = split_job_id(raw_id)
        if step is None:
            job = _Job(row=row, first=rec.first, last=rec.last, lines=list(rec.lines))
            jobs.append(job)
            last_of[base] = job
            continue
        summary = {"step": step, "state": row.get("state"), "exit_code": row.get("exitcode")}
        job = last_of.get(base)
        if job is None:  # a step without its job row: it stands for the job
            job_row = dict(row)
            job_row["jobid"] = base
            job = _Job(row=job_row, first=rec.first, last=rec.last, lines=list(rec.lines),
                       from_step=True)
            jobs.append(job)
            last_of[base] = job
        elif job is jobs[-1] and job.last == rec.first - 1:
            job.last = rec.last
            job.lines.extend(rec.lines)
        # else: folded into an earlier job's attrs; its lines stay routine
        job.steps.append(summary)
    fp.events.extend(job_event(job, header, ctx) for job in jobs)
    return fp


# --- attempts -----------------------------------------------------------------------------------


def run_name(job_name: str | None, user: str | None, job_id: str) -> str:
    """The name of a run: ``user/job_name`` where sacct gives a user, else the job name."""
    name = job_name or f"job-{job_id}"
    return f"{user}/{name}" if user else name


def attempts(events: Iterable[ParsedEvent]) -> list[dict]:
    """Rows of the ``attempts`` table (keys: its columns, in order) from ``job_record``
    events (any files, any order).

    A run is the jobs of one name (and user, where given), each starting within 24 h of
    the end of the run so far (a job still running keeps the run open). Every job record
    is one attempt: a requeued job (same JobID, ``sacct -D``) gives one per requeue.
    Attempts are numbered 1..n by start time within their run. The first run of a name
    is called :func:`run_name`; a later run of the same name gets ``#2``, ``#3``...
    Jobs that never started (no Start) are not attempts. Times are epoch microseconds.
    """
    jobs = [e for e in events if e.kind == "job_record" and e.attrs.get("start") is not None]
    jobs.sort(key=lambda e: (e.attrs["start"], str(e.attrs.get("job_id")), e.line_no))
    by_key: dict[tuple[str | None, str | None, str | None], list[ParsedEvent]] = {}
    for e in jobs:
        name = e.attrs.get("job_name")
        key = (name, e.attrs.get("user"), None if name else str(e.attrs.get("job_id")))
        by_key.setdefault(key, []).append(e)
    rows: list[dict] = []
    for (name, user, anon_id), group in by_key.items():
        base = run_name(name, user, anon_id or "")
        run_no = 0
        run_end: int | None = None
        open_ended = False
        attempt = 0
        for e in group:
            a = e.attrs
            if run_no == 0 or (not open_ended and run_end is not None
                               and a["start"] - run_end > RUN_GAP_US):
                run_no += 1
                attempt = 0
                run_end, open_ended = None, False
            attempt += 1
            if a.get("end") is None:
                open_ended = True
            else:
                run_end = a["end"] if run_end is None else max(run_end, a["end"])
            nodelist = a.get("nodelist") or ""
            rows.append({
                "run": base if run_no == 1 else f"{base}#{run_no}",
                "job_id": str(a.get("job_id")),
                "started_at": a["start"],
                "ended_at": a.get("end"),
                "state": a.get("state") or "UNKNOWN",
                "nodes": a.get("nodes") or 0,
                "nodelist": nodelist,
                "attempt": attempt,
                "job_name": name,
                "user": user,
                "exit_code": a.get("exit_code"),
                "reason": a.get("reason"),
                "admin_comment": a.get("admin_comment"),
            })
    return rows
