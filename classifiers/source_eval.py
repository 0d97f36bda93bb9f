"""How the reason model reads real texts from sources it was not trained on.

The question that matters in production is how the model names the cause in a drain
reason, health-check message or logbook sentence written by a tool or a team it has
never seen. The real texts (``fixtures/text/real/<group>.csv``) are grouped by source:
one group per tool or logbook (NHC, Azure HPC health checks, DCGM, sichek, the BLOOM
logbook, ...). Rows of one group share their phrasing, so a row split would leak it.

Protocol (:func:`leave_one_source_out`): for each source group, fit on every *other* real
group plus the ``extra`` examples (the shipped model's hand-written templates), predict the
held-out group; pool the predictions over all groups and score them per class. Every real
row is scored exactly once, by a model that never saw its source.

``python -m faultline.classifiers.source_eval`` prints the reports (and the older
family-split reports of :mod:`faultline.classifiers.training`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faultline.classifiers import training


@dataclass
class SourceReport:
    """Pooled scores over every held-out real row, and the accuracy per held-out group."""

    pooled: training.Report
    per_group: dict[str, tuple[int, float]]  # group -> (rows, accuracy)
    per_task: dict[str, tuple[int, float]]  # reason/comment/healthcheck/logbook -> same

    def table(self, title: str = "") -> str:
        lines = [self.pooled.table(title)]
        for what, scores in (("held-out source group", self.per_group),
                             ("task", self.per_task)):
            lines.append(f"{what:28s} {'n':>4s} {'acc':>6s}")
            lines += [f"{key:28s} {n:4d} {acc:6.3f}" for key, (n, acc) in scores.items()]
        return "\n".join(lines)


def leave_one_source_out(real: Sequence[training.Example],
                         extra: Sequence[training.Example] = (),
                         kind: str = "tfidf-lr", task: str = "reason") -> SourceReport:
    """Fit on all real groups but one (plus ``extra``), predict that one; pool.

    Temperature scaling is skipped for ``tfidf-lr`` (it cannot change a label).
    """
    groups = sorted({ex.family for ex in real})
    if len(groups) < 2:
        raise ValueError("leave-one-source-out needs at least two source groups")
    y_true: list[str] = []
    y_pred: list[str] = []
    kinds: list[str] = []
    per_group: dict[str, tuple[int, float]] = {}
    for group in groups:
        train = [ex for ex in real if ex.family != group] + list(extra)
        test = [ex for ex in real if ex.family == group]
        model = training.fit_model(kind, train, task, calibrate=kind == "ensemble")
        proba = model.predict_proba([ex.text for ex in test])
        pred = [model.classes[i] for i in proba.argmax(axis=1)]
        right = sum(p == ex.label for p, ex in zip(pred, test, strict=True))
        per_group[group.removeprefix(training.REAL_FAMILY_PREFIX)] = (len(test),
                                                                      right / len(test))
        y_true += [ex.label for ex in test]
        y_pred += pred
        kinds += [ex.kind for ex in test]
    per_task = {}
    for kind in sorted(set(kinds)):
        hits = [t == p for t, p, k in zip(y_true, y_pred, kinds, strict=True) if k == kind]
        per_task[kind] = (len(hits), sum(hits) / len(hits))
    return SourceReport(training.report(y_true, y_pred), per_group, per_task)


def unseen_real_report(train: Sequence[training.Example], kind: str = "tfidf-lr",
                       task: str = "reason",
                       real: Sequence[training.Example] | None = None) -> training.Report:
    """One model fitted on ``train`` (no real text in it), scored on every real text
    (``real``, default the real reason texts): the baseline of a model that learned only
    the hand-written wording."""
    real = training.real_examples() if real is None else real
    model = training.fit_model(kind, train, task, calibrate=False)
    proba = model.predict_proba([ex.text for ex in real])
    return training.report([ex.label for ex in real],
                           [model.classes[i] for i in proba.argmax(axis=1)])


def main() -> None:  # pragma: no cover - a report, exercised by hand
    real = training.real_examples()
    hand = training.reason_examples()
    print(unseen_real_report(hand).table("== hand-written templates only, on all real texts"))
    print(leave_one_source_out(real).table("== real only, leave-one-source-out"))
    print(leave_one_source_out(real, hand).table(
        "== shipped (real + hand-written), leave-one-source-out"))
    real_tb = training.real_traceback_examples()
    hand_tb = training.traceback_examples()
    print(unseen_real_report(hand_tb, task="traceback", real=real_tb).table(
        "== tracebacks: hand-written only, on all real tracebacks"))
    print(leave_one_source_out(real_tb, hand_tb, task="traceback").table(
        "== tracebacks: shipped (real + hand-written), leave-one-source-out"))
    training.main()


if __name__ == "__main__":  # pragma: no cover
    main()
