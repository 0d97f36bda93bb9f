"""Slurm's node-state dumps: why nodes are drained or down, by whom, since when.

Two shapes, told apart by their first line:

- ``sinfo -R`` (``sinfo --list-reasons``), a fixed-width table; the reason may hold
  spaces, so a row is read from the right (node list, time, user) and the rest is the
  reason::

      REASON               USER      TIMESTAMP           NODELIST
      Kill task failed     root      2024-01-25T15:12:23 ip-10-0-1-23

  and ``sinfo -o`` with ``|`` between columns (``sinfo --Format`` / ``-o "%all"``): the
  header names the columns (REASON, USER, TIMESTAMP, NODELIST or HOSTNAMES, STATE; the
  first column of a repeated name counts).
- ``scontrol show node`` blocks (``NodeName=... `` then indented ``Key=Value`` lines;
  ``scontrol -o`` puts a block on one line)::

      NodeName=gpu02 Arch=x86_64 CoresPerSocket=4
         State=IDLE+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
         Reason=gres/gpu count reported lower than configured (0 < 1) [slurm@2024-12-19T11:03:34]

Each node with a reason (or a DOWN/DRAIN/FAIL state) is one event: ``node_down`` when its
state says DOWN, else ``node_drain``; attrs: reason, user, state, nodelist. The event's
time is the reason's (``TIMESTAMP`` / ``[user@time]``, zone-less: ``ctx.tz``); a reason
without one is ``untimed``. A dump repeats a node once per partition: the repeats are
routine. Reasons ``none``/empty on an up node are routine; unreadable rows are rejected.
"""

from __future__ import annotations

import re

from faultline.pipeline.hostlist import try_expand_hostlist
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range, parse_iso

MAX_NODES = 65_536  # nodes one row may name (see slurmctld.MAX_LINE_HOSTS)
_R_HEADER = re.compile(r"^\s*REASON\s+USER\s+TIMESTAMP\s+NODELIST\s*$")
_R_ROW = re.compile(r"^(.*?)\s+(\S+)\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown|N/A)\s+(\S+)\s*$")
_SCONTROL = re.compile(r"^NodeName=(\S+)")
_KV_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_KV_REASON = re.compile(r"(?:^|\s)Reason=(.*?)\s*$")
_REASON_BY = re.compile(r"^(.*?)\s*\[([^@\]\s]+)@([^\]\s]+)\]$")
_NO_REASON = frozenset({"", "none", "(null)", "n/a"})


def looks_like_slurm_nodes(first_line: str) -> bool:
    """Whether a file's first line opens one of these dumps (for sniffing)."""
    if _R_HEADER.match(first_line) or _SCONTROL.match(first_line):
        return True
    cols = {c.strip().upper() for c in first_line.split("|")}
    return "|" in first_line and "REASON" in cols and bool({"NODELIST", "HOSTNAMES"} & cols)


def state_kind(state: str | None) -> str | None:
    """node_down / node_drain by a state (``drain*``, ``DOWN+NOT_RESPONDING``); None
    for a state that is neither."""
    s = (state or "").upper()
    if "DOWN" in s:
        return "node_down"
    if any(w in s for w in ("DRAIN", "DRNG", "FAIL")):
        return "node_drain"
    return None


def _when(text: str | None, ctx: ParseContext) -> tuple[int | None, str]:
    got = parse_iso(text, ctx.zone) if text else None
    if got is None or not in_range(got[0]):
        return None, "untimed"
    return got[0], ("exact" if got[1] else "assumed_tz")


class _Out:
    """Events of one dump, one per (node, reason, time)."""

    def __init__(self, fp: FileParse, ctx: ParseContext) -> None:
        self.fp, self.ctx, self.seen = fp, ctx, set()

    def add(self, line_no: int, message: str, nodelist: str, state: str | None,
            reason: str | None, user: str | None, when: str | None) -> None:
        reason = (reason or "").strip()
        kind = state_kind(state)
        if reason.lower() in _NO_REASON:
            reason = ""
        if kind is None and not reason:
            return
        hosts = try_expand_hostlist(nodelist.strip())
        if not hosts or len(hosts) > MAX_NODES:
            hosts = [None]
        ts, quality = _when(when, self.ctx)
        attrs = {"rule": "nodes.reason", "reason": reason or None, "user": user,
                 "state": state, "nodelist": nodelist.strip()}
        for host in hosts:
            key = (host, reason, ts)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.fp.events.append(ParsedEvent(
                line_no=line_no, kind=kind or "node_drain", message=message[:1024], ts=ts,
                ts_quality=quality, host=host, attrs=dict(attrs)))


def _sinfo_r(lines: list[str], first: int, out: _Out) -> None:
    for i in range(first + 1, len(lines)):
        line = lines[i]
        if not line.strip() or _R_HEADER.match(line):
            continue
        m = _R_ROW.match(line)
        if m is None:
            out.fp.rejects.append(Reject.of(i + 1, "unrecognized sinfo row", line))
            continue
        user = None if m.group(2) in ("Unknown", "N/A") else m.group(2)
        # sinfo -R lists drained, down and failed nodes only: no state, a reason
        out.add(i + 1, line.strip(), m.group(4), "DRAIN" if m.group(1).strip() else None,
                m.group(1) or "(no reason)", user, m.group(3))


def _sinfo_table(lines: list[str], first: int, out: _Out) -> None:
    cols = [c.strip().upper() for c in lines[first].split("|")]
    at: dict[str, int] = {}
    for k, c in enumerate(cols):
        at.setdefault(c, k)
    nodes_col = at.get("NODELIST", at.get("HOSTNAMES"))
    for i in range(first + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.strip() == lines[first].strip():
            continue
        f = [x.strip() for x in line.split("|")]
        if len(f) < len(cols) or nodes_col is None or not f[nodes_col]:
            out.fp.rejects.append(Reject.of(i + 1, "unrecognized sinfo row", line))
            continue

        def get(name: str, row: list[str] = f) -> str | None:
            k = at.get(name)
            return row[k] if k is not None and row[k] not in ("", "Unknown", "N/A") else None

        out.add(i + 1, line.strip(), f[nodes_col], get("STATE"), get("REASON"), get("USER"),
                get("TIMESTAMP"))


def _scontrol(lines: list[str], out: _Out) -> None:
    block: list = []  # node, state, the state's line, whether a reason was seen

    def close() -> None:
        if block and not block[3] and block[2] is not None and state_kind(block[1]):
            out.add(block[2] + 1, lines[block[2]].strip(), block[0], block[1], None, None,
                    None)  # down or drained without a reason: the State line says so

    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if m := _SCONTROL.match(line):
            close()
            block = [m.group(1), None, None, False]
        elif not line[:1].isspace() or not block:
            out.fp.rejects.append(Reject.of(i + 1, "unrecognized scontrol line", line))
            continue
        if sm := _KV_STATE.search(line):
            block[1], block[2] = sm.group(1), i
        if rm := _KV_REASON.search(line):
            reason, user, when = rm.group(1), None, None
            if bm := _REASON_BY.match(reason):
                reason, user, when = bm.group(1), bm.group(2), bm.group(3)
            out.add(i + 1, line.strip(), block[0], block[1], reason, user, when)
            block[3] = True
    close()


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse a ``sinfo -R`` / ``sinfo -o`` / ``scontrol show node`` dump."""
    lines = split_lines(text)
    fp = FileParse(len(lines))
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return fp
    head = lines[first].lstrip("\ufeff")
    out = _Out(fp, ctx)
    if _R_HEADER.match(head):
        fp.shape = "sinfo_reasons"
        _sinfo_r(lines, first, out)
    elif _SCONTROL.match(head):
        fp.shape = "scontrol_nodes"
        _scontrol(lines, out)
    elif looks_like_slurm_nodes(head):
        fp.shape = "sinfo_table"
        lines[first] = head
        _sinfo_table(lines, first, out)
    else:
        fp.rejects.extend(Reject.of(i + 1, "unrecognized node dump", ln)
                          for i, ln in enumerate(lines) if ln.strip())
    return fp
