"""``sacct --json`` (Slurm >= 21.08) to the same ``job_record`` events as sacct's text
dumps (:mod:`.sacct`), so attempts and interruptions do not care which one a site keeps.

The document is ``{"meta": ..., "errors": [...], "jobs": [...]}``; a job carries::

    "job_id": 63768795, "name": "submitit", "user": "nobody", "nodes": "cdr247",
    "allocation_nodes": 1, "array": {"job_id": 63752790, "task_id": 7},
    "state": {"current": "NODE_FAIL", "reason": "Prolog"},
    "time": {"start": 1680193504, "end": 1680244103, ...},
    "exit_code": {"status": "SUCCESS", "return_code": 0}, "steps": [...]

Data-parser versions differ (v0.0.37 above; from v0.0.39 ``current`` is a list, numbers
are ``{"set": true, "infinite": false, "number": 0}`` and an exit code's signal is
``{"id": {...}, "name": "SIGKILL"}``): both are read. Times are epoch seconds (``exact``);
0 or unset is missing. An array task is ``<array job id>_<task id>``, as sacct's text
JobID column writes it. The job's event spans the lines of its JSON object; the rest of
the document (meta, braces) is routine; a document that is not JSON, or has no ``jobs``
list, is rejected line by line.
"""

from __future__ import annotations

import json

from faultline.pipeline.jsonspans import LineIndex, array_members
from faultline.pipeline.parsers.joblog import cap
from faultline.pipeline.records import INT32_MAX, FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range


def looks_like_sacct_json(head: str) -> bool:
    """Whether a file's first bytes are ``sacct --json`` output (for sniffing)."""
    return '"jobs"' in head and ('"job_id"' in head or '"Slurm"' in head
                                 or "openapi/db" in head.replace("\\/", "/"))


def _num(v: object) -> int | None:
    """An integer as either data parser writes it; None when unset or infinite."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _text(v: object) -> str | None:
    if isinstance(v, list):
        v = ",".join(str(x) for x in v) if v else None
    return str(v) if v not in (None, "") else None


def _time(v: object) -> int | None:
    s = _num(v)
    if not s:
        return None
    us = s * 1_000_000
    return us if in_range(us) else None


def _exit_code(v: object) -> str | None:
    """``return_code:signal`` as sacct's text ExitCode column writes it."""
    if not isinstance(v, dict):
        return None
    rc = _num(v.get("return_code"))
    sig = v.get("signal")
    signo = _num(sig.get("id") if isinstance(sig, dict) else sig) if sig else None
    if rc is None and signo is None:
        return None
    return f"{rc or 0}:{signo or 0}"


def job_attrs(job: dict) -> dict:
    """The attrs of a ``job_record`` event (the keys :func:`.sacct.job_event` writes)."""
    jid = _num(job.get("job_id"))
    arr = job.get("array") if isinstance(job.get("array"), dict) else {}
    base, task = _num(arr.get("job_id")), _num(arr.get("task_id"))
    job_id = f"{base}_{task}" if base and task is not None else (
        str(jid) if jid is not None else None)
    state = job.get("state") if isinstance(job.get("state"), dict) else {}
    t = job.get("time") if isinstance(job.get("time"), dict) else {}
    comment = job.get("comment") if isinstance(job.get("comment"), dict) else {}
    nodes = _num(job.get("allocation_nodes"))
    attrs: dict = {
        "job_id": job_id,
        "job_name": _text(job.get("name")),
        "user": _text(job.get("user")),
        "state": (_text(state.get("current")) or "").split(",")[0].upper() or None,
        "start": _time(t.get("start")),
        "end": _time(t.get("end")),
        "nodelist": _text(job.get("nodes")),
        "nodes": nodes if nodes is not None and 0 <= nodes <= INT32_MAX else None,
        "exit_code": _exit_code(job.get("exit_code")),
        "reason": _text(state.get("reason")),
        "admin_comment": _text(comment.get("administrator")),
        "comment": _text(comment.get("job")),
    }
    if (by := _text(job.get("kill_request_user"))) is not None:
        attrs["cancelled_by"] = by
    steps = []
    for st in job.get("steps") or []:
        if not isinstance(st, dict):
            continue
        step = st.get("step") if isinstance(st.get("step"), dict) else {}
        sid = step.get("id")
        if isinstance(sid, dict):
            sid = sid.get("step_id")
        name = str(sid).rpartition(".")[2] if sid is not None else _text(step.get("name"))
        sstate = st.get("state")
        steps.append({"step": name, "state": _text(sstate.get("current") if isinstance(
            sstate, dict) else sstate), "exit_code": _exit_code(st.get("exit_code"))})
    if steps:
        attrs["steps"] = steps
    return attrs


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one ``sacct --json`` document (see the module docstring)."""
    lines = split_lines(text)
    fp = FileParse(len(lines), shape="sacct_json")
    body = "\n".join(lines)
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        fp.rejects.extend(Reject.of(i + 1, "not sacct json", ln)
                          for i, ln in enumerate(lines) if ln.strip())
        return fp
    index = LineIndex(lines)
    spans = array_members(body, "jobs", len(jobs))
    first_line = index.line_of(len(body) - len(body.lstrip()))
    for k, job in enumerate(jobs):
        if not isinstance(job, dict):
            continue
        if spans is not None:
            first, last = index.line_of(spans[k][1]), index.line_of(spans[k][2] - 1)
        else:  # not locatable one by one: every job on the document's first line
            first = last = first_line
        attrs = job_attrs(job)
        when = attrs["end"] or attrs["start"]
        fp.events.append(ParsedEvent(
            line_no=first, line_end=last, kind="job_record",
            message=cap(json.dumps({k: v for k, v in attrs.items() if k != "steps"},
                                   sort_keys=True)),
            ts=when, ts_quality="exact" if when is not None else "untimed", host=None,
            job_id=attrs["job_id"], attrs=attrs))
    return fp
