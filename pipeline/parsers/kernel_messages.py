"""Kernel messages that matter: the rule set, and what the parsers ask of it.

The rules are data (``rules/*.toml``, one entry per message family with its regex,
pre-filter literals, source and real example lines; :mod:`kernel_rules` loads and
validates them, and :mod:`kernel_fields` holds the few named extractors a regex alone
cannot express). ``tests/test_parse_kernel.py`` and ``faultline rules check`` walk
every rule and its examples.

Selection is two-stage. :data:`SELECT_PATTERN` (the union of every rule's ``select``)
runs once over all lines of a file as one polars ``str.contains``; only the lines it
selects reach :func:`classify`, which tries the rules in order (first match wins: the
Xid rule comes before the generic "fallen off the bus" rule, soft lockups before
``BUG:``). ``select`` fragments use the syntax both Rust's ``regex`` crate and Python's
``re`` accept (no look-around, no back-references) and must select every message the
rule's ``pattern`` matches.

Multi-line records: a rule with ``absorb`` decides whether the next line's message
belongs to the same event (an AER report and its ``device [...] error status/mask``
detail lines, an APEI record's ``{1}[Hardware Error]`` lines, the ``oom-kill:`` summary
and its ``Killed process`` line, ``GPU at PCI`` and the ``Board Serial Number`` line).

A site's own rules (``--rules FILE``) come first; :func:`ruleset` compiles a set once
per worker. The module-level names below are the built-in set.
"""

from __future__ import annotations

from faultline.pipeline.parsers.kernel_fields import MessageMatch
from faultline.pipeline.parsers.kernel_rules import (
    ANY_PROGRAM,
    Rule,
    RuleError,
    RuleSet,
    ruleset,
)

__all__ = ["ANY_PROGRAM", "RULES", "RULES_BY_ID", "SELECT_NEEDLES", "SELECT_PATTERN",
           "MessageMatch", "Rule", "RuleError", "RuleSet", "absorbs", "classify",
           "literal_needles", "required_literal", "ruleset"]


# --- literal needles of a select regex (the cheap pre-check) -------------------------


def _split_alternatives(pattern: str) -> list[str]:
    """Top-level ``|`` alternatives of a regex (groups and classes kept whole)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            cur.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            j = _class_end(pattern, i)
            cur.append(pattern[i : j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _class_end(pattern: str, i: int) -> int:
    j = i + 1
    if pattern[j] == "^":
        j += 1
    if pattern[j] == "]":
        j += 1
    while pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j


def _group_end(pattern: str, i: int) -> int:
    depth, j = 0, i
    while True:
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _class_end(pattern, j) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
        j += 1


def _skip_quantifier(pattern: str, i: int) -> int:
    if i < len(pattern) and pattern[i] in "?*+":
        return i + 1
    if i < len(pattern) and pattern[i] == "{":
        return pattern.index("}", i) + 1
    return i


def required_literal(alternative: str) -> str:
    """The longest literal run every match of ``alternative`` (no top-level ``|``) contains."""
    runs: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    i, n = 0, len(alternative)
    while i < n:
        c = alternative[i]
        if c in "[(" or c in ".^$" or (c == "\\" and alternative[i + 1].isalnum()):
            # a class, group, wildcard, anchor or \d-like escape: not a literal
            flush()
            if c == "[":
                i = _class_end(alternative, i) + 1
            elif c == "(":
                i = _group_end(alternative, i) + 1
            else:
                i += 2 if c == "\\" else 1
            i = _skip_quantifier(alternative, i)
            continue
        tok, i = (alternative[i + 1], i + 2) if c == "\\" else (c, i + 1)
        if i < n and alternative[i] in "?*{":  # optional or counted: not required
            flush()
            i = _skip_quantifier(alternative, i)
            continue
        cur.append(tok)
        if i < n and alternative[i] == "+":  # one or more: the first one is required
            flush()
            i += 1
    flush()
    return max(runs, key=len, default="")


def literal_needles(pattern: str) -> tuple[str, ...] | None:
    """Literals such that every match of ``pattern`` contains at least one of them
    (case-sensitively), or None when that cannot be said of some alternative."""
    if "(?i" in pattern or "(?x" in pattern:
        return None
    out: list[str] = []
    for alt in _split_alternatives(pattern):
        lit = required_literal(alt)
        if not lit and alt.startswith("(?:"):
            # a leading group of literal alternatives: ``(?:foo|bar)\s*\d+``
            end = _group_end(alt, 0)
            inner = literal_needles(alt[3:end])
            if inner is not None and alt[end + 1:end + 2] not in ("?", "*", "{"):
                out.extend(inner)
                continue
        if not lit:
            return None
        out.append(lit)
    return tuple(out)



DEFAULT: RuleSet = ruleset()
RULES: tuple[Rule, ...] = DEFAULT.rules
RULES_BY_ID: dict[str, Rule] = DEFAULT.by_id

#: The one vectorized pre-filter: a line can give an event only if it matches this.
SELECT_PATTERN: str = DEFAULT.select_pattern

#: Literal needles: a line the SELECT_PATTERN matches contains at least one of them
#: (the cheap pre-check of small files).
SELECT_NEEDLES: tuple[str, ...] = DEFAULT.needles


def classify(message: str, program: str | None = None) -> MessageMatch | None:
    """The first built-in rule matching ``message`` (see :meth:`RuleSet.classify`)."""
    return DEFAULT.classify(message, program)


def absorbs(mm: MessageMatch, next_message: str) -> bool:
    """Whether the next line's message continues the event ``mm`` (updating it)."""
    return DEFAULT.absorbs(mm, next_message)
