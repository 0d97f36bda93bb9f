"""``faultline rules check``: validate rules files and run every example they carry.

Loading validates a file's shape (:mod:`kernel_rules` raises ``RuleError`` naming the
entry). Checking goes further, the way a test would: every example line must be read
by its own rule (with the site's rules before the built-in ones, exactly as an ingest
with ``--rules`` reads it), give the device, Xid and attributes it lists, and pass the
pre-filter (the rule's ``select`` in both regex engines, and one of its literals);
every ``not_example`` must not be read by the rule. An example may be a message or a
whole log line (dmesg, syslog, kmsg...): a line the message alone does not match is
read as a kernel line first, so operators can paste lines as they found them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from faultline.pipeline.parsers.kernel_fields import MessageMatch
from faultline.pipeline.parsers.kernel_rules import (
    Example,
    Rule,
    RuleSet,
    builtin_rules,
    read_rule_files,
    ruleset,
)
from faultline.pipeline.parsers.kernel_shapes import parse_line
from faultline.pipeline.records import ParseContext

_CTX = ParseContext(path="<rules check>")


@dataclass
class CheckReport:
    """What a check found: counts, and one line per problem (empty: all passed)."""

    rules: int = 0
    examples: int = 0
    not_examples: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def read_line(rs: RuleSet, line: str, program: str | None = None
              ) -> tuple[MessageMatch | None, str]:
    """The set's reading of ``line`` as a message, else as a whole kernel log line."""
    mm = rs.classify(line, program)
    if mm is not None:
        return mm, line
    kl = parse_line(line, _CTX)
    if kl is None or kl.message == line:
        return None, line
    return rs.classify(kl.message, kl.program if program is None else program), kl.message


def _example_problems(rs: RuleSet, rule: Rule, i: int, ex: Example) -> list[str]:
    where = f"{rule.origin}: rule {rule.id}: example #{i}"
    mm, message = read_line(rs, ex.line, ex.program)
    if mm is None:
        return [f"{where}: no rule reads it: {ex.line!r}"]
    if mm.rule_id != rule.id:
        return [f"{where}: rule {mm.rule_id} (of {rs.by_id[mm.rule_id].origin}) reads it "
                f"first: {ex.line!r}"]
    out = []
    if ex.device is not None and mm.device != ex.device:
        out.append(f"{where}: device {mm.device!r}, expected {ex.device!r}")
    if ex.xid is not None and mm.xid != ex.xid:
        out.append(f"{where}: xid {mm.xid!r}, expected {ex.xid!r}")
    for key, want in ex.attrs:
        if mm.attrs.get(key) != want:
            out.append(f"{where}: attrs.{key} = {mm.attrs.get(key)!r}, expected {want!r}")
    if not any(nd in message for nd in rule.needles):
        out.append(f"{where}: contains none of the rule's literals {list(rule.needles)}")
    if re.search(rule.select, message) is None:
        out.append(f"{where}: the rule's select regex does not match it")
    elif not pl.Series([message]).str.contains(rule.select)[0]:
        out.append(f"{where}: the rule's select regex does not match it in polars (Rust)")
    return out


def check_rules(rules: Sequence[Rule], rs: RuleSet) -> CheckReport:
    """Run the examples and not-examples of ``rules`` against the set ``rs``."""
    report = CheckReport(rules=len(rules))
    for rule in rules:
        for i, ex in enumerate(rule.examples, 1):
            report.examples += 1
            report.problems.extend(_example_problems(rs, rule, i, ex))
        for j, line in enumerate(rule.not_examples, 1):
            report.not_examples += 1
            mm, _ = read_line(rs, line, None)
            if mm is not None and mm.rule_id == rule.id:
                report.problems.append(f"{rule.origin}: rule {rule.id}: not_example #{j} "
                                       f"is read by the rule: {line!r}")
    return report


def check_files(paths: Sequence[str | Path]) -> CheckReport:
    """Check site rules files (none: the built-in rules). ``RuleError`` if malformed."""
    if not paths:
        rs = ruleset()
        return check_rules(builtin_rules(), rs)
    sources = read_rule_files(paths)
    rs = ruleset(sources)
    site = rs.rules[: len(rs.rules) - len(builtin_rules())]
    return check_rules(site, rs)
