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


def count_lines(data: bytes) -> int:
    """Number of lines in ``data``, by the same rule as :func:`split_lines`."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
