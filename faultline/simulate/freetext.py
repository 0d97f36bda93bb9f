"""Labeled free text for the simulator: the hand-written templates in ``fixtures/text``.

The templates, their loader and the placeholder filling live in
:mod:`faultline.fixtures.textdata`, which the text classifiers read too; the simulator
imports them from there (the classifiers never import the simulator). Only the
simulator's own choice of a template is defined here.
"""

from __future__ import annotations

import random

from faultline.fixtures.textdata import (  # noqa: F401  (re-exported for the simulator)
    PLACEHOLDERS,
    XIDS_BY_COMPONENT,
    Template,
    fill,
    random_slots,
    templates,
)


def choose(rng: random.Random, kind: str, label: str) -> Template | None:
    pool = [t for t in templates() if t.kind == kind and t.label == label]
    return rng.choice(pool) if pool else None
