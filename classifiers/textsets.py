"""The labeled examples the free-text classifiers train and are scored on.

Data
----
Two sources, both read through :mod:`faultline.fixtures.textdata` (never through the
simulator):

- ``fixtures/text/real/*.csv`` (:func:`real_examples`): drain reasons, admin comments,
  health-check messages and logbook sentences quoted from public sources, one file per
  source group; ``fixtures/text/real_tracebacks.toml`` (:func:`real_traceback_examples`):
  tracebacks pasted in public issue threads. The family of a real example is
  ``real:<group>``.
- the hand-written templates (:func:`reason_examples`, :func:`traceback_examples`),
  expanded into concrete texts: every template is filled :data:`REALIZATIONS` times with
  :func:`~faultline.fixtures.textdata.random_slots` drawn for the row's own component (so
  ``{xid}`` always fits the label). Each template gets its own ``random.Random`` seeded
  from (:data:`SEED`, kind, family, template), so the expansion of one row does not change
  when other rows are added, removed or reordered.

The shipped models train on both (:func:`shipped_examples`); they are scored on real
source groups they did not see (:mod:`faultline.classifiers.source_eval`).

Tracebacks have few placeholders, so their realizations barely differ. They are also
augmented with their *tail* (the last frames and the exception line), which is what a
log shows when the head of a traceback was interleaved with other ranks' output or cut.

Splits are always by wording family (fixtures/text/README.md): the fixed holdouts
:data:`REASON_HOLDOUT` and :data:`TRACEBACK_HOLDOUT`, and leave-one-family-out
(:func:`faultline.classifiers.training.leave_one_family_out`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from faultline.fixtures import textdata

SEED = 20240703
REALIZATIONS = 6  # filled copies of each drain-reason / admin-comment template
TRACEBACK_REALIZATIONS = 3  # filled copies of each traceback (plus one tail each)
TRACEBACK_TAIL_LINES = 7  # lines kept by the tail augmentation

# Fixed family holdouts (fixtures/text/README.md, "Splitting by family").
REASON_HOLDOUT = ("nhc", "oncall-verbose", "sched-admin")
TRACEBACK_HOLDOUT = ("cuda-illegal-access", "nccl-usage", "lustre-io", "auth-token")

REASON_KINDS = ("drain_reason", "admin_comment")
REAL_FAMILY_PREFIX = "real:"


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    family: str
    kind: str


# --------------------------------------------------------------------------- data


def _template_rng(kind: str, family: str, text: str, seed: int) -> random.Random:
    # str seeds are hashed with SHA-512 by random.seed (version 2): stable across runs.
    return random.Random(f"{seed}|{kind}|{family}|{text}")


def _tail(text: str, lines: int) -> str:
    body = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(body[-lines:])


def reason_examples(seed: int = SEED, realizations: int = REALIZATIONS) -> list[Example]:
    """Drain reasons and admin comments, each template filled ``realizations`` times."""
    out: list[Example] = []
    for t in textdata.templates():
        if t.kind not in REASON_KINDS:
            continue
        rng = _template_rng(t.kind, t.family, t.text, seed)
        seen: set[str] = set()
        for _ in range(realizations):
            text = textdata.fill(t.text, textdata.random_slots(rng, t.label))
            if text not in seen:  # placeholder-free templates give one text
                seen.add(text)
                out.append(Example(text, t.label, t.family, t.kind))
    return out


def real_examples() -> list[Example]:
    """The quoted real texts, family ``real:<source group>``, kind = the row's task."""
    return [Example(r.text, r.label, REAL_FAMILY_PREFIX + r.group, r.task)
            for r in textdata.real_texts()]


def real_traceback_examples() -> list[Example]:
    """The quoted real tracebacks, family ``real:<group>``."""
    return [Example(r.text, r.label, REAL_FAMILY_PREFIX + r.group, "traceback")
            for r in textdata.real_tracebacks()]


def shipped_examples(task: str) -> list[Example]:
    """What the shipped model of ``task`` trains on: the real texts (or real tracebacks)
    first, then the hand-written templates."""
    if task == "reason":
        return real_examples() + reason_examples()
    if task == "traceback":
        return real_traceback_examples() + traceback_examples()
    raise ValueError(f"unknown task {task!r}; expected 'reason' or 'traceback'")


def traceback_examples(seed: int = SEED, realizations: int = TRACEBACK_REALIZATIONS,
                       tail: bool = True) -> list[Example]:
    """Tracebacks filled ``realizations`` times, plus (``tail=True``) one tail of each."""
    out: list[Example] = []
    for t in textdata.templates():
        if t.kind != "traceback":
            continue
        rng = _template_rng(t.kind, t.family, t.text, seed)
        seen: set[str] = set()
        for i in range(realizations):
            text = textdata.fill(t.text, textdata.random_slots(rng, t.label))
            if text not in seen:
                seen.add(text)
                out.append(Example(text, t.label, t.family, t.kind))
            if tail and i == 0:
                out.append(Example(_tail(text, TRACEBACK_TAIL_LINES), t.label, t.family,
                                   "traceback_tail"))
    return out


def split_by_family(examples: Sequence[Example], test_families: Iterable[str]
                    ) -> tuple[list[Example], list[Example]]:
    test = set(test_families)
    unknown = test - {ex.family for ex in examples}
    if unknown:
        raise ValueError(f"unknown families: {sorted(unknown)}")
    return ([ex for ex in examples if ex.family not in test],
            [ex for ex in examples if ex.family in test])
