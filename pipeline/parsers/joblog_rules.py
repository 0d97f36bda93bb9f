"""Job-log rules: which lines are candidates, which signal a line holds, and its attrs.

Rules are data: :data:`RULES` is an ordered table of ``(rule_id, kind, pattern)``; the
first rule whose pattern matches a line decides its kind (:func:`classify`), and each
kind's ``_attrs_*`` reads what the line says about it. :data:`CANDIDATE_RE` is the
union every rule (and the traceback opener) is reachable through: the one vectorized
pass :mod:`faultline.pipeline.parsers.joblog` runs over a batch's lines.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Callable
from dataclasses import dataclass, field

from faultline.pipeline.parsers.joblog_lines import LineInfo, line_info
from faultline.pipeline.parsers.kernel_messages import literal_needles
from faultline.pipeline.records import ParseContext, rank_of
from faultline.pipeline.timeutil import in_range, parse_iso

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
# slurmstepd's cancellation: ``*** JOB 12 ON gpu-1 CANCELLED AT <time> DUE TO <REASON> ***``
# (Slurm's src/slurmd/slurmstepd/req.c); older releases named the host last, in lower case:
# ``*** JOB 12 CANCELLED AT <time> DUE TO TIME LIMIT on gpu-1 ***`` and
# ``*** JOB 12 CANCELLED AT <time> *** on gpu-1``. The reason is matched lazily so that
# the old form's `` on <host>`` is the host, not part of the reason (today's reasons are
# upper case and never hold `` on ``).
_CANCELLED = re.compile(
    r"\*\*\* (JOB|STEP) (\S+) (?:ON (\S+) )?CANCELLED AT (\S+)"
    r"(?: DUE (?:TO|to) ([^*,]*?[^*,\s]))?(?: on (\S+?))?"
    r"(?:,|\s*\*\*\*(?: on (\S+))?|$)"
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
        if host := m.group(3) or m.group(6) or m.group(7):
            hit.host = host
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
