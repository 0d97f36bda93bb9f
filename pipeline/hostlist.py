"""Slurm host-list syntax: expand ``node[0000-0007,0012]`` to names, and compress back.

Grammar (as Slurm's ``hostlist.c`` reads it): a host list is a comma-separated list of
host expressions; commas inside ``[...]`` belong to the bracket. A host expression is
text with any number of bracket groups, each a comma-separated list of numbers and
``lo-hi`` ranges; several groups multiply out (``a[1-2]b[3-4]`` gives four names, the
rightmost group varying fastest). A range keeps the zero padding of its low end
(``[08-10]`` gives ``08 09 10``; ``[8-10]`` gives ``8 9 10``).

Pure functions, no IO. Malformed input raises :class:`HostlistError` (a ``ValueError``);
parsers catch it and keep the text as written.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MAX_HOSTS = 1_000_000  # a host list that expands to more than this is refused

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


class HostlistError(ValueError):
    """A host list that is not valid Slurm syntax (or expands to too many hosts)."""


def _split_top_level(text: str) -> list[str]:
    """Split on commas (and whitespace) outside brackets."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in host list {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in host list {text!r}")
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in host list {text!r}")
    if cur:
        parts.append("".join(cur))
    return parts


def _expand_bracket(body: str, text: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        if not item:
            raise HostlistError(f"empty range in host list {text!r}")
        lo, sep, hi = item.partition("-")
        # isdecimal, not isdigit: "²" is a digit that int() cannot read
        if not lo.isdecimal() or (sep and not hi.isdecimal()):
            raise HostlistError(f"bad range {item!r} in host list {text!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(f"descending range {item!r} in host list {text!r}")
        if b - a + 1 > MAX_HOSTS:
            raise HostlistError(f"range {item!r} is too large")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


def _expand_one(expr: str, text: str) -> list[str]:
    if "[" not in expr and "]" not in expr:
        return [expr]
    pieces: list[list[str]] = []
    pos = 0
    for m in re.finditer(r"\[([^\[\]]*)\]", expr):
        if m.start() > pos:
            pieces.append([expr[pos:m.start()]])
        pieces.append(_expand_bracket(m.group(1), text))
        pos = m.end()
    rest = expr[pos:]
    if "[" in rest or "]" in rest:
        raise HostlistError(f"unbalanced brackets in host list {text!r}")
    if rest:
        pieces.append([rest])
    total = 1
    for p in pieces:
        total *= len(p)
        if total > MAX_HOSTS:
            raise HostlistError(f"host list {text!r} expands to too many hosts")
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm host list into host names, in order, duplicates kept.

    ``""``, ``"None"`` and ``"None assigned"`` (sacct's empty node list) give ``[]``.
    """
    text = (text or "").strip()
    if not text or text in ("None", "None assigned", "(null)"):
        return []
    hosts: list[str] = []
    for expr in _split_top_level(text):
        hosts.extend(_expand_one(expr, text))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"host list {text!r} expands to too many hosts")
    return hosts


def try_expand_hostlist(text: str) -> list[str]:
    """:func:`expand_hostlist`, but malformed input gives ``[text]`` (kept as written)."""
    try:
        return expand_hostlist(text)
    except HostlistError:
        return [text.strip()] if text and text.strip() else []


def compress_hostlist(hosts: Iterable[str]) -> str:
    """The inverse of :func:`expand_hostlist`, for display: ``node[0000-0007,0012]``.

    Hosts are de-duplicated and grouped by the text around their last number; numbers
    in a group are sorted and consecutive ones (with compatible zero padding) become
    ranges. ``expand_hostlist(compress_hostlist(h))`` gives the same set of names.
    """
    groups: dict[tuple[str, str], set[str]] = {}
    plain: set[str] = set()
    for h in hosts:
        h = h.strip()
        if not h:
            continue
        m = _TRAILING_NUMBER.match(h)
        if m is None or "[" in h or "]" in h or "," in h:
            plain.add(h)
            continue
        groups.setdefault((m.group(1), m.group(3)), set()).add(m.group(2))
    items: list[tuple[tuple[str, str, int], str]] = []
    for (prefix, suffix), nums in groups.items():
        ordered = sorted(nums, key=lambda s: (int(s), len(s)))
        ranges: list[tuple[str, str]] = []  # (lo_text, hi_text)
        for s in ordered:
            if ranges:
                lo, hi = ranges[-1]
                if int(s) == int(hi) + 1 and str(int(s)).zfill(len(lo)) == s:
                    ranges[-1] = (lo, s)
                    continue
            ranges.append((s, s))
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            body = f"{prefix}{ranges[0][0]}{suffix}"
        else:
            inner = ",".join(lo if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)
            body = f"{prefix}[{inner}]{suffix}"
        items.append(((prefix, suffix, int(ordered[0])), body))
    items.extend(((h, "", -1), h) for h in plain)
    return ",".join(body for _, body in sorted(items))
