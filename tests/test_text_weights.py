"""Shipped text-model weights: reproducible, equal to the fitted model, refused when stale.

See :mod:`faultline.classifiers.weights`.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from agreement import PROB_MAX, assert_models_agree

from faultline.classifiers import build_weights, text, training, weights
from faultline.fixtures import textdata

TASKS = ("reason", "traceback")

# Unseen texts of every shape the models meet: new wording, garbage, prose, long text.
UNSEEN = ["GPU 6 dropped off the PCIe bus (Xid 79) twice this week, RMA opened",
          "node lost power feed B, PSU2 AC lost in SEL", "", "   ", "!!!!????", "0",
          "the quick brown fox jumps over the lazy dog", "ñØ€𝄞 ☃", "x" * 20_000,
          "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
          "RuntimeError: CUDA error: an illegal memory access was encountered",
          "botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL",
          "[rank3]: torch.distributed.DistBackendError: NCCL error in: ..."]


@pytest.fixture(scope="module")
def fitted() -> dict[str, training.TfidfModel]:
    """The models as build_weights fits them (one fit per task for the whole module)."""
    return {task: training.fit_tfidf(training.shipped_examples(task), task)
            for task in TASKS}


# what the solver computes: equal to the bit only on the same kind of processor
FITTED = frozenset({"coef.npy", "intercept.npy", "beta.npy"})


def _members(archive: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _digest(data: bytes) -> str:  # a failed bytes comparison makes pytest diff megabytes
    return hashlib.sha256(data).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_rebuild_gives_the_committed_weights(task, fitted, tmp_path):
    """A rebuild here gives the committed weights: the same bytes for everything but
    the solver's arrays, and those predicting as the committed ones do
    (``tests/agreement.py``: on another processor they differ in the last digits)."""
    examples = training.shipped_examples(task)
    rebuilt = weights.export(fitted[task], task, examples, build_weights.versions())
    assert _digest(build_weights.build(task)) == _digest(rebuilt)  # a second fit: same bytes
    new, old = _members(rebuilt), _members(weights.weights_path(task).read_bytes())
    assert list(new) == list(old)
    stale = [n for n in new if n not in FITTED and _digest(new[n]) != _digest(old[n])]
    assert not stale, (f"classifiers/weights/ is stale ({', '.join(stale)} differ): "
                       "run python -m faultline.classifiers.build_weights")
    weights.weights_path(task, tmp_path).write_bytes(rebuilt)
    prepared = [training.prepare(t) for t in [ex.text for ex in examples] + UNSEEN]
    assert_models_agree(weights.load(task, tmp_path, examples).predict_prepared(prepared),
                        weights.load(task).predict_prepared(prepared))


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_loaded_model_predicts_what_the_fitted_one_does(task, fitted):
    loaded = weights.load(task)
    assert loaded.classes == fitted[task].classes
    texts = [ex.text for ex in training.shipped_examples(task)] + UNSEEN
    prepared = [training.prepare(t) for t in texts]
    assert_models_agree(loaded.predict_prepared(prepared),
                        fitted[task].predict_prepared(prepared))
    # and through the public API: same labels and model id as a fresh fit, confidences
    # as close as the probabilities
    fresh = text.TextClassifier(task, text.DEFAULT_KIND, fitted[task],
                                text.load(task).model_id, text.load(task).vocabulary, 0.0)
    shipped, refit = text.load(task).predict(texts), fresh.predict(texts)
    assert [p.label for p in shipped] == [p.label for p in refit]
    assert [p.model for p in shipped] == [p.model for p in refit]
    assert max(abs(a.confidence - b.confidence) for a, b in zip(shipped, refit, strict=True)
               ) <= PROB_MAX
    assert text.train(task).model_id == text.load(task).model_id


def test_load_refuses_weights_of_other_training_data(tmp_path):
    shutil.copy(weights.weights_path("reason"), weights.weights_path("reason", tmp_path))
    examples = training.shipped_examples("reason")
    assert weights.load("reason", tmp_path, examples).classes  # unchanged data: fine
    changed = [*examples[:-1], training.Example("psu fan failed", "Power Supply",
                                                "test", "drain_reason")]
    with pytest.raises(weights.WeightsMismatch,
                       match=r"built from training data [0-9a-f]{12}, but the data shipped "
                             r"now hashes to [0-9a-f]{12}.*build_weights"):
        weights.load("reason", tmp_path, changed)
    relabeled = [training.Example(examples[0].text, "SSD", examples[0].family,
                                  examples[0].kind), *examples[1:]]
    with pytest.raises(weights.WeightsMismatch):
        weights.load("reason", tmp_path, relabeled)


def _forget_loaded() -> None:
    """Drop every cached read of the training data, the weights and the models."""
    for cached in (textdata.templates, textdata.real_texts, textdata.real_tracebacks,
                   weights.sealed, weights.read_meta, text.model_id):
        cached.cache_clear()
    text._CACHE.clear()


@pytest.fixture
def edited_text_dir(tmp_path, monkeypatch):
    """``edit(relative path, append)``: a copy of ``fixtures/text/`` read in place of the
    shipped one, with ``append`` added to one of its files (the data shipped changed)."""
    copy = tmp_path / "text"
    shutil.copytree(textdata.text_dir(), copy)
    monkeypatch.setattr(textdata, "text_dir", lambda: copy)
    _forget_loaded()

    def edit(name: str, append: str) -> None:
        with (copy / name).open("a", encoding="utf-8") as f:
            f.write(append)
        _forget_loaded()

    yield edit
    monkeypatch.undo()
    _forget_loaded()


NEW_ROW = "drain_reason,Faulty GPU,new,gpu fell off the bus again\n"


def test_text_load_refuses_stale_weights(edited_text_dir):
    """The run-time path: new training data without rebuilt weights is an error."""
    assert weights.sealed("reason")  # a byte-for-byte copy: the cheap check passes
    edited_text_dir("free_text.csv", NEW_ROW)
    assert not weights.sealed("reason") and not weights.sealed("traceback")
    with pytest.raises(weights.WeightsMismatch, match=r"reason\.tfidf-lr\.npz"):
        text.shipped("reason")
    # the file feeds the traceback task's seal too, but not its data: the full check
    # regenerates the traceback examples and accepts the weights
    assert text.shipped("traceback").classes == ["Dependency", "Software Bug"]


def test_an_input_change_that_leaves_the_data_alone_is_accepted(edited_text_dir):
    """A changed input file breaks the seal, and the full check then regenerates the
    examples: same data (a README edit), so the weights stand, with the same id and
    vocabulary as through the seal."""
    sealed = {task: text.shipped(task) for task in TASKS}
    edited_text_dir("README.md", "\nA note that trains nothing.\n")
    for task in TASKS:
        assert not weights.sealed(task)
        full = text.shipped(task)
        assert (full.model_id, full.vocabulary) == (sealed[task].model_id,
                                                    sealed[task].vocabulary)
        assert text.model_id(task) == full.model_id


def test_sealed_weights_stand_for_the_regenerated_examples(monkeypatch):
    """What the cheap check uses instead of regenerating: the same training hash, model
    id and vocabulary as the examples give; and it generates none."""
    _forget_loaded()
    for task in TASKS:
        examples = training.shipped_examples(task)
        meta = weights.read_meta(task)
        assert weights.sealed(task)
        assert meta["training_hash"] == weights.training_hash(task, examples)
        assert meta["model_digest"] == weights.model_digest(task, examples, meta["versions"])
        full = text.TextClassifier(task, text.DEFAULT_KIND, weights.load(task, None, examples),
                                   text._model_id(task, text.DEFAULT_KIND, examples,
                                                  meta["versions"]),
                                   training.evidence_vocabulary(examples), 0.0)

        def no_regeneration(_task):
            raise AssertionError("examples regenerated although the weights are sealed")

        monkeypatch.setattr(training, "shipped_examples", no_regeneration)
        fast = text.shipped(task)
        assert (fast.model_id, fast.vocabulary) == (full.model_id, full.vocabulary)
        assert text.model_id(task) == full.model_id
        assert fast.predict(UNSEEN) == full.predict(UNSEEN)
        monkeypatch.undo()
    _forget_loaded()


def _rewrite(src, dst, change):
    """Copy a weights zip, passing each member's bytes through ``change(name, data)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, change(info.filename, zin.read(info.filename)))


def test_tampered_hash_and_pickled_members_are_refused(tmp_path):
    src = weights.weights_path("traceback")
    dst = weights.weights_path("traceback", tmp_path)

    def forge_hash(name, data):
        if name != "meta.npy":
            return data
        meta = json.loads(str(np.load(io.BytesIO(data))[()]))
        meta["training_hash"] = "0" * 12
        buf = io.BytesIO()
        np.save(buf, np.array(json.dumps(meta)))
        return buf.getvalue()

    _rewrite(src, dst, forge_hash)
    with pytest.raises(weights.WeightsMismatch, match="000000000000"):
        weights.load("traceback", tmp_path)

    def pickle_coef(name, data):
        if name != "coef.npy":
            return data
        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        return buf.getvalue()

    _rewrite(src, dst, pickle_coef)
    with pytest.raises(weights.WeightsError, match="unreadable"):
        weights.load("traceback", tmp_path)
    dst.write_bytes(b"not a zip")
    with pytest.raises(weights.WeightsError):
        weights.load("traceback", tmp_path)
    dst.unlink()
    with pytest.raises(weights.WeightsError, match=r"missing.*build_weights"):
        weights.load("traceback", tmp_path)


def test_shipped_files_hold_no_object_arrays():
    for task in TASKS:
        with np.load(weights.weights_path(task), allow_pickle=False) as npz:
            for name in npz.files:
                assert not npz[name].dtype.hasobject, (task, name)
            meta = json.loads(str(npz["meta"][()]))
        assert meta["training_hash"] == weights.training_hash(task)
        assert meta["kind"] == "tfidf-lr" and meta["task"] == task
        # sealed to the inputs shipped now: an input changed since needs a rebuild
        # (python -m faultline.classifiers.build_weights), or every run regenerates
        assert weights.sealed(task), "inputs changed since the weights were built"


def test_classifying_needs_no_scikit_learn_and_no_fit():
    code = ("import sys\nfrom faultline.classifiers import text\n"
            "p = text.classify_reasons(['xid 79 gpu3 fell off bus'])[0]\n"
            "t = text.classify_tracebacks(['RuntimeError: CUDA error: out of memory'])[0]\n"
            "print(p.label, t.label, 'sklearn' in sys.modules, 'spacy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["Faulty", "GPU", "Software", "Bug", "False", "False"], out


def test_ingest_with_stale_weights_stops_with_a_clear_error(tmp_path, repo_root,
                                                            edited_text_dir):
    """Training data changed, weights not rebuilt: ingest exits 2 with one line that
    says how to rebuild, and leaves no database behind."""
    from typer.testing import CliRunner

    from faultline.cli import app

    edited_text_dir("free_text.csv", NEW_ROW)
    db = tmp_path / "x.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(repo_root / "fixtures/sample/corpus"),
                                      "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "build_weights" in result.output and "Traceback" not in result.output
    assert not db.exists()
