"""Where the members of a JSON array sit in the text: so that a JSON dump's records
(Redfish log entries, sacct --json jobs) are counted on the lines they span.

Pure; ``json`` only (no eval). The document is validated with :func:`json.loads` first;
the members are then located with ``JSONDecoder.raw_decode``, which returns where each
value ends (https://docs.python.org/3/library/json.html#json.JSONDecoder.raw_decode).
"""

from __future__ import annotations

import bisect
import json
import re

_DECODER = json.JSONDecoder()


def array_members(text: str, key: str | None, expected: int
                  ) -> list[tuple[object, int, int]] | None:
    """``(member, start, end)`` character spans of the array under ``"key"`` (the first
    ``"key": [`` in the text; ``key`` None: the text's own top-level array), or None
    when they cannot be located one by one (the scan finds a different number of
    members than ``expected``)."""
    m = re.search(rf'"{re.escape(key)}"\s*:\s*\[' if key is not None else r"^\s*\[", text)
    if m is None:
        return None
    out: list[tuple[object, int, int]] = []
    pos, n = m.end(), len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n or text[pos] == "]":
            break
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            return None
        out.append((obj, pos, end))
        pos = end
    return out if len(out) == expected else None


class LineIndex:
    """1-based line numbers of character offsets in ``"\\n".join(lines)``."""

    def __init__(self, lines: list[str]) -> None:
        self.starts = [0]
        for ln in lines[:-1]:
            self.starts.append(self.starts[-1] + len(ln) + 1)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)
