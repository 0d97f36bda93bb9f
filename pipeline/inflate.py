"""A stored file's bytes made safe to parse: gzip inflated within a bound, and lines
capped in length.

Both run on every file of a corpus before any parser sees it (``fileparse._prepare``)
and on the heads the pre-passes read (zone inference, job records, Flight Recorder
dumps), so they are pure functions of bytes, say what went wrong instead of raising,
and bound the memory a hostile file can take: a gzip bomb stops at
:data:`MAX_PLAIN_BYTES`, a line without an end at :data:`MAX_LINE_BYTES`.
"""

from __future__ import annotations

import zlib

# A line longer than this is cut to it before parsing (see cap_lines).
MAX_LINE_BYTES = 1 << 16
# Decompressed content of one gzip file beyond this is not read (see gunzip).
MAX_PLAIN_BYTES = 1 << 30
_GUNZIP_IN = 1 << 16
_GUNZIP_OUT = 1 << 24
# gzip data up to this size is tried in one decompress call first, its output capped at
# the limit; anything but one clean member within the limit then goes through the
# loop, which alone says what went wrong (and keeps what came before it) ...
_GUNZIP_ONE_CALL = MAX_PLAIN_BYTES
# ... by ISA-L's inflate where installed: the same bytes out in 60% of zlib's time on
# llama3's job logs, half of it on its kernel logs (tests/test_gunzip_one_call.py
# checks it against the zlib loop, case by case)
try:
    from isal import isal_zlib as _ONE_CALL_ZLIB
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the same answer
    _ONE_CALL_ZLIB = zlib


def gunzip(data: bytes, limit: int = MAX_PLAIN_BYTES) -> tuple[bytes, str | None]:
    """Decompress gzip data (every member of a concatenated ``.gz``), keeping what was
    readable and saying what went wrong: ``truncated gzip`` (the stream stops early: a
    copy cut short, a file still being written), ``corrupt gzip`` (bad data: what came
    before it is kept), ``trailing data after gzip`` (bytes after the last member that
    are no gzip member), ``gzip content over <limit> bytes not read`` (a gzip bomb).

    Input goes in pieces of :data:`_GUNZIP_IN` bytes and output comes in pieces of at
    most :data:`_GUNZIP_OUT` bytes (``max_length``), so a bomb costs no more than
    ``limit`` bytes and corruption loses only the output of the piece it is in, not the
    lines before it. See
    https://docs.python.org/3/library/zlib.html#zlib.Decompress.decompress and
    ``unconsumed_tail`` / ``unused_data`` / ``eof`` on the same page.
    """
    if len(data) <= _GUNZIP_ONE_CALL:  # a file of one clean member: one call, no loop
        d = _ONE_CALL_ZLIB.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(data, limit + 1)
        except _ONE_CALL_ZLIB.error:
            out = None
        if out is not None and d.eof and not d.unused_data and len(out) <= limit:
            return out, None  # what the loop below gives it (else it decides)
    pieces: list[bytes] = []
    size = 0
    rest = data
    problem: str | None = None
    while rest and problem is None:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: a gzip header and trailer
        buf, pos = b"", 0
        while not d.eof:
            if not buf:
                buf, pos = rest[pos:pos + _GUNZIP_IN], pos + _GUNZIP_IN
            try:
                piece = d.decompress(buf, _GUNZIP_OUT)
            except zlib.error:
                problem = "corrupt gzip"
                break
            buf = d.unconsumed_tail
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                problem = f"gzip content over {limit} bytes not read"
                break
            if not (d.eof or piece or buf) and pos >= len(rest):  # input ended mid-member
                problem = "truncated gzip"
                break
        rest = d.unused_data + rest[pos:] if problem is None else b""
        if rest and not b"\x1f\x8b".startswith(rest[:2]):  # no next member (or its start)
            problem = "trailing data after gzip"
    out = b"".join(pieces)
    return (out[:limit] if size > limit else out), problem


def cap_lines(data: bytes, limit: int = MAX_LINE_BYTES) -> tuple[bytes, int]:
    """``data`` with every line longer than ``limit`` bytes cut to its first ``limit``
    bytes (its line end kept, so line numbers and counts do not change), and how many
    lines were cut.

    No log line of any source is anywhere near this long; one that is (a binary blob,
    a log written without newlines, a runaway print) would otherwise be copied whole
    by every stage (decoded text, split lines, polars columns, a message or attrs
    field) and cost many times its size in memory. Linear, and fast on normal files:
    each step jumps to the last line end within ``limit + 1`` bytes.
    """
    n = len(data)
    if n <= limit:
        return data, 0
    parts: list[bytes] = []
    keep_from = pos = cut = 0
    while n - pos > limit:
        nl = data.rfind(b"\n", pos, pos + limit + 1)
        if nl >= 0:  # every line between pos and nl is at most limit bytes
            pos = nl + 1
            continue
        parts.append(data[keep_from:pos + limit])
        cut += 1
        nl = data.find(b"\n", pos + limit)
        keep_from = pos = n if nl < 0 else nl
    if not cut:
        return data, 0
    parts.append(data[keep_from:])
    return b"".join(parts), cut
