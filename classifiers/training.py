"""Training data, model fitting and family-split evaluation for the free-text classifiers.

Data
----
The examples (real texts and filled hand-written templates), their families and the
splits are built in :mod:`faultline.classifiers.textsets` (re-exported here).

Models
------
Two model kinds are fitted on the same examples (after :func:`prepare`: per-line rank
prefixes and caret lines dropped, PCI addresses, serials, ticket ids, dates and versions
replaced by class words):

- ``tfidf-lr``: TF-IDF features into a multinomial
  :class:`~sklearn.linear_model.LogisticRegression` (``C=10``, newton-cg), then
  temperature scaling (:class:`~sklearn.calibration.CalibratedClassifierCV`,
  ``method="temperature"``) fitted on predictions for *unseen families*: the
  calibration folds never split a family. Temperature scaling never changes the argmax;
  it makes the probability mean "how often this is right on a wording style the model
  has not seen", which is the production situation. Features: for reasons, word 1-2-grams
  plus character 2-5-grams (typos and abbreviations share character n-grams with the
  right word); for tracebacks, words of the whole text (which libraries are on the stack)
  plus words and characters of the exception lines only (:func:`exception_lines`).
- ``spacy-textcat``: ``spacy.blank("en")`` with an exclusive-class ``textcat``
  (``spacy.TextCatBOW.v3``, unigrams, 2**15 hash buckets) on lowercased text, trained for
  :data:`TEXTCAT_EPOCHS` epochs with Adam, a fixed seed and a seeded shuffle, so two
  trainings give the same weights.
- ``ensemble``: the mean of the two probability vectors.

:mod:`faultline.classifiers.text` says which one is used and why.

``python -m faultline.classifiers.training`` prints the held-out and
leave-one-family-out reports.
"""

from __future__ import annotations

import hashlib
import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from faultline.classifiers.textsets import (  # noqa: F401  (re-exported: the public API)
    REAL_FAMILY_PREFIX,
    REALIZATIONS,
    REASON_HOLDOUT,
    REASON_KINDS,
    SEED,
    TRACEBACK_HOLDOUT,
    TRACEBACK_REALIZATIONS,
    TRACEBACK_TAIL_LINES,
    Example,
    real_examples,
    real_traceback_examples,
    reason_examples,
    shipped_examples,
    split_by_family,
    traceback_examples,
)


def data_hash(examples: Iterable[Example], *extra: object) -> str:
    """A short, stable digest of the training texts and labels (plus settings)."""
    h = hashlib.sha256()
    for part in extra:
        h.update(repr(part).encode())
        h.update(b"\x00")
    for ex in examples:
        h.update(ex.label.encode())
        h.update(b"\x1f")
        h.update(ex.text.encode())
        h.update(b"\x1e")
    return h.hexdigest()[:12]


_WORD_TOKENS = r"(?u)\b\w[\w-]*\b"  # words, keeping hyphenated names (fell-off, leaf-r12)
_EVIDENCE_WORD = re.compile(r"[a-z][a-z0-9_-]+")


# Function words are not evidence: the logbook sentences in the real texts put "the",
# "was", "over" into the vocabulary, and plain English prose would then look readable.
_NOT_EVIDENCE = frozenset(("a", "an", "and", "are", "as", "at", "be", "been", "but", "by",
                           "did", "do", "does", "for", "from", "had", "has", "have", "he",
                           "her", "his", "i", "if", "in", "into", "is", "it", "its", "me",
                           "my", "of", "on", "or", "our", "over", "she", "so", "than",
                           "that", "the", "their", "them", "then", "there", "these",
                           "they", "this", "those", "to", "too", "under", "up", "us", "was",
                           "we", "were", "what", "when", "where", "which", "while", "who",
                           "why", "will", "with", "would", "you", "your"))
EVIDENCE_RULE = "words-minus-function-words-v1"  # part of the model id (model_settings)


def evidence_words(text: str, prepared: bool = False) -> set[str]:
    """Lowercase words (a letter first, two characters or more) of the prepared text,
    function words left out."""
    words = _EVIDENCE_WORD.findall((text if prepared else prepare(text)).lower())
    return set(words) - _NOT_EVIDENCE


def evidence_vocabulary(examples: Iterable[Example], min_count: int = 2) -> frozenset[str]:
    """Words found in at least ``min_count`` training texts: a text sharing none of them
    gives a model nothing it has learned from."""
    df: Counter[str] = Counter()
    for ex in examples:
        df.update(evidence_words(ex.text))
    return frozenset(w for w, n in df.items() if n >= min_count)


# --------------------------------------------------------------------------- text prep

# High-cardinality values that carry no label: replaced by a class word so that a new
# ticket number or board serial does not look like an unknown word. Xid codes, GPU
# indexes and part names (DIMM, PSU, FAN, nvme) are kept: they are evidence.
_MASK_PARTS = (
    ("pciaddr",
     r"\b(?:[Pp][Cc][Ii]:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b"),
    ("boardserial", r"\b1[0-9]{12}\b"),
    ("ticketid", r"\b[A-Z]{2,6}-[0-9]{3,}\b"),
    ("isodate", r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?)?\b"),
    ("versionno", r"\b[0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?\b"),
)
# One scan for all of them (prepare() runs on every text, tracebacks are long).
_MASKS = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _MASK_PARTS))


def _mask(m: re.Match[str]) -> str:
    return f" {m.lastgroup} "


_CARETS = re.compile(r"(?m)^[ \t]*[\^~]+[ \t]*$\n?")
# torchrun / srun --label prefixes on every line: "[rank3]: ", "[default0]:", "12: ".
_LINE_PREFIX = re.compile(r"(?m)^(?:\[(?:rank|default)\d+\]:|\d{1,5}: )[ ]?")
_NOT_EXCEPTION = ("Traceback (most recent call last)", "The above exception",
                  "During handling of the above")


def prepare(text: str) -> str:
    """The text both models see: per-line rank prefixes removed, caret lines dropped,
    entity values masked."""
    text = _CARETS.sub("", _LINE_PREFIX.sub("", text))
    return _MASKS.sub(_mask, text)


def exception_lines(text: str) -> str:
    """The ``ExcType: message`` lines of a traceback (every chained section's).

    Frames and source lines are indented; headers are dropped. What is left is what the
    exception says, the part that generalizes across code paths. A text that is not a
    traceback comes back whole.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines
            if not ln[:1].isspace() and not ln.startswith(_NOT_EXCEPTION)]
    return "\n".join(keep) if keep else text


# --------------------------------------------------------------------------- models


class ProbaModel(ABC):
    """``classes`` and ``predict_proba(texts) -> (n, len(classes))`` probabilities."""

    classes: list[str]

    @abstractmethod
    def predict_prepared(self, prepared: Sequence[str]) -> np.ndarray:
        """Probabilities for texts already passed through :func:`prepare`."""

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.predict_prepared([prepare(t) for t in texts])


def _identity(texts):
    return texts


def _exception_view(texts):
    return [exception_lines(t) for t in texts]


class TfidfModel(ProbaModel):
    """TF-IDF word + char n-grams -> logistic regression (-> temperature scaling)."""

    def __init__(self, estimator) -> None:
        self.estimator = estimator
        self.classes = [str(c) for c in estimator.classes_]

    def predict_prepared(self, prepared: Sequence[str]) -> np.ndarray:
        if not prepared:
            return np.zeros((0, len(self.classes)))
        return self.estimator.predict_proba(list(prepared))


def _tfidf_features(task: str):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline, make_union
    from sklearn.preprocessing import FunctionTransformer

    def words():
        return TfidfVectorizer(lowercase=True, ngram_range=(1, 2), sublinear_tf=True,
                               min_df=2, token_pattern=_WORD_TOKENS,
                               dtype=np.float32)

    def chars():
        return TfidfVectorizer(lowercase=True, analyzer="char_wb", ngram_range=(2, 5),
                               sublinear_tf=True, min_df=2, dtype=np.float32)

    if task == "reason":  # one line of text: words and their spelling variants
        return make_union(words(), chars())
    # Tracebacks: the frames' words (which libraries were on the stack) plus words and
    # characters of the exception lines alone. Character n-grams over whole tracebacks
    # mostly learn file paths; on the exception lines they learn the error wording.
    # Leave-one-family-out accuracy was 0.78 with the reason features on whole
    # tracebacks and 0.85 with these.
    return make_union(make_pipeline(FunctionTransformer(_identity), words()),
                      make_pipeline(FunctionTransformer(_exception_view), words()),
                      make_pipeline(FunctionTransformer(_exception_view), chars()))


def _family_folds(families: Sequence[str], n_splits: int
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds that never split a family, dealt round-robin by family size (deterministic)."""
    sizes = Counter(families)
    order = sorted(sizes, key=lambda f: (-sizes[f], f))
    fold_of = {f: i % n_splits for i, f in enumerate(order)}
    idx = np.arange(len(families))
    fam_fold = np.array([fold_of[f] for f in families])
    return [(idx[fam_fold != k], idx[fam_fold == k]) for k in range(n_splits)]


TFIDF_C = 10.0
CALIBRATION_FOLDS = 3


def fit_tfidf(examples: Sequence[Example], task: str, calibrate: bool = True) -> TfidfModel:
    """Fit the scikit-learn model for ``task`` ("reason" or "traceback").

    ``calibrate=False`` skips temperature scaling. Temperature scaling never moves the
    argmax, so evaluation of labels (accuracy, precision, recall) can skip it and be
    three times faster.
    """
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = [prepare(ex.text) for ex in examples]
    labels = [ex.label for ex in examples]
    families = [ex.family for ex in examples]
    base = make_pipeline(_tfidf_features(task),
                         LogisticRegression(C=TFIDF_C, solver="newton-cg", max_iter=200,
                                            tol=1e-3))
    if calibrate and len(set(families)) >= CALIBRATION_FOLDS:
        est = CalibratedClassifierCV(base, method="temperature", ensemble=False,
                                     cv=_family_folds(families, CALIBRATION_FOLDS))
    else:
        est = base
    return TfidfModel(est.fit(texts, labels))


TEXTCAT_LENGTH = 2**15  # hash buckets of the bag-of-words layer
TEXTCAT_EPOCHS = 8
TEXTCAT_BATCH = 128
TEXTCAT_LR = 0.02


def textcat_view(prepared: str, task: str) -> str:
    """What the spaCy model reads: the prepared text lowercased (its BOW features are
    case-sensitive), for tracebacks the exception lines first, then the whole text."""
    text = prepared
    if task == "traceback":
        text = exception_lines(text) + "\n" + text
    return text.lower()


class TextcatModel(ProbaModel):
    """A trained ``spacy.blank("en")`` pipeline with one exclusive ``textcat``."""

    def __init__(self, nlp, task: str) -> None:
        self.nlp = nlp
        self.task = task
        self.classes = list(nlp.get_pipe("textcat").labels)

    def predict_prepared(self, prepared: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(prepared), len(self.classes)))
        docs = self.nlp.pipe((textcat_view(t, self.task) for t in prepared), batch_size=256)
        for i, doc in enumerate(docs):
            out[i] = [doc.cats[c] for c in self.classes]
        return out


def fit_textcat(examples: Sequence[Example], task: str, seed: int = SEED) -> TextcatModel:
    """Train ``spacy.blank("en")`` + exclusive ``textcat`` (``spacy.TextCatBOW.v3``).

    Reproducible: thinc's seed is fixed before the weights are initialized, the batches
    are shuffled with a seeded ``random.Random``, dropout is 0, and the BOW layer's
    sparse CPU kernels have no thread-order effects. The textcat is updated directly
    (not through ``nlp.update``, which copies every Doc per step): nothing else is in
    the pipeline.
    """
    import spacy
    from spacy.training import Example as SpacyExample
    from spacy.util import fix_random_seed, minibatch
    from thinc.api import Adam

    fix_random_seed(seed)
    nlp = spacy.blank("en")
    textcat = nlp.add_pipe("textcat", config={"model": {
        "@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True,
        "ngram_size": 1, "no_output_layer": False, "length": TEXTCAT_LENGTH}})
    labels = sorted({ex.label for ex in examples})
    for lab in labels:
        textcat.add_label(lab)
    train = [SpacyExample.from_dict(nlp.make_doc(textcat_view(prepare(ex.text), task)),
                                    {"cats": {lab: float(lab == ex.label) for lab in labels}})
             for ex in examples]
    nlp.initialize(lambda: train)
    optimizer = Adam(TEXTCAT_LR)
    rng = random.Random(seed)
    order = list(range(len(train)))
    for _ in range(TEXTCAT_EPOCHS):
        rng.shuffle(order)
        for batch in minibatch([train[i] for i in order], size=TEXTCAT_BATCH):
            textcat.update(batch, sgd=optimizer, drop=0.0)
    return TextcatModel(nlp, task)


class Ensemble(ProbaModel):
    """Weighted mean of member probabilities over the union of their classes."""

    def __init__(self, models: Sequence[ProbaModel], weights: Sequence[float] | None = None
                 ) -> None:
        self.models = list(models)
        self.classes = sorted(set().union(*(m.classes for m in models)))
        w = np.asarray(weights if weights is not None else [1.0] * len(models), dtype=float)
        self.weights = w / w.sum()

    def predict_prepared(self, prepared: Sequence[str]) -> np.ndarray:
        total = np.zeros((len(prepared), len(self.classes)))
        for wi, m in zip(self.weights, self.models, strict=True):
            p = m.predict_prepared(prepared)
            for j, c in enumerate(m.classes):
                total[:, self.classes.index(c)] += wi * p[:, j]
        return total


MODEL_KINDS = ("tfidf-lr", "spacy-textcat", "ensemble")


def fit_model(kind: str, examples: Sequence[Example], task: str,
              calibrate: bool = True) -> ProbaModel:
    """Fit one of :data:`MODEL_KINDS` for ``task`` ("reason" or "traceback")."""
    if kind == "tfidf-lr":
        return fit_tfidf(examples, task, calibrate=calibrate)
    if kind == "spacy-textcat":
        return fit_textcat(examples, task)
    if kind == "ensemble":
        return Ensemble([fit_tfidf(examples, task, calibrate=calibrate),
                         fit_textcat(examples, task)])
    raise ValueError(f"unknown model kind {kind!r}; expected one of {MODEL_KINDS}")


def model_settings(kind: str, task: str) -> tuple:
    """Everything besides the data that determines a fitted model (for its id)."""
    tfidf = ("tfidf", TFIDF_C, CALIBRATION_FOLDS)
    textcat = ("textcat", TEXTCAT_LENGTH, TEXTCAT_EPOCHS, TEXTCAT_BATCH, TEXTCAT_LR)
    parts = {"tfidf-lr": (tfidf,), "spacy-textcat": (textcat,),
             "ensemble": (tfidf, textcat)}[kind]
    return (task, kind, SEED, EVIDENCE_RULE, *parts)


# --------------------------------------------------------------------------- evaluation


@dataclass
class Report:
    """Per-class precision/recall/F1 on one evaluation set."""

    labels: list[str]
    precision: dict[str, float]
    recall: dict[str, float]
    f1: dict[str, float]
    support: dict[str, int]
    accuracy: float
    macro_f1: float
    n: int

    def table(self, title: str = "") -> str:
        lines = [title] if title else []
        lines.append(f"{'class':34s} {'prec':>6s} {'recall':>6s} {'f1':>6s} {'n':>5s}")
        for lab in self.labels:
            lines.append(f"{lab:34s} {self.precision[lab]:6.3f} {self.recall[lab]:6.3f} "
                         f"{self.f1[lab]:6.3f} {self.support[lab]:5d}")
        lines.append(f"accuracy {self.accuracy:.3f}  macro-F1 {self.macro_f1:.3f}  n={self.n}")
        return "\n".join(lines)


def report(y_true: Sequence[str], y_pred: Sequence[str]) -> Report:
    """Scores over the labels present in ``y_true`` (a family may lack some labels)."""
    from sklearn.metrics import precision_recall_fscore_support

    labels = sorted(set(y_true))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels,
                                                 zero_division=0)
    acc = float(np.mean([a == b for a, b in zip(y_true, y_pred, strict=True)]))
    return Report(labels, dict(zip(labels, map(float, p), strict=True)),
                  dict(zip(labels, map(float, r), strict=True)),
                  dict(zip(labels, map(float, f), strict=True)),
                  dict(zip(labels, map(int, s), strict=True)),
                  acc, float(np.mean(f)), len(y_true))


def evaluate(kind: str, task: str, train: Sequence[Example], test: Sequence[Example]
             ) -> Report:
    """Fit on ``train`` and score on ``test`` (augmented tails are not scored).

    Temperature scaling is skipped for ``tfidf-lr`` alone (it cannot change a label) but
    kept in the ensemble, where it changes how much each member weighs.
    """
    return evaluate_kinds((kind,), task, train, test)[kind]


def evaluate_kinds(kinds: Sequence[str], task: str, train: Sequence[Example],
                   test: Sequence[Example]) -> dict[str, Report]:
    """:func:`evaluate` for several kinds on one split, each member fitted once: the
    ensemble's textcat is the ``spacy-textcat`` model (the same seed and data give the
    same weights), so asking for both trains spaCy once, not twice."""
    unknown = set(kinds) - set(MODEL_KINDS)
    if unknown:
        raise ValueError(f"unknown model kind(s) {sorted(unknown)}; expected {MODEL_KINDS}")
    textcat = (fit_textcat(train, task)
               if {"spacy-textcat", "ensemble"} & set(kinds) else None)
    models: dict[str, ProbaModel] = {}
    for kind in kinds:
        if kind == "tfidf-lr":
            models[kind] = fit_tfidf(train, task, calibrate=False)
        elif kind == "spacy-textcat":
            assert textcat is not None
            models[kind] = textcat
        else:
            assert textcat is not None
            models[kind] = Ensemble([fit_tfidf(train, task, calibrate=True), textcat])
    test = [ex for ex in test if ex.kind != "traceback_tail"]
    texts, truth = [ex.text for ex in test], [ex.label for ex in test]
    out: dict[str, Report] = {}
    for kind, model in models.items():
        proba = model.predict_proba(texts)
        out[kind] = report(truth, [model.classes[i] for i in proba.argmax(axis=1)])
    return out


def leave_one_family_out(kind: str, task: str, examples: Sequence[Example]
                         ) -> dict[str, Report]:
    """One report per family, trained on every other family."""
    return leave_one_family_out_kinds((kind,), task, examples)[kind]


def leave_one_family_out_kinds(kinds: Sequence[str], task: str,
                               examples: Sequence[Example]
                               ) -> dict[str, dict[str, Report]]:
    """:func:`leave_one_family_out` for several kinds, fitting shared members once per
    fold (:func:`evaluate_kinds`): kind -> family -> report."""
    out: dict[str, dict[str, Report]] = {kind: {} for kind in kinds}
    for fam in sorted({ex.family for ex in examples}):
        train, test = split_by_family(examples, [fam])
        for kind, rep in evaluate_kinds(kinds, task, train, test).items():
            out[kind][fam] = rep
    return out


def pooled_accuracy(reports: dict[str, Report]) -> float:
    n = sum(r.n for r in reports.values())
    return sum(r.accuracy * r.n for r in reports.values()) / n


def lofo_summary(reports: dict[str, Report]) -> str:
    lines = [f"{'held-out family':22s} {'n':>5s} {'acc':>6s} {'macroF1':>8s}"]
    for fam, r in reports.items():
        lines.append(f"{fam:22s} {r.n:5d} {r.accuracy:6.3f} {r.macro_f1:8.3f}")
    lines.append(f"{'pooled':22s} {sum(r.n for r in reports.values()):5d} "
                 f"{pooled_accuracy(reports):6.3f} "
                 f"{np.mean([r.macro_f1 for r in reports.values()]):8.3f} (mean)")
    return "\n".join(lines)


TASKS = {"reason": (reason_examples, REASON_HOLDOUT),
         "traceback": (traceback_examples, TRACEBACK_HOLDOUT)}


def main() -> None:  # pragma: no cover - a report, exercised by hand
    import time

    for task, (make, holdout) in TASKS.items():
        data = make()
        train, test = split_by_family(data, holdout)
        t0 = time.perf_counter()
        for kind, rep in evaluate_kinds(MODEL_KINDS, task, train, test).items():
            print(rep.table(f"== {task} / {kind}: held-out {', '.join(holdout)}"))
        print(f"({time.perf_counter() - t0:.1f}s)")
        for kind, reps in leave_one_family_out_kinds(MODEL_KINDS, task, data).items():
            print(f"== {task} / {kind}: leave-one-family-out")
            print(lofo_summary(reps))


if __name__ == "__main__":  # pragma: no cover
    main()
