"""Trainer-log parser: real-format lines, table-driven; vectorized steps; accounting."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
from accounting import check_accounting as shared_accounting

from faultline.pipeline.parsers import trainer
from faultline.pipeline.records import FileParse, ParseContext
from faultline.pipeline.timeutil import local_to_utc_us

CTX = ParseContext(path="jobs/81234/train.log", job_id="81234")


def local_us(text: str, tz: str = "UTC") -> int:
    t = dt.datetime.fromisoformat(text.replace(",", "."))
    return round(t.replace(tzinfo=ZoneInfo(tz)).timestamp() * 1_000_000)


def check_accounting(fp: FileParse) -> None:
    shared_accounting(fp)
    assert [e.line_no for e in fp.events] == sorted(e.line_no for e in fp.events)


# (id, line, kinds, attrs of the last event (subset), rank, host)
LINES = [
    ("step", "2024-07-01 11:58:00,004 INFO step=182311 loss=1.8412 grad_norm=0.41 "
     "tokens_per_s=2.9e7",
     ["train_step"], {"step": 182311, "loss": 1.8412}, None, None),
    ("step_sci_loss", "2024-07-01 11:58:00,004 INFO step=7 loss=1.5e-01",
     ["train_step"], {"step": 7, "loss": 0.15}, None, None),
    ("step_megatron", "2024-07-01 11:58:00,004 INFO  iteration 1200/ 500000 | consumed "
     "samples: 1 | lm loss: 2.345600E+00 | grad norm: 0.412 |",
     ["train_step"], {"step": 1200, "loss": 2.3456}, None, None),
    ("step_nan", "2024-07-01 11:59:00,004 INFO step=182312 loss=nan grad_norm=0.41",
     ["train_step", "nonfinite_loss"], {"what": "loss", "value": "nan", "step": 182312},
     None, None),
    ("step_inf_grad", "2024-07-01 11:59:00,004 INFO step=9 loss=1.25 grad_norm=inf",
     ["train_step", "nonfinite_loss"], {"what": "grad_norm", "value": "inf", "step": 9},
     None, None),
    ("checkpoint", "2024-07-01 11:45:00,010 INFO checkpoint saved step=182000 "
     "path=/ckpt/run7/step_182000 seconds=41.2",
     ["checkpoint"], {"step": 182000, "path": "/ckpt/run7/step_182000", "seconds": 41.2},
     None, None),
    ("checkpoint_megatron", "2024-07-01 11:45:00,010 INFO   successfully saved checkpoint from "
     "iteration    2000 to /ckpt/llama",
     ["checkpoint"], {"step": 2000, "path": "/ckpt/llama"}, None, None),
    ("nonfinite", "2024-07-01 12:00:00,002 ERROR non-finite loss (nan) at step 182312",
     ["nonfinite_loss"], {"what": "loss", "value": "nan", "step": 182312}, None, None),
    ("megatron_grad_nan", "2024-07-01 12:00:00,002 ERROR AssertionError: Rank 13: found NaN in "
     "local grad norm in backward pass before data-parallel communication collective. Device: "
     "5, node: node0042",
     ["nonfinite_loss"], {"what": "grad_norm", "value": "nan", "device": 5}, 13, "node0042"),
    ("checksum", "2024-07-01 12:00:01,002 ERROR checksum mismatch between data-parallel replicas "
     "at step 182312 (rank 3 vs rank 11)",
     ["checksum_mismatch"], {"step": 182312, "ranks": [3, 11]}, None, None),
    ("param_differ", "2024-07-01 12:00:01,002 WARNING parameter hash differs across replicas "
     "after step 100",
     ["checksum_mismatch"], {"step": 100}, None, None),
    ("weights_not_match", "2024-07-01 12:00:01,002 ERROR Weights do not match between DP ranks",
     ["checksum_mismatch"], {}, None, None),
    ("train_error", "2024-07-01 12:00:02,000 ERROR dataloader worker 3 exited unexpectedly",
     ["train_error"], {"level": "ERROR"}, None, None),
    ("critical", "2024-07-01 12:00:02,000 CRITICAL out of disk space at step 5",
     ["train_error"], {"level": "CRITICAL", "step": 5}, None, None),
]


@pytest.mark.parametrize(("line", "kinds", "attrs", "rank", "host"),
                         [c[1:] for c in LINES], ids=[c[0] for c in LINES])
def test_line(line, kinds, attrs, rank, host):
    events = trainer.parse_line(line, CTX)
    assert [e.kind for e in events] == kinds
    e = events[-1]
    assert {k: e.attrs.get(k) for k in attrs} == attrs
    assert (e.rank, e.host, e.job_id) == (rank, host, "81234")
    for ev in events:
        assert (ev.ts, ev.ts_quality) == (local_us(line[:23]), "assumed_tz")
        assert ev.message == line[24:].lstrip()


@pytest.mark.parametrize("line", [
    "2024-07-01 11:45:00,010 INFO saving checkpoint at step 182000",
    "2024-07-01 11:45:00,010 WARNING learning rate warmup finished",
    "2024-07-01 11:45:00,010 INFO eval step=100",
    "plain print output",
    "",
])
def test_routine(line):
    assert trainer.parse_line(line, CTX) == []


def test_union_regex_reaches_every_non_step_case():
    rx = re.compile(trainer.CANDIDATE_RE)
    for _, line, kinds, *_ in LINES:
        assert bool(rx.search(line)) == (kinds != ["train_step"]), line


TRACEBACK = """\
2024-07-01 12:00:00,002 INFO step=5 loss=1.0
2024-07-01 12:00:00,002 ERROR Traceback (most recent call last):
  File "/train.py", line 10, in <module>
    main()
  File "/train.py", line 7, in main
    raise RuntimeError("boom: loss=nan")
RuntimeError: boom
2024-07-01 12:00:01,000 INFO step=6 loss=0.9
"""


def test_traceback_is_one_event_and_its_body_is_not_read():
    fp = trainer.parse(TRACEBACK, CTX)
    check_accounting(fp)
    assert [(e.kind, e.line_no, e.line_end) for e in fp.events] == [
        ("train_step", 1, 1), ("traceback", 2, 7), ("train_step", 8, 8)]
    tb = fp.events[1]
    assert tb.attrs == {"exc_type": "RuntimeError", "exc_message": "boom",
                        "last_frame": "/train.py:7 in main"}
    assert tb.ts_quality == "assumed_tz"


def test_logger_exception_traceback_inherits_time():
    text = ("2024-07-01 12:00:00,002 ERROR training failed\n"
            "Traceback (most recent call last):\n"
            '  File "/train.py", line 10, in <module>\n'
            "torch.OutOfMemoryError: CUDA out of memory.\n")
    fp = trainer.parse(text, CTX)
    check_accounting(fp)
    assert [(e.kind, e.line_no, e.line_end, e.ts_quality) for e in fp.events] == [
        ("train_error", 1, 1, "assumed_tz"), ("traceback", 2, 4, "inherited")]
    assert fp.events[1].ts == local_us("2024-07-01 12:00:00,002")


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata"])
def test_vectorized_times_follow_timeutil_rules_including_dst(tz):
    zone = ZoneInfo(tz)
    stamps = [
        "2024-03-10 02:30:00,000",  # skipped hour in New York
        "2024-11-03 01:30:00,500",  # repeated hour in New York
        "2024-03-31 02:30:00,000",  # skipped hour in Berlin
        "2024-10-27 02:30:00,250",  # repeated hour in Berlin
        "2024-07-01 12:00:00.123456",
        "2024-07-01T12:00:00,7",
    ]
    text = "".join(f"{s} INFO step={i} loss=1.0\n" for i, s in enumerate(stamps))
    fp = trainer.parse(text, ParseContext(path="t", tz=tz))
    want = [local_to_utc_us(dt.datetime.fromisoformat(s.replace(",", ".")), zone)
            for s in stamps]
    assert [e.ts for e in fp.events] == want
    assert {e.ts_quality for e in fp.events} == {"assumed_tz"}


def test_many_steps_first_last_and_interleaved_signals():
    n = 5000
    rows = [f"2024-07-01 00:{(i // 60) % 60:02d}:{i % 60:02d},000 INFO step={i} loss=2.0"
            for i in range(n)]
    rows.insert(2500, "2024-07-01 00:41:40,000 ERROR non-finite loss (nan) at step 2500")
    fp = trainer.parse("\n".join(rows) + "\n", CTX)
    check_accounting(fp)
    steps = [e.attrs["step"] for e in fp.events if e.kind == "train_step"]
    assert steps == list(range(n))
    assert [e.line_no for e in fp.events if e.kind == "nonfinite_loss"] == [2501]
    assert fp.event_lines == n + 1


def _sample() -> str:
    return "\n".join(c[1] for c in LINES) + "\n" + TRACEBACK


@pytest.mark.parametrize("name,text", [
    ("empty", ""),
    ("blank", "\n\n"),
    ("lf", _sample()),
    ("crlf", _sample().replace("\n", "\r\n")),
    ("nul_fffd", _sample().replace("INFO", "IN\x00FO").replace("loss=1.0", "loss=1.0\ufffd")),
    ("truncated", _sample()[:-17]),
    ("noise", "\x00\ufffd\r\n" * 40),
    ("no_stamps", "step=1 loss=2\nTraceback (most recent call last):\nValueError: x\n"),
])
def test_accounting_on_dirty_input(name, text):
    fp = trainer.parse(text, CTX)
    check_accounting(fp)
    assert fp.rejects == []


def test_unstamped_lines_are_untimed_or_inherited():
    fp = trainer.parse("step=1 loss=2\n2024-07-01 00:00:00,000 INFO x\nstep=2 loss=3\n", CTX)
    assert [(e.attrs["step"], e.ts_quality) for e in fp.events] == [(1, "untimed"),
                                                                     (2, "inherited")]


def test_crlf_same_as_lf():
    def strip(fp):
        return [(e.kind, e.line_no, e.line_end, e.ts, e.attrs, e.message) for e in fp.events]

    assert strip(trainer.parse(_sample(), CTX)) == strip(
        trainer.parse(_sample().replace("\n", "\r\n"), CTX))


@pytest.mark.parametrize("msg", [
    "checkpoint saved step=69304 path=/ckpt/llama3-405b/step_0069304 seconds=43.3",
    "Non-finite loss detected at step 12 on rank 3",
    "found NaN in gradients at iteration 7",
    "grad_norm = -inf at step 9",
    "Gradient is INF",
    "nan loss at step 4",
    "NONFINITE values in loss",
    "weight checksum mismatch between ranks 0 and 5 at step 88",
    "MISMATCHED replica hashes",
    "parameters do not match across replicas",
    "replica hash inconsistent at step 3",
    "grad norm differs on rank 2",
    "params diverged after step 10",
    "checksum not equal",
    "che\u212aksum mismatch at step 5",  # KELVIN SIGN: re.I reads it as k
    "\u017ftep 3: lo\u017f\u017f is nan",  # LONG S: re.I reads it as s
    "ERROR something else failed at step 2",
    "CRITICAL node: gpu-07. lost",
    "checkpoint written to /ckpt/x in 12.5 s",
])
def test_classify_pre_checks_change_nothing(msg, monkeypatch):
    """The literal pre-checks of ``classify`` only skip searches that would fail: with
    them every candidate line is classified as by the searches alone."""
    line = f"2024-07-01 11:59:00,004 INFO {msg}"
    got = trainer.classify(line)
    monkeypatch.setattr(trainer, "_may_match", lambda low, needles: True)
    assert got == trainer.classify(line)
