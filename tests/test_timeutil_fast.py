"""The collector-stamp fast path of ``parse_iso`` reads every string as its regex does.

``timeutil._utc_micro`` skips the regex for the 27-character ``...ffffffZ`` layout
that most lines of a corpus carry; any string of that length ending in ``Z`` must get
the answer the regex path (``_ISO``) gives, valid or not.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.pipeline import timeutil

UTC = ZoneInfo("UTC")
BASE = "2024-07-01T12:00:03.000001Z"


def _by_regex(text: str) -> tuple[int, bool] | None:
    """parse_iso with the fast path out of the way (a leading space: stripped, so the
    regex reads the same text)."""
    return timeutil.parse_iso(" " + text, UTC)


@given(st.lists(st.tuples(st.integers(0, 25),
                          st.sampled_from("0123456789-T :.,Z+_\u0663\uff11 x")),
                max_size=4))
@settings(max_examples=3000, deadline=None)
def test_fast_path_equals_regex_on_mutated_stamps(edits):
    chars = list(BASE)
    for pos, ch in edits:
        chars[pos] = ch
    text = "".join(chars)
    assert len(text) == 27 and text.endswith("Z")
    assert timeutil.parse_iso(text, UTC) == _by_regex(text)


def test_known_values():
    assert timeutil.parse_iso(BASE, UTC) == (1_719_835_203_000_001, True)
    assert timeutil.parse_iso("2024-02-30T12:00:03.000001Z", UTC) is None
    assert timeutil.parse_iso("2024-07-01T24:00:03.000001Z", UTC) is None
    assert timeutil.parse_iso("2024-07-01 12:00:03,000001Z", UTC) == (1_719_835_203_000_001,
                                                                      True)
    assert timeutil.parse_iso("2024-07-01T12:00:03.+00001Z", UTC) is None
