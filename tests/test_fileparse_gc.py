"""``parse_batch`` pauses the cyclic garbage collector for its batch only."""

from __future__ import annotations

import gc

import pytest

from faultline.pipeline import fileparse
from faultline.pipeline.settings import IngestSettings

LINE = (b"2024-07-01T12:00:00.123456Z node0042:2231:2290 [3] NCCL INFO Bootstrap : Using "
        b"eth0:10.1.2.42<0>\n")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_during_a_batch_and_restored_after(enabled, monkeypatch):
    seen = []
    real = fileparse._prepare

    def spy(item, settings):
        seen.append(gc.isenabled())
        return real(item, settings)

    monkeypatch.setattr(fileparse, "_prepare", spy)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        out = fileparse.parse_batch([("jobs/1/n1.log", LINE, None)], IngestSettings())
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False]
    assert out.events.num_rows == 1


def test_the_collector_is_restored_when_a_batch_fails(monkeypatch):
    def boom(item, settings):
        raise RuntimeError("boom")

    monkeypatch.setattr(fileparse, "_prepare", boom)
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        fileparse.parse_batch([("jobs/1/n1.log", LINE, None)], IngestSettings())
    assert gc.isenabled()
