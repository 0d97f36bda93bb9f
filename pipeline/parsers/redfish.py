"""Redfish ``LogEntry`` JSON (the BMC API of current servers) to the same ``sel_*`` events
as ``ipmitool sel elist``.

A file is a ``LogEntryCollection`` (``GET .../LogServices/SEL/Entries``: the entries
under ``Members``), one ``LogEntry``, JSON lines (one entry per line, as a collector
that pages through the collection writes them), or documents one after another (each
page of the collection appended to one file)::

    {"@odata.type": "#LogEntryCollection.LogEntryCollection", "Members": [
      {"Id": "1", "EntryType": "SEL", "Severity": "Critical",
       "Created": "2012-03-07T14:44:00Z", "EntryCode": "Upper Critical - going high",
       "SensorType": "Temperature", "SensorNumber": 1,
       "Message": "Temperature threshold exceeded", "MessageId": "0x592A28"}, ...]}

- Kind: from ``SensorType`` (DMTF's names, e.g. ``Power Supply / Converter``, or
  ipmitool's; :func:`faultline.pipeline.parsers.sel.kind_of_type`); an entry without one
  (``EntryType`` ``Event``/``Oem``) is kinded by :data:`MESSAGE_RULES` on its message.
  iDRAC writes ``SensorType``/``EntryCode`` as ``[{"Member": "Battery"}]``: read too.
- Time: ``EventTimestamp`` when present (when the event happened), else ``Created``
  (when the BMC logged it): with an offset, ``exact``; without one, read in ``ctx.tz``.
  An entry without either is ``untimed``; one outside 2000..2099 is rejected (every
  line of it) as ``timestamp out of range``.
- Like ``Deasserted`` SEL rows, an entry whose ``EntryCode`` is ``Deassert`` is routine.
- Accounting: an entry's event covers the lines its JSON object spans; the collection's
  own lines (braces, ``@odata`` metadata) are routine; text that is not JSON is rejected
  line by line (``bad json``), and so is a JSON document that holds no log entry.
"""

from __future__ import annotations

import json
import re

from faultline.pipeline.jsonspans import LineIndex, array_members
from faultline.pipeline.parsers import sel
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import OUT_OF_RANGE, in_range, parse_iso

MESSAGE_LIMIT = 1024
_DECODER = json.JSONDecoder()
# (rule id, kind, pattern on the message) for entries without a SensorType; first wins.
MESSAGE_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (rid, kind, re.compile(pat, re.I)) for rid, kind, pat in (
        ("redfish.msg.memory", "sel_memory", r"\b(?:memory|DIMM|ECC)\b"),
        ("redfish.msg.power", "sel_power", r"\b(?:power supply|PSU|PS\d|AC lost)\b"),
        ("redfish.msg.fan", "sel_fan", r"\bfans?\b"),
        ("redfish.msg.thermal", "sel_thermal", r"\b(?:temperature|thermal|overheat)"),
        ("redfish.msg.processor", "sel_processor", r"\b(?:processor|CPU\d*|IERR)\b"),
        ("redfish.msg.chassis", "sel_chassis", r"\b(?:voltage|chassis|intrusion)\b"),
    ))


def looks_like_redfish(head: str) -> bool:
    """Whether a file's first bytes are Redfish log entries (for sniffing)."""
    text = head.lstrip("\ufeff \t\r\n")
    return text[:1] in ("{", "[") and ('"EntryType"' in head or "#LogEntry" in head)


def _member(value: object) -> str | None:
    """A Redfish enum value, plain or iDRAC's ``[{"Member": "..."}]``."""
    if isinstance(value, list) and value:
        value = value[0].get("Member") if isinstance(value[0], dict) else value[0]
    return str(value) if isinstance(value, (str, int)) and str(value) else None


def _time(entry: dict, ctx: ParseContext) -> tuple[int | None, str] | None:
    """(ts, quality); None when the entry's time is unreadable or out of range."""
    raw = entry.get("EventTimestamp") or entry.get("Created")
    if not isinstance(raw, str) or not raw.strip():
        return None, "untimed"
    got = parse_iso(raw, ctx.zone)
    if got is None or not in_range(got[0]):
        return None
    return got[0], ("exact" if got[1] else "assumed_tz")


def entry_event(entry: dict, first: int, last: int, ctx: ParseContext
                ) -> ParsedEvent | list[Reject] | str | None:
    """One LogEntry (on lines ``first..last``): its event, None when routine
    (deasserted), or a reject reason for its lines."""
    if not isinstance(entry, dict) or not ({"Message", "EntryType", "Created"} & entry.keys()):
        return "not a log entry"
    code = _member(entry.get("EntryCode"))
    if code and code.lower().startswith("deassert"):
        return None
    when = _time(entry, ctx)
    if when is None:
        return OUT_OF_RANGE
    stype = _member(entry.get("SensorType"))
    message = str(entry.get("Message") or "")
    attrs: dict = {"record_id": str(entry.get("Id", "")).lower() or None, "sensor_type": stype,
                   "event": message, "asserted": True}
    number = entry.get("SensorNumber")
    if isinstance(number, int) and 0 <= number <= 0xFF:
        attrs["sensor"] = f"#0x{number:02x}"  # as ipmitool's ``sel list`` names it
    for key, name in (("Severity", "severity"), ("MessageId", "message_id"),
                      ("EntryType", "entry_type")):
        if (v := _member(entry.get(key))) is not None:
            attrs[name] = v
    if code:
        attrs["entry_code"] = code
    if stype:
        kind = sel.kind_of_type(stype)
    else:
        kind = "sel_other"
        for rid, k, rx in MESSAGE_RULES:
            if rx.search(message):
                kind, attrs["rule"] = k, rid
                break
    text = " | ".join(x for x in (stype, attrs.get("sensor"), message, code) if x)
    return ParsedEvent(line_no=first, line_end=last, kind=kind, message=text[:MESSAGE_LIMIT],
                       ts=when[0], ts_quality=when[1], host=ctx.host,
                       device=attrs.get("sensor"), job_id=ctx.job_id, attrs=attrs)


Span = tuple[object, int, int, bool]  # entry, start, end, whether the span is its own


def _entries(doc: object, text: str, at: int) -> list[Span]:
    """The log entries of one JSON document (``text`` at offset ``at``) with their
    character spans; entries that cannot be located one by one all take the document's
    first character (their events share its first line)."""
    if isinstance(doc, dict) and isinstance(doc.get("Members"), list):
        members, key = doc["Members"], "Members"
    elif isinstance(doc, list):
        members, key = doc, None
    else:
        return [(doc, at, at + len(text), True)]
    got = array_members(text, key, len(members))
    if got is None:
        return [(e, at, at + 1, False) for e in members]
    return [(e, at + lo, at + hi, True) for e, lo, hi in got]


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse a Redfish LogEntry collection, an entry, JSON lines, or documents one after
    another (pages of a collection appended to one file). Text that does not decode is
    rejected line by line (``bad json``) and decoding resumes on the next line, so the
    complete entries of a cut file are still read."""
    lines = split_lines(text)
    fp = FileParse(len(lines), shape="redfish")
    body = "\n".join(lines)
    index = LineIndex(lines)
    spans: list[Span] = []
    covered = 0  # the last line some document reaches
    pos, n, docs = 0, len(body), 0
    while True:
        while pos < n and body[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= n:
            break
        try:
            doc, end = _DECODER.raw_decode(body, pos)
        except ValueError:
            ln = index.line_of(pos)
            if ln > covered:
                fp.rejects.append(Reject.of(ln, "bad json", lines[ln - 1]))
            pos = index.starts[ln] if ln < len(lines) else n
            continue
        docs += 1
        spans += _entries(doc, body[pos:end], pos)
        covered = max(covered, index.line_of(end - 1))
        pos = end
    if docs > 1:
        fp.shape = "redfish_jsonl"
    for entry, lo, hi, own in spans:
        first, last = index.line_of(lo), index.line_of(max(lo, hi - 1))
        got = entry_event(entry, first, last, ctx)
        if isinstance(got, ParsedEvent):
            fp.events.append(got)
        elif isinstance(got, str) and own:  # (entries sharing a line: that line is theirs)
            fp.rejects.extend(Reject.of(k, got, lines[k - 1]) for k in range(first, last + 1)
                              if lines[k - 1].strip())
    if fp.rejects and fp.events:  # a line an entry's event covers is that event's
        taken = {k for e in fp.events for k in range(e.line_no, (e.line_end or e.line_no) + 1)}
        fp.rejects = [r for r in fp.rejects if r.line_no not in taken]
    return fp


def parse_any(text: str, ctx: ParseContext) -> FileParse:
    """A BMC event log in any of its forms: Redfish JSON here, text in :mod:`.sel`."""
    if looks_like_redfish(text[:4096]):
        return parse(text, ctx)
    return sel.parse(text, ctx)
