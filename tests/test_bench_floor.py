"""The floor of ``bench/ingest.py`` counts the same lines whether it holds the whole
corpus's text at once or reads and scans it in bounded tasks (``--streamed-floor``,
the only way ``llama3``'s 25 GB of text can be measured on a 24 GiB machine): the two
are the same measurement, so the ratios against either compare."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from faultline.pipeline.discover import discover

BENCH = Path(__file__).resolve().parents[1] / "bench"
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample"


@pytest.fixture
def bench_ingest(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import ingest

    yield ingest
    sys.modules.pop("ingest", None)


def test_the_streamed_floor_counts_what_the_whole_floor_counts(bench_ingest, monkeypatch):
    paths = list(discover([SAMPLE]))
    monkeypatch.setattr(bench_ingest, "STREAM_FILES", 3)  # many tasks, each a few files
    _, lines, selected = bench_ingest.floor(paths)
    _, lines_streamed, selected_streamed = bench_ingest.floor(paths, streamed=True)
    assert lines > 1000 and 0 < selected < lines
    assert (lines_streamed, selected_streamed) == (lines, selected)
