"""Kernel message rules as data: TOML files, validated at load, compiled into a RuleSet.

The built-in rules ship as ``rules/*.toml`` next to this module (package data); a site
adds its own with ``faultline ingest --rules FILE`` in the same format, and
``faultline rules check FILE`` validates a file and runs its examples. One
``[[rule]]`` table per message family::

    [[rule]]
    id = "site.gpu_health"             # unique over the built-in and site rules
    kind = "gpu_lost"                   # a kind of schemas/event_kinds.py
    pattern = 'healthcheck: GPU (?P<pci>[0-9a-f:.]+) failed: (?P<reason>.*)'
    literal = "healthcheck: GPU "       # a substring every matching line contains
    source = "https://wiki.example.org/gpu-health (our own check)"

    [[rule.example]]                    # at least one; real lines
    line = "healthcheck: GPU 0000:3b:00.0 failed: no response"
    device = "0000:3b:00.0"             # optional: the values it must give
    attrs = { reason = "no response" }

Optional keys: ``select`` (the regex the vectorized polars pass runs, in the syntax
both Rust's ``regex`` crate and Python's ``re`` accept; default: the literals),
``fields`` / ``absorb`` (a named extractor or continuation decider of
:mod:`kernel_fields`; without ``fields`` the named groups ``device``, ``pci``, ``xid``
and any others become the event's device, Xid and attributes), ``max_absorb``,
``programs`` (syslog tags besides the kernel's whose lines the rule reads; ``"*"``
any), ``xid`` and ``attrs`` (values every event of the rule carries), ``license``,
``not_example`` (routine lines the rule must not match).

The message a rule sees is the text after the line's time/host/tag prefix. Rules are
tried in order, site rules first, and the first match wins. Why data: a family is
added, reviewed and tested as one entry with its source and real lines, and a site can
extend the set without touching code. Nothing here runs what it reads (TOML only).
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import polars as pl

from faultline.pipeline.parsers import kernel_fields, kernel_fields_host
from faultline.pipeline.parsers.kernel_fields import MessageMatch, groups_fields
from faultline.pipeline.records import INT32_MAX
from faultline.schemas.event_kinds import EVENT_KINDS

#: Programs besides the kernel whose syslog lines a rule reads ("*": any program).
ANY_PROGRAM = "*"
_KERNEL_PROGRAMS = (None, "kernel")

FIELDS = {**kernel_fields.FIELDS, **kernel_fields_host.FIELDS}
ABSORB = {**kernel_fields.ABSORB, **kernel_fields_host.ABSORB}

#: The built-in files, in the order their rules are tried.
BUILTIN_FILES = ("gpu.toml", "network.toml", "pcie.toml", "memory.toml", "storage.toml",
                 "host.toml")

_KEYS = {"id", "kind", "pattern", "literal", "select", "source", "license", "fields",
         "absorb", "max_absorb", "programs", "xid", "attrs", "example", "not_example",
         "note"}
_EXAMPLE_KEYS = {"line", "device", "xid", "attrs", "program", "source", "license"}
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_RE_META = re.compile(r"([\\.^$|?*+()\[\]{}])")


class RuleError(ValueError):
    """A rules file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Example:
    """A real line a rule must match, and the values it must give."""

    line: str
    device: str | None = None
    xid: int | None = None
    attrs: tuple[tuple[str, object], ...] = ()
    program: str | None = None


@dataclass(frozen=True)
class Rule:
    """One kernel-message family, compiled."""

    id: str
    kind: str
    pattern: str  # Python regex, searched in the message
    needles: tuple[str, ...]  # the ``literal``s: every matching message contains one
    select: str  # unanchored regex for the vectorized pre-filter (Rust + Python syntax)
    source: str
    examples: tuple[Example, ...]
    origin: str = "<builtin>"  # file the rule came from
    not_examples: tuple[str, ...] = ()
    fields: str | None = None  # a key of FIELDS (None: the named groups)
    absorb: str | None = None  # a key of ABSORB
    max_absorb: int = 0
    programs: frozenset[str] = frozenset()
    xid: int | None = None  # fixed Xid of every event (a wording that means one)
    attrs: tuple[tuple[str, object], ...] = ()  # fixed attributes of every event
    license: str | None = None
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))

    def applies_to(self, program: str | None) -> bool:
        return (program in _KERNEL_PROGRAMS or ANY_PROGRAM in self.programs
                or program in self.programs)

    def match(self, message: str, program: str | None = None) -> MessageMatch | None:
        """This rule's reading of ``message``, or None if it does not apply."""
        if not self.applies_to(program) or not any(nd in message for nd in self.needles):
            return None
        m = self.regex.search(message)
        if m is None:
            return None
        mm = MessageMatch(self.id, self.kind)
        (FIELDS[self.fields] if self.fields else groups_fields)(m, mm)
        if self.xid is not None:
            mm.xid = self.xid
        # a fresh list per event: absorbing lines may append to one
        mm.attrs.update((k, list(v) if isinstance(v, list) else v) for k, v in self.attrs)
        return mm


@dataclass(frozen=True)
class RuleSet:
    """Rules in the order they are tried, with the union regex of the polars pass."""

    rules: tuple[Rule, ...]
    by_id: dict[str, Rule] = field(init=False, repr=False, compare=False)
    select_pattern: str = field(init=False, repr=False, compare=False)
    needles: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # each distinct literal with the positions of the rules that name it
    by_needle: tuple[tuple[str, tuple[int, ...]], ...] = field(init=False, repr=False,
                                                               compare=False)

    def __post_init__(self) -> None:
        by_id: dict[str, Rule] = {}
        for r in self.rules:
            if r.id in by_id:  # name the earlier one: a site file, before the built-ins
                raise RuleError(f"{by_id[r.id].origin}: rule {r.id!r}: id already used by "
                                f"a rule of {r.origin}")
            by_id[r.id] = r
        object.__setattr__(self, "by_id", by_id)
        object.__setattr__(self, "select_pattern",
                           "|".join(f"(?:{r.select})" for r in self.rules))
        positions: dict[str, list[int]] = {}  # in the order literals first appear
        for i, r in enumerate(self.rules):
            for nd in r.needles:
                positions.setdefault(nd, []).append(i)
        object.__setattr__(self, "needles", tuple(positions))
        object.__setattr__(self, "by_needle",
                           tuple((nd, tuple(ix)) for nd, ix in positions.items()))

    def classify(self, message: str, program: str | None = None) -> MessageMatch | None:
        """The first rule matching ``message`` (text after the line prefix), or None.

        ``program`` is the syslog tag (``kernel``, ``systemd-networkd``...); None means
        kernel text without a tag (dmesg, kmsg). Non-kernel programs are read only by
        the rules that name them.

        Only the rules one of whose literals the message contains are tried (a rule
        without one cannot match), in their order: one substring test per distinct
        literal instead of a Python call per rule (3.3k messages of small x4 made
        146k ``Rule.match`` calls).
        """
        tried = {i for nd, ix in self.by_needle if nd in message for i in ix}
        for i in sorted(tried):
            mm = self.rules[i].match(message, program)
            if mm is not None:
                return mm
        return None

    def absorbs(self, mm: MessageMatch, next_message: str) -> bool:
        """Whether the next line's message continues the event ``mm`` (updating it)."""
        rule = self.by_id[mm.rule_id]
        return rule.absorb is not None and ABSORB[rule.absorb](mm, next_message)


# --- loading and validation ----------------------------------------------------------------


def escape_literal(text: str) -> str:
    """``text`` as a regex both engines read literally (Python's re.escape also escapes
    spaces and ``#``, which Rust's regex rejects outside verbose mode)."""
    return _RE_META.sub(r"\\\1", text)


def _scalar(v: object) -> bool:
    return isinstance(v, (str, int, float, bool))


def _attrs(raw: object, where: str) -> tuple[tuple[str, object], ...]:
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: 'attrs' must be a table of values")
    for k, v in raw.items():
        if not (_scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v))):
            raise RuleError(f"{where}: attrs.{k} must be a string, number, boolean or list")
    return tuple((k, list(v) if isinstance(v, list) else v) for k, v in raw.items())


def _str(entry: dict, key: str, where: str, *, required: bool = True) -> str | None:
    v = entry.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v.strip():
        raise RuleError(f"{where}: '{key}' must be a non-empty string"
                        + ("" if key in entry else " (missing)"))
    return v


def _xid(v: object, where: str) -> int | None:
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= INT32_MAX:
        raise RuleError(f"{where}: 'xid' must be an integer from 1 to {INT32_MAX}")
    return v


def _compile(pattern: str, key: str, where: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise RuleError(f"{where}: '{key}' is not a valid regex: {exc}") from None


def _example(raw: object, where: str) -> Example:
    if isinstance(raw, str):
        raw = {"line": raw}
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: an example must be a table with 'line' (or a string)")
    unknown = set(raw) - _EXAMPLE_KEYS
    if unknown:
        raise RuleError(f"{where}: unknown example key(s) {sorted(unknown)}")
    line = _str(raw, "line", where)
    assert line is not None
    device = _str(raw, "device", where, required=False)
    program = _str(raw, "program", where, required=False)
    attrs = _attrs(raw.get("attrs", {}), where)
    return Example(line, device, _xid(raw.get("xid"), where), attrs, program)


def _suggest(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=3)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def parse_rule(entry: object, origin: str, index: int) -> Rule:
    """One ``[[rule]]`` table, validated; ``RuleError`` names the entry and the problem."""
    where = f"{origin}: rule #{index}"
    if not isinstance(entry, dict):
        raise RuleError(f"{where}: must be a table")
    rid = entry.get("id")
    if not isinstance(rid, str) or not _ID_RE.match(rid):
        raise RuleError(f"{where}: 'id' must be a word of letters, digits and _ . : -"
                        + ("" if "id" in entry else " (missing)"))
    where = f"{origin}: rule #{index} ({rid})"
    unknown = set(entry) - _KEYS
    if unknown:
        raise RuleError(f"{where}: unknown key(s) {sorted(unknown)}"
                        + _suggest(sorted(unknown)[0], _KEYS))
    kind = _str(entry, "kind", where)
    if kind not in EVENT_KINDS:
        raise RuleError(f"{where}: kind {kind!r} is not an event kind of "
                        f"schemas/event_kinds.py{_suggest(str(kind), EVENT_KINDS)}")
    pattern = _str(entry, "pattern", where)
    assert pattern is not None and kind is not None
    _compile(pattern, "pattern", where)
    lit = entry.get("literal")
    literals = [lit] if isinstance(lit, str) else lit
    if (not isinstance(literals, list) or not literals
            or not all(isinstance(x, str) and x for x in literals)):
        raise RuleError(f"{where}: 'literal' must be a non-empty string or list of strings"
                        + ("" if "literal" in entry else " (missing)"))
    select = _str(entry, "select", where, required=False)
    if select is None:
        select = "|".join(escape_literal(x) for x in literals)
    _compile(select, "select", where)
    try:
        pl.Series([""]).str.contains(select)
    except Exception as exc:  # polars raises ComputeError for syntax Rust rejects
        raise RuleError(f"{where}: 'select' is not valid for the polars (Rust) regex "
                        f"engine: {str(exc).splitlines()[0]}") from None
    source = _str(entry, "source", where)
    fields_name = _str(entry, "fields", where, required=False)
    if fields_name is not None and fields_name not in FIELDS:
        raise RuleError(f"{where}: no field extractor {fields_name!r}"
                        + _suggest(fields_name, FIELDS))
    absorb = _str(entry, "absorb", where, required=False)
    if absorb is not None and absorb not in ABSORB:
        raise RuleError(f"{where}: no continuation decider {absorb!r}"
                        + _suggest(absorb, ABSORB))
    max_absorb = entry.get("max_absorb", 1 if absorb else 0)
    if not isinstance(max_absorb, int) or isinstance(max_absorb, bool) or not (
            0 <= max_absorb <= 256) or (absorb and max_absorb < 1):
        raise RuleError(f"{where}: 'max_absorb' must be an integer from "
                        f"{1 if absorb else 0} to 256")
    programs = entry.get("programs", [])
    if not isinstance(programs, list) or not all(isinstance(p, str) and p for p in programs):
        raise RuleError(f"{where}: 'programs' must be a list of syslog tags")
    raw_examples = entry.get("example")
    if not isinstance(raw_examples, list) or not raw_examples:
        raise RuleError(f"{where}: needs at least one [[rule.example]] (a real line)")
    examples = tuple(_example(x, f"{where}: example #{i}")
                     for i, x in enumerate(raw_examples, 1))
    not_examples = entry.get("not_example", [])
    if not isinstance(not_examples, list) or not all(isinstance(x, str) for x in not_examples):
        raise RuleError(f"{where}: 'not_example' must be a list of strings")
    license_ = _str(entry, "license", where, required=False)
    return Rule(
        id=rid, kind=kind, pattern=pattern, needles=tuple(literals), select=select,
        source=source or "", examples=examples, origin=origin,
        not_examples=tuple(not_examples), fields=fields_name, absorb=absorb,
        max_absorb=max_absorb, programs=frozenset(programs),
        xid=_xid(entry.get("xid"), where), attrs=_attrs(entry.get("attrs", {}), where),
        license=license_,
    )


def parse_rules(text: str, origin: str) -> tuple[Rule, ...]:
    """The rules of one TOML document (``origin`` names it in errors)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{origin}: not valid TOML: {exc}") from None
    unknown = set(doc) - {"rule", "note"}
    if unknown:
        raise RuleError(f"{origin}: unknown top-level key(s) {sorted(unknown)} "
                        "(rules are [[rule]] tables)")
    entries = doc.get("rule")
    if not isinstance(entries, list) or not entries:
        raise RuleError(f"{origin}: no [[rule]] tables")
    return tuple(parse_rule(e, origin, i) for i, e in enumerate(entries, 1))


def read_rule_files(paths: Iterable[str | Path]) -> tuple[tuple[str, str], ...]:
    """``(name, text)`` of each site rules file, validated (RuleError if unusable)."""
    out = []
    for p in paths:
        path = Path(p)
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise RuleError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise RuleError(f"{path}: not UTF-8 text") from None
        out.append((str(path), text))
    sources = tuple(out)
    ruleset(sources)  # validates, ids unique against the built-in rules too
    return sources


def _builtin_texts() -> tuple[tuple[str, str], ...]:
    root = resources.files("faultline.pipeline.parsers").joinpath("rules")
    return tuple((f"rules/{name}", root.joinpath(name).read_text("utf-8"))
                 for name in BUILTIN_FILES)


@functools.cache
def builtin_rules() -> tuple[Rule, ...]:
    return tuple(r for name, text in _builtin_texts() for r in parse_rules(text, name))


@functools.lru_cache(maxsize=8)
def ruleset(sources: tuple[tuple[str, str], ...] = ()) -> RuleSet:
    """Site rules (``(name, TOML text)`` pairs) followed by the built-in ones; compiled
    once per worker process and set of sources."""
    site = tuple(r for name, text in sources for r in parse_rules(text, name))
    return RuleSet(site + builtin_rules())
