"""Line splitting and time conversion: the two rules every parser shares."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from faultline.pipeline.records import FileParse, ParsedEvent, Reject
from faultline.pipeline.text import count_lines, decode, split_lines
from faultline.pipeline.timeutil import from_us, local_to_utc_us, parse_iso


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"", []),
        (b"a\n", ["a"]),
        (b"a", ["a"]),
        (b"a\nb", ["a", "b"]),
        (b"a\r\nb\r\n", ["a", "b"]),
        (b"\n\n", ["", ""]),
        (b"a\rb\x0cc\n", ["a\rb\x0cc"]),  # only \n ends a line
        (b"x\x00y\n\xff\xfe\n", ["x\x00y", "\ufffd\ufffd"]),
    ],
)
def test_split_lines_and_count_agree(data, lines):
    assert split_lines(decode(data)) == lines
    assert count_lines(data) == len(lines)


LA = ZoneInfo("America/Los_Angeles")


@pytest.mark.parametrize(
    ("text", "utc", "had_zone"),
    [
        ("2024-07-01T12:00:00.123456+00:00", "2024-07-01T12:00:00.123456", True),
        ("2024-07-01T12:00:00,123456+00:00", "2024-07-01T12:00:00.123456", True),
        ("2024-07-01T12:00:00Z", "2024-07-01T12:00:00", True),
        ("2024-07-01T12:00:00+0200", "2024-07-01T10:00:00", True),
        ("2024-07-01 11:58:00,004", "2024-07-01T18:58:00.004", False),  # PDT
        ("2024-01-15T08:00:00", "2024-01-15T16:00:00", False),  # PST
        ("2024-11-03T01:30:00", "2024-11-03T08:30:00", False),  # repeated hour: first
        ("2024-03-10T02:30:00", "2024-03-10T10:30:00", False),  # skipped hour: forward
    ],
)
def test_parse_iso_in_a_zone_with_dst(text, utc, had_zone):
    us, zone = parse_iso(text, LA)
    assert zone is had_zone
    assert from_us(us) == dt.datetime.fromisoformat(utc).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize("bad", ["", "yesterday", "2024-13-01T00:00:00", "2024-07-01"])
def test_parse_iso_rejects_non_times(bad):
    assert parse_iso(bad, LA) is None


def test_local_to_utc_in_utc_is_identity():
    naive = dt.datetime(2024, 7, 1, 12)
    assert from_us(local_to_utc_us(naive, ZoneInfo("UTC"))) == naive.replace(tzinfo=dt.UTC)


def test_file_parse_accounting_counts_covered_lines_once():
    fp = FileParse(lines=10)
    fp.events = [ParsedEvent(2, "traceback", "t", line_end=5),
                 ParsedEvent(4, "cuda_error", "c"), ParsedEvent(9, "xid", "x", xid=79)]
    fp.rejects = [Reject.of(7, "unrecognized", "z" * 2000)]
    assert (fp.event_lines, fp.reject_lines, fp.routine_lines) == (5, 1, 4)
    assert len(fp.rejects[0].raw) == 512


def test_parsed_event_validates_kind_and_time_quality():
    with pytest.raises(ValueError, match="kind"):
        ParsedEvent(1, "no_such_kind", "m")
    with pytest.raises(ValueError, match="untimed"):
        ParsedEvent(1, "xid", "m", ts=5, ts_quality="untimed")
    with pytest.raises(ValueError, match="untimed"):
        ParsedEvent(1, "xid", "m", ts=None, ts_quality="exact")
