"""Hypothesis strategies that damage real log lines the way real collections do.

A fuzzer that only feeds random text mostly exercises the "no shape" path of a parser;
the bugs live one step further, in lines that *almost* parse: a real Xid line with its
code replaced by a 20-digit number, a timestamp in year 2999, a field swapped, a NUL or
an invalid UTF-8 byte in the middle, a line cut short. These strategies start from real
lines and apply a few such edits at the byte level, then decode the result the way ingest
does (:func:`faultline.pipeline.text.decode`), so what a parser sees is exactly what it
would see from a damaged file.

See https://hypothesis.readthedocs.io/en/latest/data.html#composite-strategies for
``st.composite``.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from faultline.pipeline.text import decode

# Byte strings that break parsers: NUL, lone CR, invalid or truncated UTF-8, a line
# feed (joins/splits lines), separators, a terminal escape, a BOM, a wide character, an Arabic-Indic
# digit (a decimal digit to Python's int()), a superscript two (a digit int() rejects).
NASTY_BYTES = (
    b"\x00", b"\r", b"\xff", b"\xc3", b"\xe2\x80", b"\n", b"\r\n", b" ", b"  ", b"|",
    b",", b"\t", b"\x1b[31m", b"\xef\xbb\xbf", b"\xe2\x80\xa8", b"\xd9\xa3", b"[", b"]",
    b":", b"=", b"(", b")", b"-", b"\\", b"\xc2\xb2",
)
# Replacements for a run of digits: overflow every integer width, go negative, zero,
# far-future and far-past years, a float where an int is expected, not-a-number.
NASTY_NUMBERS = (
    b"0", b"-1", b"00", b"2147483648", b"-2147483649", b"9223372036854775808",
    b"18446744073709551616", b"99999999999999999999999999999999", b"2999", b"1970",
    b"1969", b"0001", b"9999", b"10000", b"1e308", b"nan", b"inf", b"13", b"32", b"60",
    b"24", b"29", b"0x7fffffff",
)
_YEAR = re.compile(rb"(?<!\d)(?:19|20)\d\d(?!\d)")
_DIGITS = re.compile(rb"\d+")


def _positions(draw: st.DrawFn, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _insert(draw: st.DrawFn, data: bytes) -> bytes:
    i = _positions(draw, data)
    piece = draw(st.sampled_from(NASTY_BYTES) | st.binary(min_size=1, max_size=4))
    return data[:i] + piece + data[i:]


def _delete(draw: st.DrawFn, data: bytes) -> bytes:
    i = _positions(draw, data)
    n = draw(st.integers(1, 8))
    return data[:i] + data[i + n:]


def _replace(draw: st.DrawFn, data: bytes) -> bytes:
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    return data[:i] + draw(st.sampled_from(NASTY_BYTES)) + data[i + 1:]


def _truncate(draw: st.DrawFn, data: bytes) -> bytes:
    return data[:_positions(draw, data)]


def _duplicate(draw: st.DrawFn, data: bytes) -> bytes:
    i = _positions(draw, data)
    j = draw(st.integers(i, len(data)))
    return data[:j] + data[i:j] + data[j:]


def _swap_fields(draw: st.DrawFn, data: bytes) -> bytes:
    sep = draw(st.sampled_from([b" ", b"|", b",", b":"]))
    parts = data.split(sep)
    if len(parts) < 2:
        return data
    i, j = draw(st.integers(0, len(parts) - 1)), draw(st.integers(0, len(parts) - 1))
    parts[i], parts[j] = parts[j], parts[i]
    return sep.join(parts)


def _number(draw: st.DrawFn, data: bytes) -> bytes:
    runs = list(_DIGITS.finditer(data))
    if not runs:
        return data
    m = draw(st.sampled_from(runs))
    return data[:m.start()] + draw(st.sampled_from(NASTY_NUMBERS)) + data[m.end():]


def _year(draw: st.DrawFn, data: bytes) -> bytes:
    """Every year of the line moved to the far future or far past (clock gone wrong)."""
    year = draw(st.sampled_from([b"2999", b"1970", b"1900", b"9999", b"0001", b"2100"]))
    return _YEAR.sub(year, data)


def _sign(draw: st.DrawFn, data: bytes) -> bytes:
    runs = list(_DIGITS.finditer(data))
    if not runs:
        return data
    m = draw(st.sampled_from(runs))
    return data[:m.start()] + b"-" + data[m.start():]


Mutation = Callable[[st.DrawFn, bytes], bytes]
MUTATIONS: tuple[Mutation, ...] = (
    _insert, _delete, _replace, _truncate, _duplicate, _swap_fields, _number, _year, _sign,
)


@st.composite
def mutated_line(draw: st.DrawFn, pool: Sequence[str], max_edits: int = 3) -> bytes:
    """A real line from ``pool`` (UTF-8 bytes) after up to ``max_edits`` edits."""
    data = draw(st.sampled_from(pool)).encode("utf-8", "surrogatepass")
    for edit in draw(st.lists(st.sampled_from(MUTATIONS), max_size=max_edits)):
        data = edit(draw, data)
    return data


@st.composite
def mutated_file(draw: st.DrawFn, pool: Sequence[str], max_lines: int = 30) -> bytes:
    """Bytes of a file of mutated real lines, plus line-level damage: lines dropped,
    repeated, swapped, CRLF ends, a missing final newline."""
    lines = draw(st.lists(mutated_line(pool), max_size=max_lines))
    if lines and draw(st.booleans()):
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    if lines and draw(st.booleans()):
        i = draw(st.integers(0, len(lines) - 1))
        lines[i:i] = [lines[i]] * draw(st.integers(1, 3))
    sep = draw(st.sampled_from([b"\n", b"\r\n"]))
    body = sep.join(lines)
    if lines and draw(st.booleans()):
        body += sep
    return body


def text_of(data: bytes) -> str:
    """The text a parser is given for these bytes (as ingest decodes them)."""
    return decode(data)


@st.composite
def stored(draw: st.DrawFn, content: bytes) -> bytes:
    """``content`` as a file may store it: plain, gzip, or gzip cut short or corrupted."""
    how = draw(st.sampled_from(["plain", "plain", "gzip", "gzip_cut", "gzip_garbage"]))
    if how == "plain":
        return content
    packed = gzip.compress(content, mtime=0)
    if how == "gzip":
        return packed
    if how == "gzip_cut":
        return packed[:draw(st.integers(2, max(2, len(packed) - 1)))]
    return packed[:10] + draw(st.binary(min_size=1, max_size=64))
