"""The Slurm node daemon's log (``slurmd.log``, one per host; slurmstepd writes into it):
what happened to a job's steps on this node.

::

    [2020-12-14T08:59:01.890] launch task 63532.0 request from UID:... HOST:... PORT:63195
    [2020-12-14T09:43:55.500] [63532.0] error: *** STEP 63532.0 ON cn106 CANCELLED AT
        2020-12-14T09:43:55 ***                                          (one line)
    [2020-12-14T09:44:56.002] [63532.0] error: *** STEP 63532.0 STEPD TERMINATED ON cn106
        AT 2020-12-14T09:44:56 DUE TO JOB NOT ENDING WITH SIGNALS ***    (one line)

Lines look like slurmctld's (``[time] message``, same ``LogTimeFormat`` shapes, same
rejects: :mod:`.slurmctld`); the sniffer tells the two apart by the path and by
slurmd's own wording. The host is the file's (``hosts/<host>/slurmd.log``) unless the
line names one (``ON cn106``); the job is the ``[jobid.step]`` prefix's. :data:`RULES`:

- ``slurmd.cancelled``: a job or step cancelled (``job_cancelled``; ``due_to`` when
  Slurm says why: ``TIME LIMIT``, ``NODE FAILURE``, ``PREEMPTION``...);
- ``slurmd.unkillable``: slurmstepd gave up killing a step (``job_cancelled``,
  ``unkillable``): what drains a node with ``Kill task failed``.

Everything else (launches, RPCs, epilogs) is routine.
"""

from __future__ import annotations

import re

from faultline.pipeline.parsers.joblog import cap
from faultline.pipeline.parsers.slurmctld import timed_lines
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent
from faultline.pipeline.timeutil import in_range, parse_iso

RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (rid, kind, re.compile(pat)) for rid, kind, pat in (
        ("slurmd.unkillable", "job_cancelled",
         r"\*\*\* (JOB|STEP) (\S+) STEPD TERMINATED ON (\S+) AT (\S+) DUE TO JOB NOT ENDING "
         r"WITH SIGNALS"),
        ("slurmd.cancelled", "job_cancelled",
         r"\*\*\* (JOB|STEP) (\S+) ON (\S+) CANCELLED AT (\S+)(?: DUE TO ([^*]*?))?\s*\*\*\*"),
    ))
_STEP_PREFIX = re.compile(r"^\[(\d+(?:_\d+)?)(?:\.\w+)?\] ")
# What only slurmd/slurmstepd write (for sniffing a file without a telling name).
SLURMD_MARKERS = re.compile(
    r"^\[[^\]]+\] (?:\[\d+(?:\.\w+)?\] |launch task |slurmd (?:version|started)"
    r"|CPU frequency setting|_handle_stray_script|Warning: Note very large processing)")


def classify(message: str, ctx: ParseContext) -> tuple[str, str | None, str | None, dict] | None:
    """(kind, host, job id, attrs) of one message, or None when routine."""
    pm = _STEP_PREFIX.match(message)
    job_id = pm.group(1) if pm else None
    for rule_id, kind, rx in RULES:
        m = rx.search(message)
        if m is None:
            continue
        scope, slurm_job, host, at = m.group(1), m.group(2), m.group(3), m.group(4)
        when = parse_iso(at, ctx.zone)
        attrs: dict = {"rule": rule_id, "scope": scope.lower(), "slurm_job": slurm_job,
                       "cancelled_at": when[0] if when and in_range(when[0]) else None}
        if rule_id == "slurmd.unkillable":
            attrs["unkillable"] = True
        elif m.group(5):
            attrs["due_to"] = m.group(5).strip()
        return kind, host, job_id or slurm_job.split(".")[0], attrs
    return None


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one slurmd log (see the module docstring)."""
    fp, lines = timed_lines(text, ctx)
    for line_no, when, message in lines:
        got = classify(message, ctx)
        if got is None:
            continue
        kind, host, job_id, attrs = got
        fp.events.append(ParsedEvent(
            line_no=line_no, kind=kind, message=cap(message), ts=when[0],
            ts_quality=when[1], host=host or ctx.host, job_id=job_id, attrs=attrs))
    return fp
