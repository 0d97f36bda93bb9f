"""Job logs: torchrun output of one host's ranks (NCCL, PyTorch c10d, elastic, Slurm).

Shape (see ``docs/corpus.md``)::

    2024-07-01T12:00:00.123456Z node0042:2231:2290 [3] NCCL INFO Bootstrap : Using eth0:10.1.2.42<0>
    2024-07-01T12:10:00.523456Z [rank27]:[E701 12:10:00.523 ProcessGroupNCCL.cpp:632] [Rank 27] ...
    [rank3]:   File "/train.py", line 10, in <module>         (no stamp: inherits the time above)

Speed: a real corpus holds about a million of these files, nearly all lines routine. The
lines (with :func:`parse_many`, those of a whole batch of files) become one polars Series
and a single vectorized ``str.contains`` of :data:`CANDIDATE_RE` picks the few lines
worth reading; Python runs on those only. A
candidate without a stamp of its own looks back to the nearest stamped line (each line is
looked at most once per file), so inherited times never cost a pass over every line.

Rules are data: :data:`RULES` is an ordered table of ``(rule_id, kind, pattern)``; the
first rule whose pattern matches a line decides its kind (a traceback is handled apart,
as a block). Lines inside a traceback may also give their own event (the exception line
``RuntimeError: CUDA error: ...`` is both part of the ``traceback`` event and a
``cuda_error``); indented traceback body lines never do.

Job logs never reject a line: anything that is not a signal is routine output.
"""

from __future__ import annotations

import functools
import re
import signal as _signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import joblog_lanes, jobout
from faultline.pipeline.parsers.jobclock import Clock, ForwardClock
from faultline.pipeline.parsers.kernel_messages import literal_needles
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, rank_of
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range, parse_iso

MESSAGE_LIMIT = 4096  # characters of an event's message kept
TRACEBACK_MAX_LINES = 5000  # a traceback longer than this is cut (and flagged)
FOREIGN_RUN_LIMIT = 500  # this many lines of other streams in a row end a traceback

# --- line prefixes ---------------------------------------------------------------------

# The collector's stamp: ISO-8601 with a zone (``Z``); zone-less stamps read in ctx.tz.
STAMP_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)(?: |\t|$)"
)
# torchrun/PyTorch rank prefixes: ``[rank3]:`` (c10d) and ``[default3]:`` (torchrun --tee).
RANK_PREFIX_RE = re.compile(r"^\[(rank|default)(\d+)\]:\s?")
# NCCL >= 2.26 stamps its WARN lines itself (zone-less, seconds).
NCCL_STAMP_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\] ")
# ``host:pid:tid [cudaDev]`` that opens every NCCL debug line.
NCCL_PREFIX_RE = re.compile(r"(?:^|\s)([A-Za-z0-9][\w.\-]*):(\d+):(\d+) \[(\d+)\] ")
# A cheap necessary condition of NCCL_PREFIX_RE (its tail): most lines fail it fast.
_NCCL_PREFIX_TAIL = re.compile(r":\d+:\d+ \[\d+\] ")
# ``[Rank 27]``, ``[PG 0 Rank 1]``, ``[PG 0 (default_pg) Rank 1]``, ``[PG ID 2 PG GUID 3 Rank 3]``.
PG_RANK_RE = re.compile(r"\[(?:PG (?:ID )?(\w+)[^\]]*?)?\bRank (\d+)\]")

# --- candidate selection -----------------------------------------------------------------

# One union regex (Rust ``regex`` syntax, also valid Python) for the vectorized pass:
# every rule below and the traceback opener must be reachable through it.
CANDIDATE_TRIGGERS: tuple[str, ...] = (
    r"NCCL WARN",
    r"Bootstrap ?: Using",
    r"Got completion from peer",
    r"Got async event",
    r"nccl[A-Z][a-zA-Z]*Error|ncclInvalidUsage",
    r"remote process exited or there was a network error",
    r"unhandled (?:system|cuda) error",
    r"Cuda failure",
    r"NCCL error",
    r"Watchdog caught collective operation timeout",
    r"detected by watchdog at work",
    r"Timeout at NCCL work",
    r"Heartbeat monitor timed out",
    r"watchdog got stuck",
    r"CUDA error",
    r"uncorrectable ECC error",
    r"unspecified launch failure",
    r"CUDA out of memory",
    r"Traceback \(most recent call last\)",
    r"exitcode",
    r"ChildFailedError",
    r"Signal \d+ \(SIG",
    r"srun: error:",
    r"\*\*\* (?:JOB|STEP) ",
)
CANDIDATE_RE = "|".join(f"(?:{t})" for t in CANDIDATE_TRIGGERS)

TRACEBACK_OPEN = "Traceback (most recent call last)"


# Below this many lines Python's ``re`` beats a polars call (whose fixed cost is ~50 us).
SMALL_FILE_LINES = 64


@functools.lru_cache(maxsize=16)
def _py_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def candidate_indices(lines: list[str], pattern: str) -> list[int]:
    """0-based indices of the lines matching ``pattern``: one vectorized polars pass
    (tiny files, below :data:`SMALL_FILE_LINES`, use the same regex in Python)."""
    if len(lines) < SMALL_FILE_LINES:
        search = _py_regex(pattern).search
        return [i for i, ln in enumerate(lines) if search(ln)]
    mask = pl.Series("line", lines, dtype=pl.String).str.contains(pattern)
    return mask.arg_true().to_list()


def cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the rule table ---------------------------------------------------------------------

# (rule_id, kind, pattern searched in the line's content). Order matters: first match wins.
RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (rid, kind, re.compile(pat))
    for rid, kind, pat in (
        ("nccl.ib_completion", "nccl_ib_error", r"Got completion from peer"),
        ("nccl.ib_async", "nccl_async_error", r"Got async event"),
        ("c10d.watchdog_timeout", "nccl_watchdog",
         r"Watchdog caught collective operation timeout"),
        ("c10d.watchdog_progress", "nccl_watchdog_progress",
         r"(?:detected by watchdog at work|Timeout at NCCL work)\s*:?\s*-?\d+"),
        ("c10d.heartbeat", "nccl_heartbeat",
         r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"),
        ("slurm.job_cancelled", "job_cancelled",
         r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT"),
        ("slurm.node_failure", "job_cancelled", r"srun: error: Node failure on"),
        ("elastic.failed", "process_exit", r"failed \(exitcode: -?\d+\)"),
        ("elastic.summary_exitcode", "process_exit", r"^\s*exitcode\s*: -?\d+"),
        ("elastic.signal", "process_exit", r"Signal \d+ \(SIG\w+\) received by PID"),
        ("elastic.child_failed", "process_exit", r"ChildFailedError"),
        ("srun.task_exit", "process_exit",
         r"srun: error: \S+: tasks? [\d,\-\[\]]+: (?:Exited with exit code|Killed|Aborted"
         r"|Segmentation fault|Terminated|Bus error)"),
        ("nccl.cuda_failure", "nccl_error", r"Cuda failure"),
        ("cuda.error", "cuda_error",
         r"CUDA error|uncorrectable ECC error encountered|unspecified launch failure"
         r"|CUDA out of memory"),
        ("nccl.error", "nccl_error",
         r"nccl[A-Z][a-zA-Z]*Error|ncclInvalidUsage"
         r"|remote process exited or there was a network error"
         r"|unhandled (?:system|cuda) error|NCCL error"),
        ("nccl.warn", "nccl_warn", r"NCCL WARN"),
        ("nccl.bootstrap", "nccl_bootstrap", r"NCCL INFO Bootstrap ?: Using"),
    )
)


# --- one line's structure -----------------------------------------------------------------


@dataclass(slots=True)
class LineInfo:
    """What a job-log line's prefixes say, and the content that follows them."""

    stamp: str | None  # the collector's timestamp text
    content: str  # the line after the collector stamp (rank/NCCL prefixes kept)
    body: str  # content after the label and rank prefix(es): what a traceback sees
    rank: int | None = None
    rank_key: str | None = None  # "rank3" / "default3": which stream the line belongs to
    nccl_stamp: str | None = None
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    cuda_dev: int | None = None
    label: str | None = None  # ``srun --label``'s task number (labelled files only)


def line_info(line: str, labelled: bool = False) -> LineInfo:
    """Split a job-log line into its prefixes (collector stamp, ``srun --label`` task
    label when the file is ``labelled``, rank, NCCL) and content."""
    m = STAMP_RE.match(line)
    if m:
        stamp: str | None = m.group(1)
        content = line[m.end():]
    else:
        stamp, content = None, line
    body = content
    label = None
    if labelled:
        label, body = jobout.split_label(body)
    rank = rank_key = None
    for _ in range(2):  # ``[default3]:[rank3]:`` may stack
        if not body.startswith(("[rank", "[default")):  # what RANK_PREFIX_RE opens with
            break
        rm = RANK_PREFIX_RE.match(body)
        if not rm:
            break
        if rank_key is None:
            rank_key = rm.group(1) + rm.group(2)
        rank = rank_of(rm.group(2))
        body = body[rm.end():]
    info = LineInfo(stamp=stamp, content=content, body=body, rank=rank, rank_key=rank_key,
                    label=label)
    sm = NCCL_STAMP_RE.match(body) if body[1:2].isdecimal() else None  # ``[2025-...``
    if sm:
        info.nccl_stamp = sm.group(1)
    nm = NCCL_PREFIX_RE.search(body, 0, 400) if _NCCL_PREFIX_TAIL.search(body, 0, 400) else None
    if nm:
        info.host = nm.group(1)
        info.pid, info.tid, info.cuda_dev = int(nm.group(2)), int(nm.group(3)), int(nm.group(4))
    if info.rank is None and "Rank " in body:
        pm = PG_RANK_RE.search(body)
        if pm:
            info.rank = rank_of(pm.group(2))
    return info


# --- attribute extraction per kind ----------------------------------------------------------

# ibv_wc_status (libibverbs verbs.h): the completion status NCCL prints as a number.
IBV_WC_STATUS = {
    0: "IBV_WC_SUCCESS", 1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR",
    3: "IBV_WC_LOC_EEC_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR", 5: "IBV_WC_WR_FLUSH_ERR",
    6: "IBV_WC_MW_BIND_ERR", 7: "IBV_WC_BAD_RESP_ERR", 8: "IBV_WC_LOC_ACCESS_ERR",
    9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR",
    12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR", 14: "IBV_WC_LOC_RDD_VIOL_ERR",
    15: "IBV_WC_REM_INV_RD_REQ_ERR", 16: "IBV_WC_REM_ABORT_ERR", 17: "IBV_WC_INV_EECN_ERR",
    18: "IBV_WC_INV_EEC_STATE_ERR", 19: "IBV_WC_FATAL_ERR", 20: "IBV_WC_RESP_TIMEOUT_ERR",
    21: "IBV_WC_GENERAL_ERR",
}

_IB_PEER = re.compile(r"from peer ([^\s<]+?)(?:<(\d+)>)?(?:\s|$)")
_IB_STATUS = re.compile(r"with (?:error |status=)(?:(IBV_\w+)\()?(\d+)\)?")
_IB_OPCODE = re.compile(r"opcode[= ](\d+)")
_IB_LEN = re.compile(r"\blen[= ](\d+)")
_IB_VENDOR = re.compile(r"vendor[ _]err[= ]?(\d+)")
_IB_DIR = re.compile(r"\((Send|Recv|RDMA_WRITE|RDMA_READ|Flush)\)")
_IB_LGID = re.compile(r"localGid\s*(\S+)")
_IB_RGID = re.compile(r"remoteGids?\s*(\S+)")
_IB_HCA = re.compile(r"\bhca (\S+)")
_ASYNC = re.compile(r"(?:(\S+):(\d+) )?Got async event\s*:\s*(.*?)\s*$")
_WORKNCCL = re.compile(r"WorkNCCL\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
_KV = re.compile(r"(\w+(?:\(ms\))?)=([^,\s)]+)")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_PROGRESS = re.compile(
    r"(detected by watchdog at work|Timeout at NCCL work)\s*:?\s*(-?\d+)"
    r"(?:,\s*last enqueued NCCL work:\s*(-?\d+))?(?:,\s*last completed NCCL work:\s*(-?\d+))?"
)
_STUCK = re.compile(r"stuck for (\d+) seconds")
_PG = re.compile(r"\[PG (?:ID )?(\w+)")
_CANCELLED = re.compile(
    r"\*\*\* (JOB|STEP) (\S+) (?:ON (\S+) )?CANCELLED AT (\S+)"
    r"(?: DUE (?:TO|to) ([^*,]*[^*,\s]))?(?:,|\s*\*\*\*|$)"
)
_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
_ELASTIC_FAILED = re.compile(
    r"failed \(exitcode: (-?\d+)\)(?: local_rank: (\d+))?(?: \(pid: (\d+)\))?"
    r"(?: of binary: (\S+))?"
)
_SUMMARY_EXIT = re.compile(r"exitcode\s*: (-?\d+)(?: \(pid: (\d+)\))?")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)")
_SRUN_TASK = re.compile(
    r"srun: error: (\S+): tasks? ([\d,\-\[\]]+): (Exited with exit code (\d+)|[A-Z][\w ]+)"
)
_CUDA_ERR = re.compile(r"CUDA error: ([^.\n]*?)(?:\s*$|\.|\n| CUDA kernel errors)")
_CUDA_FAIL = re.compile(r"Cuda failure (?:(\d+) )?'([^']*)'")
_NCCL_RESULT = re.compile(r"\b(nccl[A-Z][a-zA-Z]*Error|ncclInvalidUsage)\b")
_NCCL_TEXT = (
    ("remote process exited or there was a network error", "ncclRemoteError"),
    ("unhandled system error", "ncclSystemError"),
    ("unhandled cuda error", "ncclUnhandledCudaError"),
    ("internal error", "ncclInternalError"),
    ("invalid usage", "ncclInvalidUsage"),
)
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (\w[\w.\-]*):(\S+?)<(\d+)>")
_NCCL_WARN_MSG = re.compile(r"NCCL WARN (.*)$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*: (\d+)(?: \(local_rank: (\d+)\))?")
_SUMMARY_HOST = re.compile(r"^\s*host\s*: (\S+)")


def _signal_name(exitcode: int) -> str | None:
    if exitcode >= 0:
        return None
    try:
        return _signal.Signals(-exitcode).name
    except ValueError:
        return None


def _int(s: str | None) -> int | None:
    return int(s) if s is not None and s.lstrip("-").isdecimal() else None


@dataclass(slots=True)
class Hit:
    """One signal found in a line: its kind and what the line says about it."""

    rule_id: str
    kind: str
    attrs: dict = field(default_factory=dict)
    host: str | None = None
    rank: int | None = None
    device: str | None = None
    job_id: str | None = None


def _attrs_ib(body: str, hit: Hit) -> None:
    a = hit.attrs
    if m := _IB_PEER.search(body):
        a["peer"] = m.group(1)
        if m.group(2):
            a["peer_port"] = int(m.group(2))
    if m := _IB_STATUS.search(body):
        a["status"] = int(m.group(2))
        a["status_name"] = m.group(1) or IBV_WC_STATUS.get(int(m.group(2)))
    for key, rx in (("opcode", _IB_OPCODE), ("len", _IB_LEN), ("vendor_err", _IB_VENDOR)):
        if m := rx.search(body):
            a[key] = int(m.group(1))
    if m := _IB_DIR.search(body):
        a["direction"] = m.group(1)
    if m := _IB_LGID.search(body):
        a["local_gid"] = m.group(1)
    if m := _IB_RGID.search(body):
        a["remote_gid"] = m.group(1)
    if m := _IB_HCA.search(body):
        a["hca"] = m.group(1)
        hit.device = m.group(1)


def _attrs_async(body: str, hit: Hit) -> None:
    if m := _ASYNC.search(body):
        hit.attrs["event"] = m.group(3)
        if m.group(1):
            hit.attrs["hca"] = m.group(1)
            hit.attrs["port"] = int(m.group(2))
            hit.device = m.group(1)


def _attrs_watchdog(body: str, hit: Hit) -> None:
    a = hit.attrs
    if m := _WORKNCCL.search(body):
        kv = dict(_KV.findall(m.group(1)))
        if "SeqNum" in kv:
            a["seq_num"] = _int(kv["SeqNum"])
        if "OpType" in kv:
            a["op_type"] = kv["OpType"]
        for src, dst in (("NumelIn", "numel_in"), ("NumelOut", "numel_out"),
                         ("Timeout(ms)", "timeout_ms")):
            if src in kv:
                a[dst] = _int(kv[src])
    if m := _RAN_FOR.search(body):
        a["ran_ms"] = int(m.group(1))
    if m := _PG.search(body):
        a["pg"] = m.group(1)


def _attrs_progress(body: str, hit: Hit) -> None:
    # _PROGRESS opens with one of two literals: search from the first of them
    starts = [i for i in (body.find("detected by watchdog at work"),
                          body.find("Timeout at NCCL work")) if i >= 0]
    if starts and (m := _PROGRESS.search(body, min(starts))):
        hit.attrs["what"] = "timeout" if m.group(1).startswith("Timeout") else "exception"
        hit.attrs["work"] = int(m.group(2))
        if m.group(3) is not None:
            hit.attrs["last_enqueued"] = int(m.group(3))
        if m.group(4) is not None:
            hit.attrs["last_completed"] = int(m.group(4))
    if m := _PG.search(body):
        hit.attrs["pg"] = m.group(1)


def _attrs_heartbeat(body: str, hit: Hit) -> None:
    if m := _STUCK.search(body):
        hit.attrs["stuck_seconds"] = int(m.group(1))
    hit.attrs["what"] = "heartbeat_timeout" if "Heartbeat" in body else "watchdog_stuck"


def _attrs_cancelled(body: str, hit: Hit, ctx: ParseContext) -> None:
    if m := _CANCELLED.search(body):
        hit.attrs["scope"] = m.group(1).lower()
        hit.attrs["slurm_job"] = m.group(2)
        if m.group(3):
            hit.host = m.group(3)
        when = parse_iso(m.group(4), ctx.zone)
        hit.attrs["cancelled_at"] = when[0] if when and in_range(when[0]) else None
        hit.attrs["due_to"] = m.group(5)
    elif m := _NODE_FAILURE.search(body):
        hit.host = m.group(1)
        hit.attrs["due_to"] = "NODE FAILURE"
        hit.attrs["scope"] = "step"


def _attrs_exit(body: str, hit: Hit) -> None:
    a = hit.attrs
    code: int | None = None
    if hit.rule_id == "elastic.failed" and (m := _ELASTIC_FAILED.search(body)):
        code = int(m.group(1))
        if m.group(2):
            a["local_rank"] = int(m.group(2))
        if m.group(3):
            a["pid"] = int(m.group(3))
        if m.group(4):
            a["binary"] = m.group(4)
    elif hit.rule_id == "elastic.summary_exitcode" and (m := _SUMMARY_EXIT.search(body)):
        code = int(m.group(1))
        if m.group(2):
            a["pid"] = int(m.group(2))
    elif hit.rule_id == "elastic.signal" and (m := _SIGNAL.search(body)):
        code = -int(m.group(1))
        a["signal"] = m.group(2)
        a["pid"] = int(m.group(3))
    elif hit.rule_id == "srun.task_exit" and (m := _SRUN_TASK.search(body)):
        hit.host = m.group(1)
        a["tasks"] = m.group(2)
        if m.group(4):
            code = int(m.group(4))
        else:
            a["how"] = m.group(3).strip()
    elif hit.rule_id == "elastic.child_failed":
        a["how"] = "ChildFailedError"
    if code is not None:
        a["exitcode"] = code
        if "signal" not in a and (name := _signal_name(code)):
            a["signal"] = name


def _attrs_cuda(body: str, hit: Hit) -> None:
    if m := _CUDA_ERR.search(body):
        hit.attrs["error"] = m.group(1).strip()
    elif "CUDA out of memory" in body:
        hit.attrs["error"] = "out of memory"
    elif "uncorrectable ECC error encountered" in body:
        hit.attrs["error"] = "uncorrectable ECC error encountered"
    elif "unspecified launch failure" in body:
        hit.attrs["error"] = "unspecified launch failure"


def _attrs_nccl_error(body: str, hit: Hit) -> None:
    if m := _NCCL_RESULT.search(body):
        hit.attrs["result"] = m.group(1)
    else:
        low = body.lower()
        for text, result in _NCCL_TEXT:
            if text in low:
                hit.attrs["result"] = result
                break
    if m := _CUDA_FAIL.search(body):
        hit.attrs["cuda_error"] = m.group(2)
        hit.attrs.setdefault("result", "ncclUnhandledCudaError")


def _attrs_warn(body: str, hit: Hit) -> None:
    if m := _NCCL_WARN_MSG.search(body):
        hit.attrs["text"] = m.group(1).strip()


def _attrs_bootstrap(body: str, hit: Hit) -> None:
    if m := _BOOTSTRAP.search(body):
        hit.attrs["ifname"] = m.group(1)
        hit.attrs["address"] = m.group(2)


_ATTRS: dict[str, Callable[[str, Hit], None]] = {
    "nccl_ib_error": _attrs_ib,
    "nccl_async_error": _attrs_async,
    "nccl_watchdog": _attrs_watchdog,
    "nccl_watchdog_progress": _attrs_progress,
    "nccl_heartbeat": _attrs_heartbeat,
    "process_exit": _attrs_exit,
    "cuda_error": _attrs_cuda,
    "nccl_error": _attrs_nccl_error,
    "nccl_warn": _attrs_warn,
    "nccl_bootstrap": _attrs_bootstrap,
}


# Each rule with the literals one of which any line it matches contains (None: no such
# literals): the cheap test that spares most regex searches in :func:`classify`.
_RULE_CHECKS: tuple[tuple[str, str, re.Pattern[str], tuple[str, ...] | None], ...] = tuple(
    (rid, kind, rx, literal_needles(rx.pattern)) for rid, kind, rx in RULES)


def classify(info: LineInfo, ctx: ParseContext) -> Hit | None:
    """The signal in one line (first matching rule of :data:`RULES`), or None."""
    body = info.body
    for rule_id, kind, rx, needles in _RULE_CHECKS:
        if needles is not None:
            for nd in needles:
                if nd in body:
                    break
            else:
                continue
        if rx.search(body):
            hit = Hit(rule_id=rule_id, kind=kind, host=info.host, rank=info.rank,
                      attrs={"rule": rule_id})
            if kind == "job_cancelled":
                _attrs_cancelled(body, hit, ctx)
            else:
                _ATTRS[kind](body, hit)
            if info.pid is not None:
                hit.attrs["pid"] = info.pid
                hit.attrs["tid"] = info.tid
                hit.attrs["cuda_dev"] = info.cuda_dev
            return hit
    return None


# --- tracebacks -------------------------------------------------------------------------------

# The last line of a traceback: ``SomeError: message`` (dotted module path allowed).
EXC_LINE_RE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::[ \t]?(.*))?$")
_FRAME_RE = re.compile(r'^\s+File "([^"]*)", line (\d+)(?:, in (.+))?')
_CHAIN_OPENERS = (
    "During handling of the above exception",
    "The above exception was the direct cause",
    TRACEBACK_OPEN,
)


@dataclass(slots=True)
class TracebackBlock:
    """A Python traceback found from its opener: where it ends and what it raised."""

    start: int  # 0-based index of the ``Traceback`` line
    end: int  # 0-based index of its last line (the exception line when found)
    own: list[int]  # 0-based indices of the block's own lines (interleaved ones excluded)
    exc_lines: list[int]  # 0-based indices of its exception lines (chained ones too)
    exc_type: str | None
    exc_message: str | None
    chain: list[tuple[str, str | None]]  # earlier exceptions of a chained traceback
    last_frame: str | None
    truncated: bool
    text: str


def _is_body(content: str) -> bool:
    return not content.strip() or content[0] in " \t" or content.startswith(_CHAIN_OPENERS)


def collect_traceback(
    lines: list[str],
    start: int,
    split: Callable[[str], tuple[str | None, str]],
    max_lines: int = TRACEBACK_MAX_LINES,
) -> TracebackBlock:
    """Follow a traceback from its opener at ``lines[start]`` to its exception line.

    ``split(line)`` gives ``(stream_key, content)``: lines of another stream (another
    rank's ``[rankN]:`` prefix) interleaved with this one are stepped over; lines of the
    same stream are the traceback's own. Chained tracebacks (``During handling of the
    above exception ...``) stay one block; the last exception is the block's. A block
    that stops before its exception line (cut log, foreign text) is ``truncated``.
    """
    key, first = split(lines[start])
    own = [start]
    texts = [first]
    exc_lines: list[int] = []
    chain: list[tuple[str, str | None]] = []
    exc: tuple[str, str | None] | None = None
    last_frame: str | None = None
    limit = min(len(lines), start + max_lines)
    j = start + 1
    foreign = 0
    while j < limit:
        k, content = split(lines[j])
        if k != key:
            foreign += 1
            if foreign > FOREIGN_RUN_LIMIT:
                break
            j += 1
            continue
        foreign = 0
        if _is_body(content):
            if m := _FRAME_RE.match(content):
                last_frame = f"{m.group(1)}:{m.group(2)}" + (
                    f" in {m.group(3)}" if m.group(3) else "")
            own.append(j)
            texts.append(content)
            j += 1
            continue
        m = EXC_LINE_RE.match(content.rstrip())
        if m is None:
            break
        exc = (m.group(1), m.group(2))
        own.append(j)
        exc_lines.append(j)
        texts.append(content)
        nxt = _next_own(lines, j + 1, key, split, limit)
        if nxt is None or not split(lines[nxt])[1].startswith(_CHAIN_OPENERS[:2]):
            break
        chain.append(exc)
        exc = None
        j += 1
    # Blank lines at the end (a cut log) are not part of the block.
    while len(own) > 1 and not texts[-1].strip():
        own.pop()
        texts.pop()
    exc_type, exc_message = exc if exc else (None, None)
    return TracebackBlock(
        start=start, end=own[-1], own=own, exc_lines=exc_lines, exc_type=exc_type,
        exc_message=exc_message.strip() if exc_message is not None else None, chain=chain,
        last_frame=last_frame, truncated=exc is None, text="\n".join(texts),
    )


def _next_own(lines: list[str], j: int, key: str | None,
              split: Callable[[str], tuple[str | None, str]], limit: int) -> int | None:
    """Index of the next non-blank line of stream ``key`` at or after ``j``."""
    foreign = 0
    while j < limit and foreign <= FOREIGN_RUN_LIMIT:
        k, content = split(lines[j])
        if k == key:
            if content.strip():
                return j
            foreign = 0
        else:
            foreign += 1
        j += 1
    return None


def _joblog_split(line: str) -> tuple[str | None, str]:
    info = line_info(line)
    return info.rank_key, info.body


def _labelled_split(line: str) -> tuple[str | None, str]:
    """A labelled file's streams are its tasks' (and their ranks')."""
    info = line_info(line, labelled=True)
    return f"{info.label}/{info.rank_key}", info.body


# --- time ---------------------------------------------------------------------------------


def _collector_stamp(line: str) -> str | None:
    if not line[:1].isdigit():
        return None
    m = STAMP_RE.match(line)
    return m.group(1) if m else None


# --- the parser ----------------------------------------------------------------------------


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one job log (see the module docstring)."""
    return parse_many([(split_lines(text), ctx)])[0]


def parse_many(files: Sequence[tuple[list[str], ParseContext]],
               columnar: bool = False) -> list[FileParse]:
    """Parse many job logs, given as their lines: the candidate selection runs once,
    vectorized, over the lines of all of them (see :mod:`faultline.pipeline.linebatch`);
    each file's result is what :func:`parse` gives for it alone.

    The lines a fast lane takes (:mod:`...joblog_lanes`: in a collector-stamped file
    with a host of its own) become events as columns; with ``columnar`` they stay
    columns (``FileParse.columns``, what :mod:`faultline.pipeline.fileparse` stores),
    else they join ``FileParse.events`` as the objects the general path would make."""
    batch = LineBatch([lines for lines, _ in files])
    if batch.total < SMALL_FILE_LINES:
        candidates = batch.match_indices(CANDIDATE_RE, SMALL_FILE_LINES)
        return [parse_lines(lines, ctx, cand)
                for (lines, ctx), cand in zip(files, candidates, strict=True)]
    hits = batch.series.str.contains(CANDIDATE_RE).arg_true().to_numpy()
    stamped = [jobout.has_collector_stamps(lines) for lines, _ in files]
    eligible = np.array([s and ctx.host is not None
                         for s, (_, ctx) in zip(stamped, files, strict=True)], dtype=bool)
    utc = np.array([ctx.tz == "UTC" for _, ctx in files], dtype=bool)
    frame = joblog_lanes.lane_frame(batch, hits, _RULE_CHECKS, eligible, utc)
    taken = batch.starts[frame["file"].to_numpy()] + frame["row"].to_numpy()
    candidates = batch.split_indices(np.setdiff1d(hits, taken, assume_unique=True))
    out: list[FileParse] = []
    inside: dict[int, set[int]] = {}
    for k, ((lines, ctx), cand) in enumerate(zip(files, candidates, strict=True)):
        fp, in_traceback = _parse_lines(lines, ctx, cand, stamped[k])
        if in_traceback and eligible[k]:
            inside[k] = in_traceback
        out.append(fp)
    joblog_lanes.attach(frame, inside, out, [ctx for _, ctx in files], columnar)
    return out


def parse_lines(lines: list[str], ctx: ParseContext,
                candidates: Iterable[int] | None = None) -> FileParse:
    """Parse one job log's lines, every line the general (per-line) way;
    ``candidates`` are the 0-based indices of the lines matching :data:`CANDIDATE_RE`
    (computed here when not given).

    A file without collector stamps (Slurm's ``slurm-<jobid>.out``) is timed by the
    stamps its lines carry (:func:`jobout.own_stamp`); lines before the first of them
    take the job's sacct start (``inherited``, ``attrs["ts_from"] = "job_start"``).
    A file without a host of its own gets each line's host from its task label or rank
    (:class:`jobout.Who`)."""
    return _parse_lines(lines, ctx, candidates)[0]


def _parse_lines(lines: list[str], ctx: ParseContext, candidates: Iterable[int] | None,
                 stamped: bool | None = None) -> tuple[FileParse, set[int]]:
    """:func:`parse_lines`, and the lines inside the traceback blocks it found (their
    lane lines, left out of ``candidates`` by :func:`parse_many`, give no event:
    a lane line never opens a traceback, so leaving it out changes no block).

    A clock reads stamps backwards no further than its last query, so a candidate
    left out (a lane's) only makes the next one look a little further back: the
    nearest readable stamp above a line is the same either way."""
    fp = FileParse(lines=len(lines), shape="collector")
    in_traceback: set[int] = set()
    if not lines:
        return fp, in_traceback
    if candidates is None:
        candidates = candidate_indices(lines, CANDIDATE_RE)
    if stamped is None:
        stamped = jobout.has_collector_stamps(lines)
    # a collector's file is one host's: no srun labels are looked for (nor paid for)
    labelled = not stamped and jobout.is_labelled(lines)
    if not stamped:
        fp.shape = "slurm_out" if labelled else "unstamped"
        clock = ForwardClock(lines, ctx, functools.partial(jobout.own_stamp,
                                                           labelled=labelled, ctx=ctx))
    else:
        clock = Clock(lines, ctx, _collector_stamp)
    split = _labelled_split if labelled else _joblog_split
    who = jobout.Who(lines, labelled) if ctx.host is None else None
    start = ctx.job_window[0] if ctx.job_window and in_range(ctx.job_window[0]) else None
    events = fp.events
    for i in candidates:
        if i in in_traceback:
            continue
        info = line_info(lines[i], labelled)
        # info.stamp is what _collector_stamp gives (a STAMP_RE match starts with a digit)
        ts, quality = clock.at(i, own=info.nccl_stamp,
                               stamp=info.stamp if stamped else clock.stamp(lines[i]))
        from_start = ts is None and start is not None
        if from_start:
            ts, quality = start, "inherited"
        host, place = who.place(info.label, info.rank) if who else (None, None)
        if TRACEBACK_OPEN in info.body:
            block = collect_traceback(lines, i, split)
            in_traceback.update(set(block.own) - set(block.exc_lines))
            ev = traceback_event(block, ts, quality, info.rank, ctx.host or host, ctx.job_id)
        else:
            hit = classify(info, ctx)
            if hit is None:
                continue
            if hit.rule_id == "elastic.summary_exitcode":
                _summary_context(lines, i, hit, labelled)
            if place is None and who and hit.rank is not None:
                place = who.ranks.get(hit.rank)
            ev = ParsedEvent(
                line_no=i + 1, kind=hit.kind, message=cap(info.content), ts=ts,
                ts_quality=quality, host=hit.host or ctx.host or host
                or (place.host if place else None),
                device=hit.device or (place.device if place else None),
                job_id=ctx.job_id, rank=hit.rank, attrs=hit.attrs,
            )
        if from_start:
            ev.attrs["ts_from"] = "job_start"
        if place is not None and ev.rank is not None:
            ev.attrs.setdefault("cuda_dev", place.cuda_dev)
            if place.local_rank is not None:
                ev.attrs.setdefault("local_rank", place.local_rank)
        events.append(ev)
    return fp, in_traceback


def _summary_context(lines: list[str], i: int, hit: Hit, labelled: bool = False) -> None:
    """torchrun's failure summary names rank and host a few lines above ``exitcode``."""
    for j in range(i - 1, max(-1, i - 6), -1):
        body = line_info(lines[j], labelled).body
        if hit.rank is None and (m := _SUMMARY_RANK.match(body)):
            hit.rank = rank_of(m.group(1))
            if m.group(2):
                hit.attrs["local_rank"] = int(m.group(2))
        elif hit.host is None and (m := _SUMMARY_HOST.match(body)):
            hit.host = m.group(1)


def traceback_event(block: TracebackBlock, ts: int | None, quality: str, rank: int | None,
                    host: str | None, job_id: str | None) -> ParsedEvent:
    """The one ``traceback`` event of a block (lines start..end)."""
    attrs: dict = {"exc_type": block.exc_type, "exc_message": block.exc_message}
    if block.chain:
        attrs["chain"] = [{"exc_type": t, "exc_message": m} for t, m in block.chain]
    if block.last_frame:
        attrs["last_frame"] = block.last_frame
    if block.truncated:
        attrs["truncated"] = True
    return ParsedEvent(
        line_no=block.start + 1, line_end=block.end + 1, kind="traceback",
        message=cap(block.text), ts=ts, ts_quality=quality, host=host, job_id=job_id,
        rank=rank, attrs=attrs,
    )


def parse_line(line: str, ctx: ParseContext | None = None) -> list[ParsedEvent]:
    """The events of a single line read on its own (for table-driven tests)."""
    return parse(line, ctx or ParseContext(path="<line>")).events


def kinds(events: Iterable[ParsedEvent]) -> list[str]:
    return [e.kind for e in events]
