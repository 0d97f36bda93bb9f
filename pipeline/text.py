"""Bytes to lines, the way line accounting counts them.

A line ends at ``\\n``; ``\\r\\n`` is one line end; a final line without a newline is
still a line; an empty file has no lines. ``str.splitlines`` is not used because it
also splits on ``\\r``, form feeds and Unicode separators that real logs contain inside
a line, which would make the counts disagree with ``wc -l``-style truth.
"""

from __future__ import annotations


def decode(data: bytes) -> str:
    """Decode log bytes: invalid UTF-8 becomes U+FFFD, NUL bytes are kept as text."""
    return data.decode("utf-8", errors="replace")


def split_lines(text: str) -> list[str]:
    """Split text into lines (without their ``\\n`` or ``\\r\\n``)."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if "\r" not in text:
        return lines
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def head_lines(data: bytes, n: int) -> list[str]:
    """``split_lines(decode(data))[:n]``, decoding only those lines (a 32 KB chunk read
    for its first 40 lines is mostly past them). Cutting the bytes after a ``\n`` first
    is the same: ``\n`` is never part of a UTF-8 sequence, so a broken sequence before
    it decodes to the same U+FFFD either way."""
    end = -1
    for _ in range(n):
        end = data.find(b"\n", end + 1)
        if end < 0:  # at most n lines: all of them
            return split_lines(decode(data))
    return split_lines(decode(data[:end + 1]))


def first_lines(text: str, n: int) -> list[str]:
    """``split_lines(text)[:n]``, splitting only those lines."""
    end = -1
    for _ in range(n):
        end = text.find("\n", end + 1)
        if end < 0:
            return split_lines(text)
    return split_lines(text[:end + 1])


def tail_lines(data: bytes, n: int) -> list[str]:
    """``split_lines(decode(data))[1:][-n:]``: the last ``n`` lines of a chunk read from
    the middle of a file, its first (partial) line never among them; decoding only
    those (cut after a ``\n``, as in :func:`head_lines`)."""
    start = len(data) - 1 if data.endswith(b"\n") else len(data)  # the last line's end
    for _ in range(n):
        start = data.rfind(b"\n", 0, start)
        if start < 0:  # at most n lines after the first: all of those
            return split_lines(decode(data))[1:]
    return split_lines(decode(data[start + 1:]))


def count_lines(data: bytes) -> int:
    """Number of lines in ``data``, by the same rule as :func:`split_lines`."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
