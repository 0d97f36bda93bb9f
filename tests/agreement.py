"""How closely a text model fitted here must agree with the shipped weights.

The weights are fitted once (``python -m faultline.classifiers.build_weights``) and the
tests fit the same model again to check them. On one machine the fit is deterministic
to the bit. On another processor it is not: the logistic regression's newton-cg solver
stops at ``tol=1e-3``, and BLAS kernels of another instruction set round its dot
products differently, so it stops at a slightly different point. Measured (each over
the 3,583 reason and 259 traceback training texts plus the unseen ones of
``test_text_weights.UNSEEN``): the committed weights against a fit on an AMD EPYC
machine, every label the same, the largest probability difference 0.024 (one reason
text; the 99th percentile 1.7e-4); OpenBLAS's Sandybridge kernels against its Haswell
kernels on one machine, 0.0013.

So a refit must give the same label for every text, and the same probabilities within
these bounds: a model fitted from other data or settings misses them by far.
"""

from __future__ import annotations

import numpy as np

PROB_MAX = 0.1  # the largest difference of any text's probability
PROB_P99 = 1e-3  # ... and its 99th percentile over the texts


def assert_models_agree(actual: np.ndarray, expected: np.ndarray) -> None:
    """``actual`` and ``expected``: probabilities (texts x classes) of two fits."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    flips = np.flatnonzero(actual.argmax(axis=1) != expected.argmax(axis=1))
    assert flips.size == 0, f"{flips.size} texts change label (first rows {flips[:5]})"
    per_text = np.abs(actual - expected).max(axis=1)
    assert per_text.max() <= PROB_MAX, per_text.max()
    assert np.quantile(per_text, 0.99) <= PROB_P99, np.quantile(per_text, 0.99)
