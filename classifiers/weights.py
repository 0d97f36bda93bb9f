"""Shipped text-model weights: a fitted ``tfidf-lr`` model as plain arrays, and the
numpy-only model that predicts from them.

Why
---
Fitting the reason and traceback models took about 3 s in every new process, plus about
1 s to import scikit-learn, on every first ingest. The weights are now built once from
``fixtures/text/`` (``python -m faultline.classifiers.build_weights``) and committed
under ``classifiers/weights/``; a run reads them and needs neither a fit nor
scikit-learn.

Format
------
One ``<task>.tfidf-lr.npz`` per task: a zip of ``.npy`` arrays, none of them an object
array, read with ``np.load(allow_pickle=False)`` only, so reading a file can never run
code. The zip members have a fixed timestamp and order, so a rebuild from the same data
with the same library versions on the same kind of processor gives the same bytes. On
another processor the solver's arrays (``coef``, ``intercept``, ``beta``) differ in
their last digits (BLAS kernels round differently and newton-cg stops at its
tolerance at a slightly different point); every other member is the same to the bit,
and the model gives every text the same label (``tests/agreement.py`` has the bounds
and what was measured; ``tests/test_text_weights.py``).

- ``meta``: a JSON string: format version, task, kind, the training-data hash
  (:func:`training_hash`), the model digest and inputs seal (below), the scikit-learn /
  spaCy / numpy versions that fitted it, and each feature block's settings (text view,
  analyzer, n-gram range);
- ``evidence``: the evidence vocabulary of the training texts (sorted);
- ``b<i>_terms`` / ``b<i>_idf``: feature block ``i``'s vocabulary (in column order) and
  inverse document frequencies;
- ``coef``, ``intercept``, ``classes``: the logistic regression;
- ``beta``: the inverse temperature of the calibration.

Loading checks the recorded training-data hash against the data shipped now and refuses
(:class:`WeightsMismatch`) weights built from other data: a model trained on last
month's fixtures must not answer under this month's id.

The cheap check
---------------
Hashing the training data means generating it: every template filled with seeded
random slots (:mod:`faultline.classifiers.textsets`), 0.4 s per run for both tasks, more
than loading the arrays. So the weights also record what the data is generated *from*
and what was derived from it at build time:

- ``evidence``: the evidence vocabulary (:func:`training.evidence_vocabulary`) and, in
  ``meta``, ``model_digest``: the ``@`` part of the model id for the recorded versions;
- ``inputs_seal`` in ``meta``: a hash (:func:`inputs_seal`) of every input the
  examples are a deterministic function of (the bytes of every file under
  ``fixtures/text/`` and of the taxonomy that validates their labels, the source of
  the modules that generate, prepare and hash them: ``fixtures/textdata.py``,
  ``classifiers/textsets.py``, ``classifiers/training.py``, the Python minor version
  whose ``random``, ``csv`` and ``tomllib`` read and fill them, and the model settings)
  together with the recorded ``training_hash``, ``model_digest`` and ``evidence``.

Why it is equivalent: :func:`training.shipped_examples` reads nothing but those files
and runs nothing but that code (``random.Random`` seeded with strings is stable across
runs), so equal inputs give equal examples, hence the same training hash, model id and
vocabulary as at build time. When the seal matches, the recorded values are the ones a
regeneration would compute and are used without regenerating. When it does not (any
input changed, even a comment, or a recorded value was edited: the seal covers them),
:func:`load` takes the full path: it generates the examples, compares their hash with
the recorded one exactly as before, and derives the vocabulary from them, so no weights
are accepted that the full check would refuse. ``tests/test_text_weights.py`` checks
that the shipped seal matches (a rebuild is due whenever an input changes) and that both
paths agree.

Arithmetic
----------
:class:`LinearTextModel` repeats scikit-learn's transform step by step in the same
dtypes and the same summation order (word / ``char_wb`` analyzers, counts, ``1 + log``,
idf, per-block L2 norm with a double accumulator, a sequential sparse dot product,
``softmax(beta * logits)``), so its probabilities equal the fitted model's; the test
compares them on every training text and on the sample corpus's texts.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import json
import math
import re
import sys
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from faultline.classifiers import textsets, training
from faultline.fixtures import textdata

FORMAT = 1
KIND = "tfidf-lr"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps: reproducible bytes
_WHITE_SPACES = re.compile(r"\s\s+")  # scikit-learn's whitespace normalization
_VIEWS = {"text": lambda t: t, "exception_lines": training.exception_lines}


class WeightsError(RuntimeError):
    """Shipped weights are missing or unreadable."""


class WeightsMismatch(WeightsError):
    """Shipped weights were built from other training data than the data shipped."""


def weights_path(task: str, directory: Path | None = None) -> Path:
    return (directory or WEIGHTS_DIR) / f"{task}.{KIND}.npz"


def training_hash(task: str, examples: Sequence[training.Example] | None = None) -> str:
    """The hash of what the weights depend on besides library versions: the training
    texts and labels and the model settings (the ``@`` part of the model id without the
    library versions)."""
    if examples is None:
        examples = training.shipped_examples(task)
    return training.data_hash(examples, *training.model_settings(KIND, task))


def model_digest(task: str, examples: Sequence[training.Example],
                 versions: dict[str, str], kind: str = KIND) -> str:
    """The ``@`` part of a model's id (:func:`faultline.classifiers.text.model_id`): the
    training data, the model settings and the library versions (the recorded ones for
    shipped weights, the installed ones for a model fitted now)."""
    return training.data_hash(examples, *training.model_settings(kind, task),
                              versions["scikit-learn"], versions["spacy"])


# Everything training.shipped_examples(task) and training.evidence_vocabulary read or run
# besides the standard library: the data files, and the code that fills, prepares and
# hashes them (see "The cheap check" above).
_INPUT_MODULES = (textdata, textsets, training)


def _input_files() -> list[Path]:
    text = textdata.text_dir()
    spec = importlib.util.find_spec("faultline.schemas.taxonomy")
    taxonomy = Path(next(iter(spec.submodule_search_locations or ()))) if spec else None
    if taxonomy is None:
        raise WeightsError("faultline.schemas.taxonomy not found")
    files = sorted(p for p in text.rglob("*") if p.is_file())
    files += sorted(p for p in taxonomy.iterdir() if p.suffix in (".csv", ".toml"))
    return files + [Path(m.__file__) for m in _INPUT_MODULES]


def inputs_seal(task: str, data_hash: object, digest: object,
                evidence: Sequence[str]) -> str:
    """A hash of the inputs ``task``'s examples are generated from, and of the values
    derived from them at build time (the training hash, the model digest, the evidence
    vocabulary): equal seals mean a regeneration would give those values again."""
    h = hashlib.sha256()
    h.update(repr((FORMAT, task, KIND, sys.version_info[:2],
                   training.model_settings(KIND, task), data_hash, digest)).encode())
    for word in evidence:
        h.update(word.encode() + b"\x00")
    for path in _input_files():
        h.update(b"\x1e" + path.name.encode() + b"\x1f")
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- predict


@dataclass(frozen=True)
class Block:
    """One TF-IDF vectorizer of the feature union."""

    view: str  # "text" or "exception_lines"
    analyzer: str  # "word" or "char_wb"
    ngram_range: tuple[int, int]
    vocabulary: dict[str, int]
    idf: np.ndarray
    token_pattern: str

    @functools.cached_property
    def _token_re(self) -> re.Pattern[str]:
        return re.compile(self.token_pattern)

    def features(self, text: str) -> list[str]:
        """scikit-learn's analyzer: lowercase, then word n-grams or ``char_wb`` n-grams."""
        text = text.lower()
        lo, hi = self.ngram_range
        if self.analyzer == "word":
            tokens = self._token_re.findall(text)
            out = list(tokens) if lo == 1 else []
            for n in range(max(lo, 2), min(hi + 1, len(tokens) + 1)):
                out += [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
            return out
        out = []
        for w in _WHITE_SPACES.sub(" ", text).split():
            w = f" {w} "
            for n in range(lo, hi + 1):
                offset = 0
                out.append(w[:n])
                while offset + n < len(w):
                    offset += 1
                    out.append(w[offset:offset + n])
                if offset == 0:  # a word shorter than n counts once
                    break
        return out

    def row(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Column indexes (ascending) and L2-normalized TF-IDF values of one text."""
        vocab = self.vocabulary
        counts = {vocab[f]: n for f, n in Counter(self.features(_VIEWS[self.view](text))).items()
                  if f in vocab}
        idx = np.array(sorted(counts), dtype=np.int64)
        val = np.array([counts[j] for j in idx.tolist()], dtype=self.idf.dtype)
        np.log(val, out=val)
        val += 1.0
        val *= self.idf[idx]
        if len(val):
            # sum of float squares in a double, then each value divided in double
            total = float(np.cumsum(val * val, dtype=np.float64)[-1])
            if total != 0.0:
                val = (val.astype(np.float64) / math.sqrt(total)).astype(val.dtype)
        return idx, val


class LinearTextModel(training.ProbaModel):
    """TF-IDF blocks -> linear scores -> ``softmax(beta * logits)``, numpy only."""

    def __init__(self, task: str, blocks: Sequence[Block], coef: np.ndarray,
                 intercept: np.ndarray, classes: Sequence[str], beta: np.ndarray,
                 meta: dict, evidence: frozenset[str] = frozenset()) -> None:
        self.task = task
        self.blocks = list(blocks)
        self.offsets = np.cumsum([0] + [len(b.vocabulary) for b in self.blocks])[:-1]
        self.coef_t = np.ascontiguousarray(coef.T)  # (features, rows of coef)
        self.intercept = intercept
        self.classes = list(classes)
        self.beta = beta[()]
        self.meta = meta
        self.evidence = evidence  # words in two training texts or more (text.py)

    def decision(self, prepared: Sequence[str]) -> np.ndarray:
        """``X @ coef.T + intercept``, each row summed in column order as scipy does
        (a cumulative sum is sequential; ``np.add.reduceat`` and ``@`` are not)."""
        out = np.zeros((len(prepared), self.coef_t.shape[1]), dtype=self.coef_t.dtype)
        for r, text in enumerate(prepared):
            parts = [b.row(text) for b in self.blocks]
            idx = np.concatenate([i + off for (i, _), off in zip(parts, self.offsets,
                                                                 strict=True)])
            if len(idx):
                val = np.concatenate([v for _, v in parts])
                out[r] = np.cumsum(self.coef_t[idx] * val[:, None], axis=0)[-1]
        return out + self.intercept

    def predict_prepared(self, prepared: Sequence[str]) -> np.ndarray:
        if not prepared:
            return np.zeros((0, len(self.classes)))
        scores = self.decision(prepared)
        if scores.shape[1] == 1:  # binary: one score for classes[1]
            d = scores.reshape(-1, 1)
            logits = np.concatenate([-d, d], axis=1)
        elif (np.all((scores >= 0) & (scores <= 1))
              and np.all(np.isclose(scores.sum(axis=1), 1.0))):
            logits = np.log(scores + 1e-12)  # what scikit-learn does to probabilities
        else:
            logits = scores
        x = self.beta * logits
        x -= x.max(axis=1).reshape(-1, 1)
        np.exp(x, out=x)
        x /= x.sum(axis=1).reshape(-1, 1)
        x[(x > 1.0) & (x <= 1.0 + 1e-5)] = 1.0
        return x.astype(np.float64)  # what the fitted model returns


# --------------------------------------------------------------------------- export


def _fitted_parts(model: training.TfidfModel) -> tuple[list[tuple[str, object]], object,
                                                       object]:
    """(view, vectorizer) per block, the logistic regression and the calibrator of a
    fitted ``tfidf-lr`` model; refuses shapes :class:`LinearTextModel` cannot repeat."""
    est = model.estimator
    if type(est).__name__ != "CalibratedClassifierCV" or len(est.calibrated_classifiers_) != 1:
        raise ValueError("only a temperature-calibrated model with ensemble=False ships")
    calibrated = est.calibrated_classifiers_[0]
    if calibrated.method != "temperature":
        raise ValueError(f"calibration {calibrated.method!r} is not supported")
    union, lr = calibrated.estimator.steps[0][1], calibrated.estimator.steps[-1][1]
    blocks = []
    for _name, step in union.transformer_list:
        view = "text"
        vec = step
        if hasattr(step, "steps"):
            func = step.steps[0][1].func
            view = {training._identity: "text",
                    training._exception_view: "exception_lines"}[func]
            vec = step.steps[-1][1]
        ok = (vec.lowercase and vec.sublinear_tf and vec.norm == "l2" and vec.use_idf
              and vec.analyzer in ("word", "char_wb") and vec.stop_words is None
              and vec.strip_accents is None and vec.preprocessor is None
              and vec.tokenizer is None and vec.input == "content")
        if not ok:
            raise ValueError(f"vectorizer settings not supported: {vec.get_params()}")
        blocks.append((view, vec))
    return blocks, lr, calibrated.calibrators[0]


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
    return buf.getvalue()


def export(model: training.TfidfModel, task: str, examples: Sequence[training.Example],
           versions: dict[str, str]) -> bytes:
    """The ``.npz`` bytes of a model fitted on ``examples`` (deterministic: same model,
    same bytes), with the hashes and vocabulary :func:`load` checks and uses."""
    blocks, lr, calibrator = _fitted_parts(model)
    arrays: dict[str, np.ndarray] = {}
    block_meta = []
    for i, (view, vec) in enumerate(blocks):
        terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
        arrays[f"b{i}_terms"] = np.array(terms, dtype=str)
        arrays[f"b{i}_idf"] = vec.idf_
        block_meta.append({"view": view, "analyzer": vec.analyzer,
                           "ngram_range": list(vec.ngram_range),
                           "token_pattern": vec.token_pattern})
    # With string labels the calibration encodes them: the regression sees 0..K-1.
    inner = [str(c) for c in lr.classes_]
    if inner not in (model.classes, [str(i) for i in range(len(model.classes))]):
        raise ValueError(f"regression classes {inner} do not match {model.classes}")
    arrays.update(coef=lr.coef_, intercept=lr.intercept_,
                  classes=np.array(model.classes, dtype=str),
                  beta=np.asarray(calibrator.beta_))
    data_hash = training_hash(task, examples)
    digest = model_digest(task, examples, versions)
    evidence = sorted(training.evidence_vocabulary(examples))
    arrays["evidence"] = np.array(evidence, dtype=str)
    meta = {"format": FORMAT, "task": task, "kind": KIND, "training_hash": data_hash,
            "model_digest": digest,
            "inputs_seal": inputs_seal(task, data_hash, digest, evidence),
            "versions": versions, "blocks": block_meta}
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True)), **arrays}
    for name, arr in arrays.items():
        if arr.dtype.hasobject:
            raise ValueError(f"{name}: object arrays are not shipped")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, _npy(arr), compresslevel=9)
    return buf.getvalue()


# --------------------------------------------------------------------------- load


def _open(path: Path) -> np.lib.npyio.NpzFile:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError as exc:
        raise WeightsError(f"{path}: text model weights missing; build them with "
                           "'python -m faultline.classifiers.build_weights'") from exc
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise WeightsError(f"{path}: unreadable text model weights: {exc}") from exc


@functools.cache
def read_meta(task: str, directory: Path | None = None) -> dict:
    """The ``meta`` record of a weights file (without reading its arrays)."""
    path = weights_path(task, directory)
    with _open(path) as npz:
        try:
            return json.loads(str(npz["meta"][()]))
        except (KeyError, ValueError) as exc:
            raise WeightsError(f"{path}: unreadable text model weights: {exc}") from exc


def _evidence(npz: np.lib.npyio.NpzFile) -> list[str]:
    return npz["evidence"].tolist() if "evidence" in npz.files else []


@functools.cache
def sealed(task: str, directory: Path | None = None) -> bool:
    """Whether the weights' recorded training hash, model digest and evidence vocabulary
    were derived from the very inputs shipped now (see "The cheap check"): then they
    stand for a regeneration of the examples."""
    path = weights_path(task, directory)
    meta = read_meta(task, directory)
    with _open(path) as npz:
        try:
            evidence = _evidence(npz)
        except (KeyError, ValueError) as exc:
            raise WeightsError(f"{path}: unreadable text model weights: {exc}") from exc
    return meta.get("inputs_seal") == inputs_seal(
        task, meta.get("training_hash"), meta.get("model_digest"), evidence)


def load(task: str, directory: Path | None = None,
         examples: Sequence[training.Example] | None = None) -> LinearTextModel:
    """The shipped model of ``task``; refuses weights built from other training data.

    With ``examples`` None and the weights :func:`sealed` to the inputs shipped now, the
    recorded training hash and vocabulary are used as they are; otherwise the examples
    (``examples``, or :func:`training.shipped_examples` regenerated) are hashed and
    compared with the recorded hash, and the vocabulary is derived from them."""
    path = weights_path(task, directory)
    fast = examples is None and sealed(task, directory)
    if not fast and examples is None:
        examples = training.shipped_examples(task)
    want = None if examples is None else training_hash(task, examples)
    with _open(path) as npz:
        try:
            meta = json.loads(str(npz["meta"][()]))
            got = meta.get("training_hash")
            if meta.get("format") != FORMAT or meta.get("task") != task:
                raise WeightsError(f"{path}: format {meta.get('format')} task "
                                   f"{meta.get('task')!r}, expected {FORMAT} {task!r}")
            if want is not None and got != want:
                raise WeightsMismatch(
                    f"{path}: built from training data {got}, but the data shipped now "
                    f"hashes to {want} (fixtures/text/ or the model settings changed); "
                    "rebuild with 'python -m faultline.classifiers.build_weights'")
            blocks = []
            for i, b in enumerate(meta["blocks"]):
                terms = npz[f"b{i}_terms"].tolist()
                blocks.append(Block(b["view"], b["analyzer"], tuple(b["ngram_range"]),
                                    {t: j for j, t in enumerate(terms)}, npz[f"b{i}_idf"],
                                    b["token_pattern"]))
            evidence = (frozenset(_evidence(npz)) if examples is None
                        else training.evidence_vocabulary(examples))
            return LinearTextModel(task, blocks, npz["coef"], npz["intercept"],
                                   npz["classes"].tolist(), npz["beta"], meta, evidence)
        except (KeyError, ValueError) as exc:
            raise WeightsError(f"{path}: unreadable text model weights: {exc}") from exc
