"""Build the shipped text-model weights from ``fixtures/text/``.

::

    python -m faultline.classifiers.build_weights          # (re)write classifiers/weights/
    python -m faultline.classifiers.build_weights --check  # exit 1 if a rebuild differs

Fits the ``tfidf-lr`` model of each task on :func:`training.shipped_examples` (seeded,
deterministic solvers) and writes :mod:`faultline.classifiers.weights`' format. Run it
after changing the training data or the model settings: loading refuses weights whose
training-data hash no longer matches. The bytes depend on the scikit-learn, numpy and
zlib versions too; ``constraints.txt`` pins the ones the committed files were built with.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

from faultline.classifiers import training, weights
from faultline.classifiers.text import TASKS


def versions() -> dict[str, str]:
    """The library versions recorded in the weights (and in the model id)."""
    return {name: version(name) for name in ("scikit-learn", "spacy", "numpy")}


def build(task: str) -> bytes:
    """Fit ``task``'s model on the shipped examples and return its ``.npz`` bytes."""
    examples = training.shipped_examples(task)
    model = training.fit_tfidf(examples, task)
    return weights.export(model, task, examples, versions())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="rebuild in memory and compare with the committed files")
    parser.add_argument("--out", type=Path, default=weights.WEIGHTS_DIR,
                        help="directory to write (default: classifiers/weights/)")
    args = parser.parse_args(argv)
    differs = []
    for task in TASKS:
        data = build(task)
        path = weights.weights_path(task, args.out)
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                differs.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"{path}: {len(data)} bytes")
    if differs:
        print("rebuilt weights differ from: " + ", ".join(differs), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
