"""Text predictions kept in the database, so a re-run needs no model at all.

Fitting the text models takes seconds in every new process, and a re-run of ingest
classifies the same drain reasons and tracebacks as the run before. Each prediction is
stored in ``text_predictions`` under the model's id (a hash of its training data,
settings and library versions: :func:`faultline.classifiers.text.model_id`) and the
text's SHA-256. Texts already there are answered from the table; only new ones reach
the model, which is fitted the first time one arrives. The models are deterministic,
so a stored prediction is the one the model would give again; a new model id (new
training data, new scikit-learn) starts afresh. After each rebuild the table holds the
texts of that rebuild and no others (:func:`retain`), so it depends only on the
corpus, not on the order in which files arrived.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import duckdb

from faultline.classifiers import text
from faultline.schemas import arrowrows
from faultline.schemas.tables import TEXT_PREDICTIONS


def _sha(t: str) -> str:
    return hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()


def classify(con: duckdb.DuckDBPyConnection, task: str, texts: Sequence[str | None]
             ) -> list[text.Prediction]:
    """``text.load(task).predict(texts)``, answered from the table where it can be."""
    texts = ["" if t is None else str(t) for t in texts]
    if not texts:
        return []
    model = text.model_id(task)
    shas = [_sha(t) for t in texts]
    known = {sha: (label, conf) for sha, label, conf in con.execute(
        "SELECT text_sha256, label, confidence FROM text_predictions "
        "WHERE model = ? AND list_contains(?, text_sha256)", [model, sorted(set(shas))]
    ).fetchall()}
    missing = {sha: t for sha, t in zip(shas, texts, strict=True) if sha not in known}
    if missing:
        order = sorted(missing)
        preds = text.load(task).predict([missing[sha] for sha in order])
        if preds[0].model != model:  # the id must describe the model that answered
            raise RuntimeError(f"text model id drifted: {preds[0].model} != {model}")
        rows = [(model, sha, p.label, p.confidence) for sha, p in zip(order, preds,
                                                                       strict=True)]
        _insert(con, "text_predictions", ("model", "text_sha256", "label", "confidence"),
                rows)
        known.update({sha: (label, conf) for _, sha, label, conf in rows})
    return [text.Prediction(*known[sha], model) for sha in shas]


def retain(con: duckdb.DuckDBPyConnection, used: dict[str, Sequence[str | None]]) -> None:
    """Keep the stored predictions of these texts (``{task: texts}``) and drop the rest."""
    keep = [(text.model_id(task), _sha("" if t is None else str(t)))
            for task, texts in used.items() for t in texts]
    con.execute("CREATE OR REPLACE TEMP TABLE keep_predictions "
                "(model VARCHAR, text_sha256 VARCHAR)")
    if keep:
        _insert(con, "keep_predictions", ("model", "text_sha256"), sorted(set(keep)))
    con.execute("DELETE FROM text_predictions WHERE (model, text_sha256) NOT IN "
                "(SELECT (model, text_sha256) FROM keep_predictions)")


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...],
            rows: Sequence[tuple]) -> None:
    """``rows`` into ``table`` as one Arrow table, cast to the table's column types by
    the INSERT (``executemany`` ran one prepared INSERT per row: a few ms per hundred
    texts, in every ingest that meets new texts)."""
    kinds = {c.name: c.type for c in TEXT_PREDICTIONS.columns}  # keep_predictions' too
    con.register("memo_rows", arrowrows.table({c: ([r[i] for r in rows], kinds[c])
                                               for i, c in enumerate(columns)}))
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 - constants
                    f"SELECT {', '.join(columns)} FROM memo_rows")
    finally:
        con.unregister("memo_rows")
