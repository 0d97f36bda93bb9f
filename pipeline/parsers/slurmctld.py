"""The Slurm controller log (``slurmctld.log``): node, job and reservation facts.

::

    [2024-07-01T12:00:29.114] error: Nodes node0042 not responding, setting DOWN
    [2024-07-01T12:00:31.002] Killing JobId=81234 on failed node node0042
    [2024-07-03T01:59:40.000] sched: Created reservation=maint start=... nodes=node[0000-2047] ...

Every line opens with ``[time]`` in one of Slurm's ``LogTimeFormat`` shapes: ``iso8601_ms``
(default, ``2024-07-01T12:00:00.123``), ``iso8601`` (no fraction), ``rfc5424_ms`` /
``rfc5424`` / ``rfc3339`` (with an offset: ``exact``). Zone-less times are read in
``ctx.tz`` (``assumed_tz``). A line without a readable time is rejected
(``no_timestamp`` / ``bad_timestamp``, or ``timestamp out of range`` outside 2000..2099,
see :mod:`faultline.pipeline.timeutil`); a blank line is routine.

Messages that name a host list (``Nodes node[0041-0042] not responding``) give one event
per host, all on the same line, up to :data:`MAX_LINE_HOSTS` hosts: a longer list (no
cluster has that many nodes; a damaged ``node[0-999999]``) gives one event without a host,
so one line cannot fill memory with events. :data:`RULES` is the rule table (id, kind, pattern); the
first match decides. Everything else (scheduling chatter, RPC traces) is routine.

``reason set to: <text>`` gives a ``node_drain`` with ``attrs.reason``; ``state set to
DRAINING`` (and the other states of :data:`STATE_KINDS`) gives one with ``attrs.state``
and no reason: it says that a node is drained, not why, so it is never text for the
reason model (``classifiers.interruptions.drain_reason``).
"""

from __future__ import annotations

import re

from faultline.pipeline.hostlist import try_expand_hostlist
from faultline.pipeline.parsers.joblog import cap
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import OUT_OF_RANGE, in_range, parse_iso

MAX_LINE_HOSTS = 65_536  # hosts one line may name: more than any cluster has
LINE_RE = re.compile(r"^\[([^\]]*)\]\s?(.*)$")
_OFFSET = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})$")
_JOB = r"(\d+(?:_\d+|_\[[^\]]*\]|\+\d+)?)(?:\(\d+\))?"  # JobId=123, 123_4(130), 123+0(124)

RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (rid, kind, re.compile(pat))
    for rid, kind, pat in (
        ("ctld.not_responding", "node_not_responding",
         r"\bNodes? (\S+) not responding(, setting DOWN)?"),
        ("ctld.now_responding", "node_resume", r"\bNode (\S+) now responding"),
        ("ctld.returned_to_service", "node_resume", r"\b[Nn]ode (\S+) returned to service"),
        ("ctld.killing_job", "job_killed",
         rf"\bKilling (?:JobId=|job_id |job ){_JOB} on failed node (\S+)"),
        ("ctld.requeue_node_failure", "job_requeue",
         rf"\brequeue job (?:JobId=)?{_JOB} due to failure of node (\S+)"),
        ("ctld.requeue", "job_requeue", rf"(?i)\brequeu\w*:? (?:job )?JobId={_JOB}"),
        ("ctld.unexpected_reboot", "node_reboot",
         r"\bNode (\S+) unexpectedly rebooted(?: boot_time=(\d+))?(?: last response=(\d+))?"),
        ("ctld.reboot_requested", "node_reboot", r"\breboot request queued for nodes? (\S+)"),
        ("ctld.reboot_complete", "node_reboot", r"(?i)\breboot(?:ed)? (?:is )?complete"),
        ("ctld.reason_set", "node_drain", r"\bnode (\S+) reason set to: ?(.*)$"),
        # kind by the new state: node_down, node_drain or node_resume (STATE_KINDS)
        ("ctld.state_set", "node_down", r"\bnodes? (\S+) state set to (\w+)"),
        ("ctld.reservation", "reservation",
         r"\b(Created|Updated) reservation=(\S+)(.*)$"),
        ("ctld.kill_request", "operator_kill",
         rf"\bREQUEST_KILL_JOB (?:JobId=|job ){_JOB} uid (\d+)"),
    )
)

# ``update_node: node X state set to S``: which kind S gives (others are routine).
STATE_KINDS = {
    "DOWN": "node_down",
    "DRAIN": "node_drain",
    "DRAINING": "node_drain",
    "DRAINED": "node_drain",
    "FAIL": "node_drain",
    "FAILING": "node_drain",
    "RESUME": "node_resume",
    "IDLE": "node_resume",
    "UNDRAIN": "node_resume",
}

_RES_KV = re.compile(r"(\w+)=(\S*)")
_RES_NODES = re.compile(r"\bnodes=(\S+)")
_NODE_IN_TEXT = re.compile(r"\b(?:[Nn]odes?|node=|NodeName=)\s*([\w\-.\[\],]+)")


def read_time(text: str, ctx: ParseContext) -> tuple[int, str] | None:
    """(epoch us, ts_quality) of a ``[...]`` stamp, or None if it is not a time."""
    got = parse_iso(text, ctx.zone)
    if got is None:
        return None
    return got[0], ("exact" if got[1] else "assumed_tz")


def time_shape(text: str) -> str:
    """Slurm's LogTimeFormat name for a stamp text."""
    if _OFFSET.search(text):
        return "rfc5424_ms" if "." in text else "rfc5424"
    return "iso8601_ms" if "." in text else "iso8601"


Fact = tuple[str, list[str | None], dict, str | None]  # kind, hosts, attrs, job_id


def _hosts(text: str) -> list[str | None]:
    hosts = try_expand_hostlist(text.rstrip(",.;:"))
    return list(hosts) if hosts and len(hosts) <= MAX_LINE_HOSTS else [None]


def _reservation(m: re.Match[str], ctx: ParseContext) -> Fact:
    attrs: dict = {"action": m.group(1).lower(), "name": m.group(2)}
    rest = m.group(3)
    kv = dict(_RES_KV.findall(rest))
    for key in ("start", "end"):
        t = parse_iso(kv[key], ctx.zone) if kv.get(key) else None
        attrs[key] = t[0] if t and in_range(t[0]) else None
    nm = _RES_NODES.search(rest)
    nodelist = nm.group(1) if nm else None
    attrs["nodelist"] = nodelist
    nodes = try_expand_hostlist(nodelist) if nodelist else []
    attrs["nodes"] = nodes if len(nodes) <= MAX_LINE_HOSTS else []
    attrs["users"] = [u for u in kv.get("users", "").split(",") if u]
    if kv.get("accounts"):
        attrs["accounts"] = [a for a in kv["accounts"].split(",") if a]
    flags = kv.get("flags") or kv.get("Flags")
    if flags:
        attrs["flags"] = [f for f in flags.split(",") if f]
    return "reservation", [None], attrs, None


def classify(message: str, ctx: ParseContext) -> list[Fact]:
    """What one controller message says: a list of (kind, hosts, attrs, job_id)."""
    for rule_id, kind, rx in RULES:
        m = rx.search(message)
        if m is None:
            continue
        attrs: dict = {"rule": rule_id}
        if rule_id == "ctld.not_responding":
            attrs["set_down"] = m.group(2) is not None
            attrs["nodelist"] = m.group(1).rstrip(",")
            return [(kind, _hosts(m.group(1)), attrs, None)]
        if kind == "node_resume":
            return [(kind, _hosts(m.group(1)), attrs, None)]
        if kind in ("job_killed", "job_requeue"):
            hosts = _hosts(m.group(2)) if m.re.groups >= 2 and m.group(2) else [None]
            return [(kind, hosts, attrs, m.group(1))]
        if rule_id == "ctld.unexpected_reboot":
            attrs["unexpected"] = True
            if m.group(2):
                attrs["boot_time"] = int(m.group(2))
            if m.group(3):
                attrs["last_response"] = int(m.group(3))
            return [(kind, _hosts(m.group(1)), attrs, None)]
        if rule_id == "ctld.reboot_requested":
            attrs.update(unexpected=False, phase="requested", nodelist=m.group(1))
            return [(kind, _hosts(m.group(1)), attrs, None)]
        if rule_id == "ctld.reboot_complete":
            attrs.update(unexpected=False, phase="complete")
            nm = _NODE_IN_TEXT.search(message)
            return [(kind, _hosts(nm.group(1)) if nm else [None], attrs, None)]
        if rule_id == "ctld.reason_set":
            attrs["reason"] = m.group(2).strip()
            return [(kind, _hosts(m.group(1)), attrs, None)]
        if rule_id == "ctld.state_set":
            state = m.group(2).upper()
            real = STATE_KINDS.get(state)
            if real is None:
                return []
            attrs["state"] = state
            return [(real, _hosts(m.group(1)), attrs, None)]
        if kind == "reservation":
            fact = _reservation(m, ctx)
            fact[2]["rule"] = rule_id
            return [fact]
        if kind == "operator_kill":
            attrs["uid"] = int(m.group(2))
            return [(kind, [None], attrs, m.group(1))]
    return []


def timed_lines(text: str, ctx: ParseContext
                ) -> tuple[FileParse, list[tuple[int, tuple[int, str], str]]]:
    """A Slurm daemon log's lines (slurmctld's, slurmd's: the same ``[time] message``
    shape): the file's parse with the rejects (no time, an unreadable one, one out of
    range) and its shape filled in, and each readable line as (line number, (time,
    quality), message)."""
    lines = split_lines(text)
    fp = FileParse(lines=len(lines))
    out = []
    for i, line in enumerate(lines, 1):
        m = LINE_RE.match(line)
        if m is None:
            if line.strip():
                fp.rejects.append(Reject.of(i, "no_timestamp", line))
            continue
        when = read_time(m.group(1), ctx)
        if when is None:
            fp.rejects.append(Reject.of(i, "bad_timestamp", line))
            continue
        if not in_range(when[0]):
            fp.rejects.append(Reject.of(i, OUT_OF_RANGE, line))
            continue
        if fp.shape is None:
            fp.shape = time_shape(m.group(1).strip())
        out.append((i, when, m.group(2)))
    return fp, out


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one slurmctld log (see the module docstring)."""
    fp, lines = timed_lines(text, ctx)
    for line_no, when, message in lines:
        for kind, hosts, attrs, job_id in classify(message, ctx):
            for host in hosts:
                fp.events.append(ParsedEvent(
                    line_no=line_no, kind=kind, message=cap(message), ts=when[0],
                    ts_quality=when[1], host=host, job_id=job_id, attrs=dict(attrs),
                ))
    return fp


def parse_line(line: str, ctx: ParseContext | None = None) -> list[ParsedEvent]:
    """The events of a single line (for table-driven tests)."""
    return parse(line, ctx or ParseContext(path="<line>")).events

