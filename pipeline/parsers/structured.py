"""Structured kernel logs: ``journalctl -o json``, ``journalctl -o export`` and JSON lines
exported from a log store or shipper (Loki ``logcli --output jsonl``, Elasticsearch /
OpenSearch hits, Vector, Fluent Bit), read by the kernel parser.

Each record becomes one *synthetic* syslog line, ``<RFC 3339 time> <host> <program>:
<message>``, in the record's place, and the kernel parser (:mod:`kernel`) reads the
file as if it were an rsyslog file: the same message rules, multi-line absorption and
time qualities apply, and line accounting stays per input line. Events keep the
record's message; rejects keep the input line as written (``bad json``: a line that
starts like an object but does not parse, e.g. a torn last line).

Fields (first present wins; a dotted name is a nested field or a literal key):

=========  ==================================================================================
message    MESSAGE, message, msg, log, line, _raw, text (journald writes a MESSAGE that is
           not UTF-8 as an array of bytes: decoded with U+FFFD for the bad ones)
time       __REALTIME_TIMESTAMP (microseconds), @timestamp, timestamp, time, ts, _time, date,
           datetime: RFC 3339 strings, or epoch numbers in s / ms / us / ns
host       _HOSTNAME, host, hostname, host.name, host.hostname, kubernetes.host,
           kubernetes.node_name, labels.host, labels.hostname, labels.node, agent.hostname,
           node, nodename, syslog.hostname, HOSTNAME
program    SYSLOG_IDENTIFIER, _COMM, program, ident, appname, syslog.appname, process.name,
           journald's ``_TRANSPORT=kernel`` and a missing program mean
           ``kernel``
=========  ==================================================================================

Elasticsearch / OpenSearch hits are unwrapped (``_source``); ``--json-fields`` names
other fields (``ParseContext.json_fields``) and is tried first. A message that is itself
a syslog line (a shipper tailing ``/var/log/syslog``) gives its own program, host and
message; the record's time still wins, because the syslog stamp has no year.

Export format (https://systemd.io/JOURNAL_EXPORT_FORMATS/): entries of ``KEY=VALUE``
lines, ended by a blank line; a binary field is ``KEY`` alone on its line followed by a
little-endian 64-bit length and the bytes. The record's event covers the entry's lines.
Limitation: faultline reads files as text, so a binary value is read as the text after
its 8 length bytes, up to the next field; a value with an embedded blank line ends the
entry early (the rest is counted as rejects, never lost).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Sequence

from faultline.pipeline.linebatch import FileLines
from faultline.pipeline.parsers import kernel
from faultline.pipeline.parsers import kernel_messages as km
from faultline.pipeline.records import FileParse, ParseContext, Reject
from faultline.pipeline.text import first_lines, split_lines

MESSAGE_FIELDS = ("MESSAGE", "message", "msg", "log", "line", "_raw", "text")
TIME_FIELDS = ("__REALTIME_TIMESTAMP", "@timestamp", "timestamp", "time", "ts", "_time",
               "date", "datetime")
HOST_FIELDS = ("_HOSTNAME", "host", "hostname", "host.name", "host.hostname",
               "kubernetes.host", "kubernetes.node_name", "labels.host", "labels.hostname",
               "labels.node", "agent.hostname", "node", "nodename", "syslog.hostname",
               "HOSTNAME")
PROGRAM_FIELDS = ("SYSLOG_IDENTIFIER", "_COMM", "program", "ident", "appname",
                  "syslog.appname", "process.name")

_HEAD_LINES = 64  # a file's format is decided by its first non-blank line among these
_EXPORT_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_EXPORT_HEAD = re.compile(r"^(?:__CURSOR|__REALTIME_TIMESTAMP|__MONOTONIC_TIMESTAMP|_BOOT_ID"
                          r"|MESSAGE|_HOSTNAME|PRIORITY|SYSLOG_IDENTIFIER)=")
_BINARY_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RFC3339 = re.compile(r"^\d{4}-[01]\d-[0-3]\d[T ][0-2]\d:[0-5]\d:[0-6]\d(?:[.,]\d{1,9})?"
                      r"(?:Z|[+-][0-2]\d:?[0-5]\d)?$")
_NOT_TAG = re.compile(r"[\s\[\]:]+")
_PLACEHOLDER_HOST = "-"


def format_of(lines: Sequence[str]) -> str | None:
    """``json`` / ``export`` for a structured file (from its first non-blank line),
    None for a plain kernel log."""
    for line in lines[:_HEAD_LINES]:
        s = line.strip().lstrip("\ufeff")  # a byte-order mark is no content
        if not s:
            continue
        if s.startswith("{"):
            return "json"
        if _EXPORT_HEAD.match(s):
            return "export"
        return None
    return None


def looks_structured(lines: Sequence[str]) -> bool:
    """For sniffing: the file is journal JSON / JSON lines carrying a message, or
    journal export format."""
    fmt = format_of(lines)
    if fmt == "export":
        return True
    if fmt != "json":
        return False
    for line in lines[:_HEAD_LINES]:
        s = line.strip().lstrip("\ufeff")  # a byte-order mark is no content
        if not s:
            continue
        try:
            obj = json.loads(s)
        except ValueError:
            return False
        return isinstance(obj, dict) and _field(_unwrap(obj), MESSAGE_FIELDS, _text) is not None
    return False


def _unwrap(obj: dict) -> dict:
    src = obj.get("_source")
    return src if isinstance(src, dict) else obj


def _lookup(obj: dict, name: str) -> object:
    if name in obj:
        return obj[name]
    cur: object = obj
    for part in name.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _field(obj: dict, names: Sequence[str],
           conv: Callable[[object], object] | None = None) -> object:
    """The first of ``names`` present (and readable by ``conv``, when given)."""
    for name in names:
        v = _lookup(obj, name)
        if v is None or v == "":
            continue
        if conv is None:
            return v
        got = conv(v)
        if got is not None and got != "":
            return got
    return None


def _text(v: object) -> str | None:
    """A field value as text: strings as they are, journald's byte arrays decoded,
    a repeated field's first value."""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v:
        if all(isinstance(b, int) and 0 <= b < 256 for b in v):
            return bytes(v).decode("utf-8", errors="replace")
        return _text(v[0])
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    return None


def _time(v: object) -> str | None:
    """An RFC 3339 time the kernel parser reads (UTC for epoch numbers), or None."""
    if isinstance(v, str):
        s = v.strip()
        if s.isdigit():
            return _epoch(int(s))
        if _RFC3339.match(s):
            return s[:10] + "T" + s[11:].replace(",", ".")
        try:
            return _epoch_float(float(s))
        except ValueError:
            return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return _epoch(v)
    if isinstance(v, float):
        return _epoch_float(v)
    return None


def _epoch(n: int) -> str | None:
    """Epoch seconds, ms, us or ns by magnitude (years ~2001-2286 in each unit)."""
    for scale in (1, 1_000, 1_000_000, 1_000_000_000):
        if 1e9 <= n / scale < 1e10:
            us = n * 1_000_000 // scale
            return _iso_us(us)
    return None


def _epoch_float(x: float) -> str | None:
    if x != x or x in (float("inf"), float("-inf")):
        return None
    for scale in (1, 1_000, 1_000_000, 1_000_000_000):
        if 1e9 <= x / scale < 1e10:
            return _iso_us(round(x * 1_000_000 / scale))
    return None


def _iso_us(us: int) -> str:
    t = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"


def _fields_of(ctx: ParseContext) -> tuple[tuple[str, ...], ...]:
    user = dict(ctx.json_fields)

    def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        return ((user[key],) if key in user else ()) + default
    return (names("message", MESSAGE_FIELDS), names("time", TIME_FIELDS),
            names("host", HOST_FIELDS), names("program", PROGRAM_FIELDS))


def synthetic_line(obj: dict, ctx: ParseContext,
                   fields: tuple[tuple[str, ...], ...] | None = None) -> str:
    """The syslog line a record stands for (see the module docstring)."""
    msg_f, time_f, host_f, prog_f = fields or _fields_of(ctx)
    obj = _unwrap(obj)
    message = _field(obj, msg_f, _text)
    if message is None:
        return ""  # a record without a message carries nothing to read: routine
    message = message.replace("\r", " ").replace("\n", " ").rstrip()
    when = _field(obj, time_f, _time)
    host = _field(obj, host_f, _text)
    program = _field(obj, prog_f, _text)
    if program is None or _text(obj.get("_TRANSPORT")) == "kernel":
        program = "kernel"
    mono = _text(obj.get("__MONOTONIC_TIMESTAMP"))
    if program == "kernel" and mono and mono.isdigit() and not message.startswith("["):
        # the kernel's time since boot, as rsyslog writes it: lets a plain dmesg of the
        # same boot be anchored by the same record (pipeline/load.py: anchor_boots)
        n = int(mono)
        message = f"[{n // 1_000_000:5d}.{n % 1_000_000:06d}] {message}"
    inner = kernel.parse_line(message, ctx) if message[:1].isalnum() else None
    if inner is not None and inner.shape in ("rfc3339", "rfc3164") and inner.host:
        host = host or inner.host
        program = inner.program or program
        message = inner.message
        if when is None and inner.ts is not None:
            when = _iso_us(inner.ts)
    if when is None:
        # no time: a message that matters is kept (the kernel parser gives it the time
        # of the nearest earlier record); anything else is a routine record
        return message if km.ruleset(ctx.rules).classify(message, program) is not None else ""
    host = _NOT_TAG.sub("_", host) if host else (ctx.host or _PLACEHOLDER_HOST)
    program = _NOT_TAG.sub("_", program) or "kernel"
    return f"{when} {host} {program}: {message}"


def _json_lines(lines: list[str], ctx: ParseContext) -> tuple[list[str], list[Reject]]:
    fields = _fields_of(ctx)
    out: list[str] = []
    rejects: list[Reject] = []
    for i, line in enumerate(lines):
        s = line.strip().lstrip("\ufeff")  # a byte-order mark is no content
        if not s.startswith("{"):
            out.append(line)  # not a record: the kernel parser reads it as it is
            continue
        try:
            obj = json.loads(s)
        except ValueError:
            rejects.append(Reject.of(i + 1, "bad json", line))
            out.append("")
            continue
        if not isinstance(obj, dict):
            rejects.append(Reject.of(i + 1, "bad json", line))
            out.append("")
            continue
        out.append(synthetic_line(obj, ctx, fields))
    return out, rejects


def _export_entries(lines: list[str]) -> list[tuple[int, int, dict[str, str]]]:
    """(first index, last index, fields) of each export-format entry."""
    entries: list[tuple[int, int, dict[str, str]]] = []
    i, n = 0, len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        start, fields = i, {}
        while i < n and lines[i] != "":
            line = lines[i]
            key, eq, value = line.partition("=")
            if eq and _EXPORT_FIELD.match(line):
                fields.setdefault(key, value)
                i += 1
            elif _BINARY_KEY.match(line) and i + 1 < n:
                # KEY, then <le64 length><bytes>: read as text up to the next field
                i += 1
                parts = [lines[i][8:]]
                i += 1
                while i < n and lines[i] != "" and not _EXPORT_FIELD.match(lines[i]) \
                        and not _BINARY_KEY.match(lines[i]):
                    parts.append(lines[i])
                    i += 1
                fields.setdefault(line, "\n".join(parts))
            else:
                fields.setdefault("\x00bad", line)
                i += 1
        entries.append((start, i - 1, fields))
    return entries


def _export(lines: list[str], ctx: ParseContext
            ) -> tuple[list[str], list[Reject], dict[int, int]]:
    """Synthetic lines (one per entry, at its first line), rejects, and each entry's
    first line number -> last line number."""
    fields = _fields_of(ctx)
    out = [""] * len(lines)
    rejects: list[Reject] = []
    spans: dict[int, int] = {}
    for start, end, entry in _export_entries(lines):
        bad = entry.pop("\x00bad", None)
        if bad is not None or ("MESSAGE" not in entry and not entry.keys() & set(fields[0])):
            rejects.extend(Reject.of(j + 1, "bad journal export entry", lines[j])
                           for j in range(start, end + 1))
            continue
        out[start] = synthetic_line(entry, ctx, fields)
        spans[start + 1] = end + 1
    return out, rejects, spans


def parse_structured(lines: list[str], ctx: ParseContext, fmt: str) -> FileParse:
    """Parse one structured file's lines (``fmt``: ``json`` or ``export``)."""
    spans: dict[int, int] = {}
    if fmt == "export":
        synthetic, rejects, spans = _export(lines, ctx)
    else:
        synthetic, rejects = _json_lines(lines, ctx)
    fp = kernel.parse_lines(synthetic, ctx)
    for e in fp.events:
        if e.host == _PLACEHOLDER_HOST:
            e.host = ctx.host
        if spans:
            e.line_end = max(e.line_end or e.line_no, spans.get(e.line_end or e.line_no,
                                                                 e.line_no))
    raw = {r.line_no: Reject.of(r.line_no, r.reason, lines[r.line_no - 1])
           for r in fp.rejects}
    covered = {ln for e in fp.events for ln in range(e.line_no, (e.line_end or e.line_no) + 1)}
    mine = [r for r in rejects if r.line_no not in covered and r.line_no not in raw]
    shape = "journal_export" if fmt == "export" else _json_shape(lines)
    return dataclasses.replace(fp, rejects=sorted([*raw.values(), *mine],
                                                  key=lambda r: r.line_no), shape=shape)


def _json_shape(lines: list[str]) -> str:
    """``journal_json`` when the records are journald's, else ``jsonl``."""
    for line in lines[:_HEAD_LINES]:
        if line.strip():
            return "journal_json" if '"__REALTIME_TIMESTAMP"' in line else "jsonl"
    return "jsonl"


def parse_many(files: Sequence[tuple[FileLines, ParseContext]]) -> list[FileParse]:
    """:func:`kernel.parse_many`, with structured files read through synthetic lines.
    Plain kernel logs still go through one vectorized batch (a file given as its text
    is split there, unless it is structured)."""
    out: list[FileParse | None] = [None] * len(files)
    plain: list[int] = []
    for k, (lines, ctx) in enumerate(files):
        fmt = format_of(first_lines(lines, _HEAD_LINES) if isinstance(lines, str) else lines)
        if fmt is None:
            plain.append(k)
        else:
            out[k] = parse_structured(
                split_lines(lines) if isinstance(lines, str) else lines, ctx, fmt)
    for k, fp in zip(plain, kernel.parse_many([files[k] for k in plain]), strict=True):
        out[k] = fp
    return [fp for fp in out if fp is not None]


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one kernel log, plain or structured."""
    return parse_many([(split_lines(text), ctx)])[0]
