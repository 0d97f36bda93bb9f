"""Free-text root-cause classifiers: drain reasons / admin comments, and tracebacks.

Two tasks (data and evaluation in :mod:`faultline.classifiers.training`):

- ``reason``: a Slurm drain/down reason or a job's ``AdminComment`` -> one of the 18
  Table 5 components or ``Planned Maintenance`` (19 labels).
- ``traceback``: a Python traceback -> ``Software Bug`` or ``Dependency``.

API::

    from faultline.classifiers.text import classify_reasons, classify_tracebacks
    classify_reasons(["xid 79 gpu3 fell off bus"])
    # [Prediction(label='Faulty GPU', confidence=1.0, model='text.reason.tfidf-lr@...')]

``Prediction.model`` is ``text.<task>.<kind>@<hash>``, the hash covering the training
texts, labels and model settings, so it can be stored as a ``rule_id``: two runs with the
same id (and the same scikit-learn / spaCy versions) make the same predictions.

Training data
-------------
The reason model trains on 326 real texts quoted from public sources
(``fixtures/text/real``: NHC and Azure HPC health-check messages, DCGM, gpud,
NVSentinel, sichek, OCI and GCP fault reasons, Slurm drain reasons from issue threads,
the BLOOM and OPT-175B logbooks) plus the hand-written templates the simulator also uses
(:func:`faultline.classifiers.training.shipped_examples`). Scored on real *source groups*
it did not see (:mod:`faultline.classifiers.source_eval`, leave-one-source-out over 17
groups, 326 rows)::

                                                      accuracy   macro-F1
    hand-written templates only (the old model)        0.663      0.600
    real texts only                                    0.531      0.284
    real + hand-written (shipped)                      0.712      0.633

    by task (accuracy)        reason  comment  healthcheck  logbook
    templates only             0.605    0.760       0.691    0.500
    shipped, unseen sources    0.674    0.760       0.732    0.605

Real texts alone are too few for the rare classes (NCCL Watchdog Timeouts and Server
Chassis have 4 real rows each, Silent Data Corruption 5); the templates alone miss the
real tools' wording (Host Maintenance recall 0.21 -> 0.58, Software Bug 0.64 -> 0.72). Scores on
simulated corpora are not an independent measure: the simulator writes the same
templates.

The traceback model trains on 37 real tracebacks pasted in public issue threads
(``fixtures/text/real_tracebacks.toml``: CUDA OOM, illegal memory access, state_dict
mismatches; TCPStore/rendezvous timeouts, Hugging Face Hub and dataset download errors,
stale NFS handles, missing modules) plus the hand-written ones. Leave-one-source-out over
its 4 groups: hand-written only 0.865 accuracy (on all 37), real only 0.919, real +
hand-written (shipped) 0.973. 37 rows are few; the figure is a sanity check, not a
precise estimate.

Model choice
------------
Both a scikit-learn model (``tfidf-lr``: TF-IDF word + character n-grams, multinomial
logistic regression, temperature scaling fitted on held-out *families*) and a spaCy
model (``spacy-textcat``: ``spacy.blank("en")`` + exclusive ``textcat``, bag of words)
are trained on the same data, and so is their probability average (``ensemble``). Scored
by wording family of the hand-written templates (``python -m
faultline.classifiers.source_eval`` prints these and the tables above)::

                                       tfidf-lr   spacy-textcat   ensemble
    reason, fixed holdout    accuracy    0.937        0.850         0.938
                             macro-F1    0.940        0.856         0.945
    reason, LOFO             accuracy    0.931        0.823         0.924
    traceback, fixed holdout accuracy    0.806        0.806         0.806
                             macro-F1    0.793        0.793         0.793
    traceback, LOFO          accuracy    0.850        0.714         0.743

(fixed holdout: families nhc, oncall-verbose, sched-admin for reasons and
cuda-illegal-access, nccl-usage, lustre-io, auth-token for tracebacks; LOFO: every
family held out in turn, accuracy pooled over all held-out texts.)

Among the templates, leave-one-family-out is the protocol (fixtures/text/README.md): it
asks how the model reads a writing style it has never seen. ``tfidf-lr`` wins it on both
tasks. The ensemble gains 0.001-0.005 on the reason holdout but loses 0.007 (reasons) and
0.107 (tracebacks) under LOFO: spaCy's bag of words has no sub-word features, so typos,
abbreviations and unseen identifiers (``replce``, ``hbm ue``, key=value bot output) are
lost on it (it scores 0.41 on the held-out remediation-bot family, tfidf-lr 0.85), and
averaging it in drags the character n-gram model down on exactly the families that differ
most. So ``tfidf-lr`` is the default (:data:`DEFAULT_KIND`) for both tasks; it is also
the faster one. The spaCy and ensemble models stay available (``kind=...``) so the
comparison can be re-run, and they are tested.

Storage: shipped weights, no fit at run time
--------------------------------------------
The ``tfidf-lr`` models are fitted once, at build time, by ``python -m
faultline.classifiers.build_weights`` and shipped as plain arrays (vocabulary, idf,
coefficients, intercepts, classes, inverse temperature) in ``classifiers/weights/``,
read with ``np.load(allow_pickle=False)``: no pickle, no scikit-learn at run time
(:mod:`faultline.classifiers.weights`). Loading them takes about 0.03 s (both tasks);
fitting took 3-4 s plus 1 s for importing scikit-learn. The weights record the hash of
the training data they were fitted on; :func:`load` refuses them
(:class:`~faultline.classifiers.weights.WeightsMismatch`) when ``fixtures/text/`` or the
model settings changed since. The examples are regenerated for that check only when an
input they are generated from changed since the build (the weights' seal: "The cheap
check" in :mod:`~faultline.classifiers.weights`); otherwise the recorded hash, model id
and vocabulary stand for them (regenerating took 0.2 s per run).
A rebuild gives the same bytes, and the loaded model's
probabilities equal the fitted model's (``tests/test_text_weights.py``). The spaCy and
ensemble kinds are still trained at first use (they are for comparison only). After
loading, 1000 reasons classify in ~0.15 s.

Confidence
----------
``confidence`` is the probability of the predicted label (temperature-calibrated on
unseen families for ``tfidf-lr``; the raw softmax for ``spacy-textcat``), with two
evidence guards, because a linear model facing text unlike its training data still
spreads its probability somewhere:

- a text with no word (function words aside) that occurs in at least two training texts
  (empty, whitespace, punctuation, gibberish, another language) gets ``confidence = 0.0``;
- a "traceback" with neither a ``Traceback (most recent call last):`` header nor an
  ``ExcType: message`` line has its confidence halved (frames alone say little).
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version

import numpy as np

from faultline.classifiers import training, weights

TASKS = ("reason", "traceback")
DEFAULT_KIND = "tfidf-lr"
_BATCH = 4096  # texts per predict_proba call (bounds memory on huge inputs)

# An exception line: a (dotted) type name that reads like an exception, at a line start.
_EXCEPTION_LINE = re.compile(
    r"(?m)^(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Timeout|"
    r"Unavailable|Failure|error)|KeyboardInterrupt|StopIteration)\b:?")
_TRACEBACK_HEADER = "Traceback (most recent call last)"


@dataclass(frozen=True, slots=True)
class Prediction:
    """One text's label, how far to trust it (0..1), and the id of the model that said so."""

    label: str
    confidence: float
    model: str


def looks_like_traceback(text: str, prepared: bool = False) -> bool:
    """A traceback header or an ``ExcType: message`` line is present."""
    if not prepared:
        text = training.prepare(text)  # drops "[rank3]: " line prefixes
    return _TRACEBACK_HEADER in text or _EXCEPTION_LINE.search(text) is not None


class TextClassifier:
    """A fitted model for one task, with its id and evidence vocabulary."""

    def __init__(self, task: str, kind: str, model: training.ProbaModel, model_id: str,
                 vocabulary: frozenset[str], train_seconds: float) -> None:
        self.task = task
        self.kind = kind
        self.model = model
        self.model_id = model_id
        self.vocabulary = vocabulary
        self.train_seconds = train_seconds

    @property
    def classes(self) -> list[str]:
        return list(self.model.classes)

    def _predict_prepared(self, prepared: list[str]) -> np.ndarray:
        parts = [self.model.predict_prepared(prepared[i:i + _BATCH])
                 for i in range(0, len(prepared), _BATCH)]
        return np.vstack(parts) if parts else np.zeros((0, len(self.classes)))

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Calibrated class probabilities, columns in :attr:`classes` order."""
        return self._predict_prepared([training.prepare(t) for t in texts])

    def evidence(self, text: str, prepared: bool = False) -> float:
        """1.0 for a text the model can read; less (down to 0.0) when it has no evidence."""
        if not training.evidence_words(text, prepared) & self.vocabulary:
            return 0.0
        if self.task == "traceback" and not looks_like_traceback(text, prepared):
            return 0.5
        return 1.0

    def predict(self, texts: Sequence[str | None]) -> list[Prediction]:
        """One :class:`Prediction` per text, in order. ``None`` reads as ``""``."""
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not one string")
        prepared = [training.prepare("" if t is None else str(t)) for t in texts]
        proba = self._predict_prepared(prepared)
        classes = self.classes
        out = []
        for text, p in zip(prepared, proba, strict=True):
            j = int(p.argmax())
            conf = float(np.clip(p[j], 0.0, 1.0)) * self.evidence(text, prepared=True)
            out.append(Prediction(classes[j], round(conf, 6), self.model_id))
        return out


def _examples(task: str) -> list[training.Example]:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    return training.shipped_examples(task)


def train(task: str, kind: str = DEFAULT_KIND) -> TextClassifier:
    """Fit a fresh classifier (no cache): every family, every template."""
    if kind not in training.MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; expected one of "
                         f"{training.MODEL_KINDS}")
    examples = _examples(task)
    t0 = time.perf_counter()
    model = training.fit_model(kind, examples, task)
    seconds = time.perf_counter() - t0
    return TextClassifier(task, kind, model, _model_id(task, kind, examples),
                          training.evidence_vocabulary(examples), seconds)


def shipped(task: str) -> TextClassifier:
    """The :data:`DEFAULT_KIND` model read from the shipped weights (no fit, no
    scikit-learn); :class:`~faultline.classifiers.weights.WeightsMismatch` if they were
    built from other training data than ``fixtures/text/`` holds now. The examples are
    regenerated only when the weights are not sealed to the inputs shipped now
    (:func:`~faultline.classifiers.weights.sealed`)."""
    t0 = time.perf_counter()
    if weights.sealed(task):
        model = weights.load(task)
        model_id = f"text.{task}.{DEFAULT_KIND}@{model.meta['model_digest']}"
    else:
        examples = _examples(task)
        model = weights.load(task, examples=examples)
        model_id = _model_id(task, DEFAULT_KIND, examples, model.meta["versions"])
    seconds = time.perf_counter() - t0
    return TextClassifier(task, DEFAULT_KIND, model, model_id, model.evidence, seconds)


def _versions() -> dict[str, str]:
    return {name: version(name) for name in ("scikit-learn", "spacy")}


def _model_id(task: str, kind: str, examples: Sequence[training.Example],
              versions: dict[str, str] | None = None) -> str:
    """Task, kind and a hash of everything the model depends on: its training data, its
    settings and the library versions that fit it (installed ones for a fit now, the
    recorded ones for shipped weights, so both give the same id when they agree)."""
    digest = weights.model_digest(task, examples, versions or _versions(), kind)
    return f"text.{task}.{kind}@{digest}"


@functools.cache
def model_id(task: str, kind: str = DEFAULT_KIND) -> str:
    """The id :func:`load` gives its model, without loading it (a few ms when the
    weights are sealed to the shipped inputs): what lets stored predictions stand in
    for the model (``text_predictions``)."""
    if kind != DEFAULT_KIND:
        return _model_id(task, kind, _examples(task))
    meta = weights.read_meta(task)
    if weights.sealed(task):  # the digest recorded from these very inputs
        return f"text.{task}.{kind}@{meta['model_digest']}"
    return _model_id(task, kind, _examples(task), meta["versions"])


_CACHE: dict[tuple[str, str], TextClassifier] = {}
_LOCK = threading.Lock()


def load(task: str, kind: str = DEFAULT_KIND) -> TextClassifier:
    """The process-wide classifier for ``task``: the shipped weights for
    :data:`DEFAULT_KIND`, a model trained on first use for the other kinds."""
    if kind not in training.MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; expected one of "
                         f"{training.MODEL_KINDS}")
    key = (task, kind)
    got = _CACHE.get(key)
    if got is None:
        with _LOCK:  # one load per process even when threads race for it
            got = _CACHE.get(key)
            if got is None:
                got = _CACHE[key] = shipped(task) if kind == DEFAULT_KIND else train(task, kind)
    return got


def warm_up(kind: str = DEFAULT_KIND) -> dict[str, float]:
    """Load (or train) both tasks now (e.g. before forking workers); returns seconds."""
    return {task: load(task, kind).train_seconds for task in TASKS}


def classify_reasons(texts: Sequence[str | None], kind: str = DEFAULT_KIND
                     ) -> list[Prediction]:
    """Drain reasons / admin comments -> Table 5 component or ``Planned Maintenance``."""
    return load("reason", kind).predict(texts)


def classify_tracebacks(texts: Sequence[str | None], kind: str = DEFAULT_KIND
                        ) -> list[Prediction]:
    """Python tracebacks -> ``Software Bug`` or ``Dependency``."""
    return load("traceback", kind).predict(texts)
