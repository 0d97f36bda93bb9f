"""A simulated GPU cluster whose logs have known root causes (``faultline simulate``).

Presets live in ``fixtures/presets``; labeled free text in ``fixtures/text``. Output is a
corpus in the layout ``faultline ingest`` reads, with ground truth written beside it.
"""

from faultline.simulate.corpus import SimResult, simulate

__all__ = ["SimResult", "simulate"]
