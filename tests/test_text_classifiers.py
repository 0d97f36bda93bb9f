"""Free-text classifiers: family-split evaluation, API contract, determinism, speed.

Scores are printed (``pytest -s``) and repeated in assertion messages. Floors sit a few
points under the measured values (training is deterministic, so the margin is for
template edits, not noise) and well above what a broken feature set or a label mix-up
would score; see each test for the measured value.

Measured (tfidf-lr is the shipped model, see faultline.classifiers.text)::

                                    tfidf-lr   spacy    floors (tfidf / spacy)
    reason holdout accuracy           0.937     0.850    0.90 / 0.80
    reason holdout macro-F1           0.940     0.856    0.90 / 0.80
    reason LOFO pooled accuracy       0.931     0.823    0.90 / 0.78
    traceback holdout macro-F1        0.793     0.793    0.75 / 0.70
    traceback LOFO pooled accuracy    0.850     0.714    0.80 / 0.65

On the real texts (fixtures/text/real, 326 rows, 17 source groups), shipped reason model
(real + hand-written) with each source group held out in turn: accuracy .712 (floor .66),
macro-F1 .633 (floor .58); the hand-written templates alone score .663 / .600 there.
Real tracebacks (fixtures/text/real_tracebacks.toml, 37, 4 groups): shipped .973 (floor
.90), hand-written only .865.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from agreement import assert_models_agree

from faultline.classifiers import source_eval, text, training
from faultline.fixtures import textdata
from faultline.schemas.taxonomy import PLANNED, load_taxonomy

REASON_LABELS = {c.component for c in load_taxonomy().table5} | {PLANNED}
TRACEBACK_LABELS = {"Software Bug", "Dependency"}


@pytest.fixture(scope="module")
def reasons() -> list[training.Example]:
    return training.reason_examples()


@pytest.fixture(scope="module")
def tracebacks() -> list[training.Example]:
    return training.traceback_examples()


def _show(title: str, body: str) -> str:
    msg = f"\n{title}\n{body}"
    print(msg)
    return msg


# --------------------------------------------------------------------------- data


def test_training_data_covers_every_label_and_is_deterministic(reasons, tracebacks):
    assert {ex.label for ex in reasons} == REASON_LABELS
    assert {ex.label for ex in tracebacks} == TRACEBACK_LABELS
    assert len(REASON_LABELS) == 19
    assert training.reason_examples() == reasons  # same seed, same texts
    assert training.traceback_examples() == tracebacks
    # every placeholder is filled; several realizations per template
    assert not [ex.text for ex in reasons + tracebacks if re.search(r"\{[a-z]+\}", ex.text)]
    assert len(reasons) > 4 * 724
    assert len({ex.family for ex in reasons}) == 12
    assert len({ex.family for ex in tracebacks}) == 15


def test_filled_xid_fits_the_rows_component(reasons):
    """random_slots(rng, component): an Xid in a filled text is one the label allows."""
    from faultline.fixtures.textdata import XIDS_BY_COMPONENT

    generic = [ex for ex in reasons if ex.text.startswith("NHC: check_gpu_xid:  GPU ")
               and "detected in kernel log" in ex.text]
    assert generic
    for ex in generic:
        xid = int(re.search(r"Xid (\d+)", ex.text).group(1))
        assert xid in XIDS_BY_COMPONENT[ex.label], ex


@pytest.mark.parametrize(("make", "holdout"), [
    (training.reason_examples, training.REASON_HOLDOUT),
    (training.traceback_examples, training.TRACEBACK_HOLDOUT),
])
def test_fixed_holdout_is_split_by_family(make, holdout):
    data = make()
    train, test = training.split_by_family(data, holdout)
    assert {ex.family for ex in test} == set(holdout)
    assert not {ex.family for ex in train} & set(holdout)
    assert {ex.label for ex in train} == {ex.label for ex in data}  # all labels in training
    with pytest.raises(ValueError, match="unknown families"):
        training.split_by_family(data, ["no-such-family"])


# --------------------------------------------------------------------------- held-out scores


def _holdout(kind: str, task: str, data, holdout) -> training.Report:
    train, test = training.split_by_family(data, holdout)
    return training.evaluate(kind, task, train, test)


@pytest.mark.parametrize(("kind", "acc_floor", "f1_floor", "class_f1_floor"), [
    # measured: acc .937, macro-F1 .940, weakest class Software Bug F1 .82 (P .97 R .71)
    ("tfidf-lr", 0.90, 0.90, 0.70),
    # measured: acc .850, macro-F1 .856, weakest Dependency F1 .67, Software Bug .69
    ("spacy-textcat", 0.80, 0.80, 0.60),
])
def test_reason_holdout_families(reasons, kind, acc_floor, f1_floor, class_f1_floor):
    rep = _holdout(kind, "reason", reasons, training.REASON_HOLDOUT)
    msg = _show(f"reason / {kind}: held-out families {training.REASON_HOLDOUT}",
                rep.table())
    assert set(rep.labels) == REASON_LABELS, msg  # the holdout has all 19 labels
    assert rep.accuracy >= acc_floor, msg
    assert rep.macro_f1 >= f1_floor, msg
    worst = min(rep.f1, key=rep.f1.get)
    assert rep.f1[worst] >= class_f1_floor, f"{worst}{msg}"


@pytest.mark.parametrize(("kind", "f1_floor", "recall_floor"), [
    # measured: acc .806, macro-F1 .793; Software Bug R .59 (nccl-usage is read as a
    # Dependency: its c10d frames look like the rendezvous-store family), Dependency R 1.0
    ("tfidf-lr", 0.75, 0.50),
    ("spacy-textcat", 0.70, 0.45),  # measured: the same .806 / .793
])
def test_traceback_holdout_families(tracebacks, kind, f1_floor, recall_floor):
    rep = _holdout(kind, "traceback", tracebacks, training.TRACEBACK_HOLDOUT)
    msg = _show(f"traceback / {kind}: held-out families {training.TRACEBACK_HOLDOUT}",
                rep.table())
    assert set(rep.labels) == TRACEBACK_LABELS, msg
    assert rep.macro_f1 >= f1_floor, msg
    assert min(rep.recall.values()) >= recall_floor, msg


def test_tfidf_is_at_least_as_good_as_spacy_on_the_holdout(reasons):
    """The choice in faultline.classifiers.text, checked on the fixed holdout."""
    tfidf = _holdout("tfidf-lr", "reason", reasons, training.REASON_HOLDOUT)
    spacy_ = _holdout("spacy-textcat", "reason", reasons, training.REASON_HOLDOUT)
    assert tfidf.macro_f1 >= spacy_.macro_f1, (tfidf.macro_f1, spacy_.macro_f1)


# --------------------------------------------------------------------------- leave one family out


# Leave-one-family-out reports, computed once per task and set of kinds in this module:
# the spaCy test compares against the tfidf reports the tfidf test checks, and its
# spaCy and ensemble kinds share each fold's textcat (training.leave_one_family_out_kinds).
_LOFO: dict[tuple[str, tuple[str, ...]], dict[str, dict[str, training.Report]]] = {}


def _lofo_reports(kinds: tuple[str, ...], task: str, data) -> dict[str, dict[str, training.Report]]:
    key = (task, kinds)
    if key not in _LOFO:
        _LOFO[key] = training.leave_one_family_out_kinds(kinds, task, data)
    return _LOFO[key]


def _lofo(kind: str, task: str, data, reps: dict[str, training.Report] | None = None
          ) -> tuple[dict[str, training.Report], str]:
    if reps is None:
        reps = _lofo_reports((kind,), task, data)[kind]
    msg = _show(f"{task} / {kind}: leave-one-family-out", training.lofo_summary(reps))
    for fam, rep in reps.items():
        print(rep.table(f"-- held out: {fam}"))
    return reps, msg


def test_traceback_leave_one_family_out(tracebacks):
    # measured .850 pooled; the families that cannot be inferred from the others are
    # nccl-usage (.30), user-keyerror (.46), shape-mismatch (.62)
    reps, msg = _lofo("tfidf-lr", "traceback", tracebacks)
    assert len(reps) == 15, msg
    assert training.pooled_accuracy(reps) >= 0.80, msg
    assert sum(r.accuracy >= 0.75 for r in reps.values()) >= 11, msg  # measured 12 of 15


@pytest.mark.slow
def test_reason_leave_one_family_out(reasons):
    # measured .931 pooled, mean per-family macro-F1 .917; weakest netops .68 (its UFM
    # and optics vocabulary exists nowhere else)
    reps, msg = _lofo("tfidf-lr", "reason", reasons)
    assert len(reps) == 12, msg
    assert training.pooled_accuracy(reps) >= 0.90, msg
    assert np.mean([r.macro_f1 for r in reps.values()]) >= 0.88, msg
    assert min(r.accuracy for r in reps.values()) >= 0.60, msg


@pytest.mark.slow
@pytest.mark.parametrize(("task", "floor"), [("reason", 0.78), ("traceback", 0.65)])
def test_spacy_leave_one_family_out_and_the_choice(reasons, tracebacks, task, floor):
    """spaCy alone and the ensemble both score below tfidf-lr under LOFO (the choice)."""
    data = reasons if task == "reason" else tracebacks
    tfidf = training.pooled_accuracy(_lofo_reports(("tfidf-lr",), task, data)["tfidf-lr"])
    both = _lofo_reports(("spacy-textcat", "ensemble"), task, data)
    reps, msg = _lofo("spacy-textcat", task, data, both["spacy-textcat"])
    spacy_ = training.pooled_accuracy(reps)
    ens_reps, ens_msg = _lofo("ensemble", task, data, both["ensemble"])
    ensemble = training.pooled_accuracy(ens_reps)
    msg += ens_msg + f"\npooled accuracy tfidf {tfidf:.3f} spacy {spacy_:.3f} ensemble " \
                     f"{ensemble:.3f}"
    print(msg.splitlines()[-1])
    assert spacy_ >= floor, msg
    assert tfidf >= spacy_, msg
    assert tfidf >= ensemble, msg


def test_one_fit_per_member_gives_each_kinds_own_scores(tracebacks):
    """evaluate_kinds shares the textcat between spacy-textcat and the ensemble: the
    scores equal those of each kind fitted on its own."""
    train, test = training.split_by_family(tracebacks, training.TRACEBACK_HOLDOUT[:1])
    together = training.evaluate_kinds(training.MODEL_KINDS, "traceback", train, test)
    for kind in training.MODEL_KINDS:
        assert together[kind] == training.evaluate(kind, "traceback", train, test), kind
    with pytest.raises(ValueError, match="unknown model kind"):
        training.evaluate_kinds(("tfidf",), "traceback", train, test)


# --------------------------------------------------------------------------- real texts


def test_real_texts_are_many_sourced_and_labeled():
    """>= 300 quoted texts from >= 12 source groups, every row with a URL and a license
    note, every task present, no text twice (a duplicate would sit on both sides of a
    source split)."""
    rows = textdata.real_texts()
    assert len(rows) >= 300, len(rows)
    assert len({r.group for r in rows}) >= 12
    assert len({r.source for r in rows}) >= 40
    assert {r.task for r in rows} == set(textdata.REAL_TASKS)
    assert len({r.text for r in rows}) == len(rows)
    assert {r.label for r in rows} <= REASON_LABELS
    assert len({r.label for r in rows}) == 19  # every label seen at least once
    assert all(r.source.startswith("https://") and r.license for r in rows)


@pytest.mark.parametrize(("row", "error"), [
    ("gpu dead,Faulty GPUs,reason,https://x.org/a,MIT", "not a Table 5"),
    ("gpu dead,Faulty GPU,chat,https://x.org/a,MIT", "task"),
    ("gpu dead,Faulty GPU,reason,,MIT", "source URL"),
    (",Faulty GPU,reason,https://x.org/a,MIT", "empty"),
])
def test_a_bad_real_row_is_refused(tmp_path, row, error):
    path = tmp_path / "bad.csv"
    path.write_text("text,label,task,source,license\n" + row + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=error):
        textdata.read_real(path, frozenset(REASON_LABELS))


@pytest.fixture(scope="module")
def unseen_sources() -> source_eval.SourceReport:
    return source_eval.leave_one_source_out(training.real_examples(),
                                            training.reason_examples())


def test_shipped_reason_model_on_real_sources_it_never_saw(unseen_sources):
    """Per-class precision and recall of the shipped reason model (real + hand-written
    texts) on real source groups held out one at a time.

    Measured: accuracy .712, macro-F1 .633 over 326 rows / 17 groups. Strong on the GPU
    classes (Faulty GPU R .91, HBM3 P/R .88/.86, SRAM .88, GSP 1.0); weak where few real
    rows exist (NCCL Watchdog 4 rows R .25, Server Chassis 4 rows R 0) and on Planned
    Maintenance (R .25: GCP's maintenance enums read like failures).
    """
    rep = unseen_sources.pooled
    msg = _show("reason / tfidf-lr: real texts, leave-one-source-group-out",
                unseen_sources.table())
    assert rep.n == len(textdata.real_texts()), msg  # every real row scored once
    assert rep.accuracy >= 0.66, msg
    assert rep.macro_f1 >= 0.58, msg
    for label in ("Faulty GPU", "GPU HBM3 Memory"):
        assert rep.precision[label] >= 0.6 and rep.recall[label] >= 0.8, (label, msg)
    assert rep.recall["Software Bug"] >= 0.6, msg


def test_real_texts_help_on_unseen_sources(unseen_sources):
    """The model that learned only the hand-written (simulator's) wording, scored on all
    real texts, names fewer causes right than the shipped one does on sources it never
    saw. Measured .663 vs .712 accuracy."""
    baseline = source_eval.unseen_real_report(training.reason_examples())
    msg = _show("reason / tfidf-lr: hand-written templates only, on all real texts",
                baseline.table())
    assert unseen_sources.pooled.accuracy >= baseline.accuracy + 0.03, msg
    # the logbook sentences of public training runs (BLOOM, OPT-175B): measured .500 for
    # the templates alone, .605 for the shipped model on runs it never saw
    logbook = [ex for ex in training.real_examples() if ex.kind == "logbook"]
    old = source_eval.unseen_real_report(training.reason_examples(), real=logbook)
    n, new = unseen_sources.per_task["logbook"]
    assert n == len(logbook) >= 30
    assert new >= old.accuracy + 0.05, (new, old.accuracy, msg)


def test_traceback_model_on_real_issue_threads_it_never_saw():
    """37 real tracebacks from public issue threads, 4 source groups held out in turn.
    Measured: shipped (real + hand-written) .973 accuracy (Dependency R 1.0, Software Bug
    R .93); hand-written tracebacks alone .865 on the same texts."""
    real = training.real_traceback_examples()
    hand = training.traceback_examples()
    assert len(real) >= 35 and {ex.label for ex in real} == TRACEBACK_LABELS
    assert len({ex.family for ex in real}) >= 4
    shipped = source_eval.leave_one_source_out(real, hand, task="traceback")
    baseline = source_eval.unseen_real_report(hand, task="traceback", real=real)
    msg = _show("traceback / tfidf-lr: real tracebacks, leave-one-source-group-out",
                shipped.table()) + _show("hand-written tracebacks only, on all real",
                                         baseline.table())
    assert shipped.pooled.n == len(real), msg
    assert shipped.pooled.accuracy >= 0.90, msg
    assert min(shipped.pooled.recall.values()) >= 0.85, msg
    assert shipped.pooled.accuracy > baseline.accuracy, msg


def test_no_classifier_or_pipeline_module_imports_the_simulator():
    """Only faultline/simulate and the CLI command that runs it may import it."""
    import ast
    from pathlib import Path

    root = Path(training.__file__).resolve().parents[1]
    offenders = []
    for folder in ("classifiers", "pipeline", "schemas", "fixtures", "faultline"):
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(("faultline/simulate/", ".venv")) or rel == "faultline/cli.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [(rel, n) for n in names if n.startswith("faultline.simulate")]
    assert not offenders, offenders


# --------------------------------------------------------------------------- API


def test_api_contract_and_load_time():
    t0 = time.perf_counter()
    times = text.warm_up()
    print(f"\ntraining at first use: {times} (warm_up {time.perf_counter() - t0:.2f}s)")
    preds = text.classify_reasons(["xid 79 gpu3 fell off bus", "psu"])
    assert [p.label for p in preds] == ["Faulty GPU", "Power Supply"]
    tb = text.classify_tracebacks(
        ["Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
         "RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert tb[0].label == "Software Bug"
    for p in preds + tb:
        assert isinstance(p, text.Prediction)
        assert isinstance(p.confidence, float)
        assert 0.0 <= p.confidence <= 1.0
    assert re.fullmatch(r"text\.reason\.tfidf-lr@[0-9a-f]{12}", preds[0].model)
    assert re.fullmatch(r"text\.traceback\.tfidf-lr@[0-9a-f]{12}", tb[0].model)
    assert text.load("reason") is text.load("reason")  # trained once per process
    assert set(text.load("reason").classes) == REASON_LABELS
    assert text.classify_reasons([]) == []
    with pytest.raises(TypeError):
        text.classify_reasons("one string")
    with pytest.raises(ValueError, match="unknown model kind"):
        text.load("reason", "bert")
    # "a few seconds at most" (measured ~2.3 s and ~0.5 s on two cores)
    assert times["reason"] < 15 and times["traceback"] < 5, times


@pytest.mark.parametrize(("sample", "label"), [
    # written for this test, not from the templates
    ("GPU 6 dropped off the PCIe bus (Xid 79) twice this week, RMA opened", "Faulty GPU"),
    ("node lost power feed B, PSU2 AC lost in SEL", "Power Supply"),
    ("row remap pending on gpu 2 after double bit ecc error", "GPU HBM3 Memory"),
    ("scheduled BIOS + firmware upgrade, planned window", "Planned Maintenance"),
    ("nvme1n1 media errors, replace local SSD", "SSD"),
    ("IB cable to leaf switch flapping, symbol errors on port", "Network Switch/Cable"),
])
def test_obvious_new_reasons(sample, label):
    got = text.classify_reasons([sample])[0]
    assert got.label == label, got
    assert got.confidence > 0.5, got


def test_determinism_same_predictions_twice(reasons, tracebacks):
    sample = [ex.text for ex in reasons[::7]]
    first = text.classify_reasons(sample)
    assert text.classify_reasons(sample) == first  # cached model, same batch
    assert [text.classify_reasons([s])[0] for s in sample[:20]] == first[:20]  # batch-free
    fresh = text.train("reason")  # a training in this process...
    assert fresh.model_id == text.load("reason").model_id
    # ...gives what a second one does, to the bit, and what the shipped weights do, as
    # closely as a fit on another processor can (tests/agreement.py)
    np.testing.assert_array_equal(fresh.predict_proba(sample),
                                  text.train("reason").predict_proba(sample))
    assert_models_agree(fresh.predict_proba(sample), text.load("reason").predict_proba(sample))
    tb = [ex.text for ex in tracebacks]
    assert_models_agree(text.train("traceback").predict_proba(tb),
                        text.load("traceback").predict_proba(tb))


def test_spacy_training_is_reproducible(reasons):
    subset = reasons[::5]
    a = training.fit_textcat(subset, "reason")
    b = training.fit_textcat(subset, "reason")
    assert a.nlp.get_pipe("textcat").model.to_bytes() == \
        b.nlp.get_pipe("textcat").model.to_bytes()
    sample = [ex.text for ex in reasons[1::50]]
    np.testing.assert_array_equal(a.predict_proba(sample), b.predict_proba(sample))


GARBAGE = ["", "   ", "\n\t", "!!!!????", "asdf qwer zxcv", "lorem ipsum dolor sit amet",
           "ñØ€𝄞 ☃", "0", "1234567", "x" * 100_000, None]


@pytest.mark.parametrize("classify", [text.classify_reasons, text.classify_tracebacks])
def test_empty_and_garbage_get_low_confidence(classify):
    preds = classify(GARBAGE)
    assert len(preds) == len(GARBAGE)
    for g, p in zip(GARBAGE, preds, strict=True):
        assert p.confidence <= 0.05, (repr(g)[:40], p)
    # English with no cluster words: not certain either
    prose = classify(["the quick brown fox jumps over the lazy dog"])[0]
    assert prose.confidence < 0.5, prose


def test_traceback_without_exception_line_is_discounted():
    frames = '  File "/opt/conda/lib/python3.11/site-packages/botocore/endpoint.py", ' \
             'line 377, in _send'
    p = text.classify_tracebacks([frames])[0]
    assert p.confidence <= 0.5, p
    assert text.looks_like_traceback("socket.gaierror: [Errno -2] Name or service not known")
    assert text.looks_like_traceback("[rank3]: RuntimeError: NCCL error")
    assert not text.looks_like_traceback("update_node: node node0042 reason set to: psu")


def test_rank_prefixes_do_not_change_the_answer(tracebacks):
    tb = next(ex.text for ex in tracebacks if ex.family == "dataloader-s3")
    prefixed = "\n".join(f"[rank12]: {ln}" for ln in tb.splitlines())
    a, b = text.classify_tracebacks([tb, prefixed])
    assert a == b


def test_ensemble_and_spacy_kinds_are_usable():
    for kind in ("spacy-textcat", "ensemble"):
        p = text.classify_tracebacks(["botocore.exceptions.ReadTimeoutError: Read timeout on "
                                      "endpoint URL"], kind=kind)[0]
        assert p.label == "Dependency", p
        assert p.model.startswith(f"text.traceback.{kind}@"), p


def test_thousand_texts_well_under_a_second(reasons, tracebacks):
    text.warm_up()
    batch = [ex.text for ex in reasons[:1000]]
    t0 = time.perf_counter()
    text.classify_reasons(batch)
    reason_s = time.perf_counter() - t0
    tbs = [ex.text for ex in tracebacks if ex.kind == "traceback"]
    tbs = (tbs * (1000 // len(tbs) + 1))[:1000]
    t0 = time.perf_counter()
    text.classify_tracebacks(tbs)
    tb_s = time.perf_counter() - t0
    print(f"\n1000 reasons {reason_s:.3f}s, 1000 full tracebacks {tb_s:.3f}s")
    # measured ~0.1 s and ~0.5 s; bounds leave room for a loaded CI runner
    assert reason_s < 1.0
    assert tb_s < 2.5
