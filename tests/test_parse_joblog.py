"""Job-log parser (torchrun output): real-format lines, table-driven, plus accounting."""

from __future__ import annotations

import re

import pytest
from accounting import check_accounting, us

from faultline.pipeline.parsers import joblog
from faultline.pipeline.records import ParseContext
from faultline.schemas.event_kinds import EVENT_KINDS

CTX = ParseContext(path="jobs/81234/node0007.log", host="node0007", job_id="81234")


T0 = "2024-07-01T12:00:03.000001Z"

# (id, line, kind, attrs subset, host, rank, device)
LINES = [
    ("bootstrap",
     "2024-07-01T12:00:00.123456Z node0042:2231:2290 [3] NCCL INFO Bootstrap : Using "
     "eth0:10.1.2.42<0>",
     "nccl_bootstrap", {"ifname": "eth0", "address": "10.1.2.42", "pid": 2231, "tid": 2290,
                        "cuda_dev": 3}, "node0042", None, None),
    ("bootstrap_nospace_fqdn",
     f"{T0} gpu-a1.cluster.local:77:78 [0] NCCL INFO Bootstrap: Using ib0:10.9.0.5<0>",
     "nccl_bootstrap", {"ifname": "ib0", "address": "10.9.0.5"}, "gpu-a1.cluster.local",
     None, None),
    ("ib_2_19",
     f"{T0} node0042:2231:2302 [3] NCCL WARN NET/IB : Got completion from peer "
     "10.1.4.17<51234> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid "
     "::ffff:10.1.2.42 remoteGids ::ffff:10.1.4.17",
     "nccl_ib_error", {"peer": "10.1.4.17", "peer_port": 51234, "status": 12,
                       "status_name": "IBV_WC_RETRY_EXC_ERR", "opcode": 0, "vendor_err": 129,
                       "direction": "Send", "local_gid": "::ffff:10.1.2.42",
                       "remote_gid": "::ffff:10.1.4.17", "pid": 2231, "tid": 2302,
                       "cuda_dev": 3}, "node0042", None, None),
    ("ib_2_17",
     f"{T0} node0042:2231:2302 [3] transport/net_ib.cc:1034 NCCL WARN NET/IB : Got completion "
     "from peer 10.1.4.17<51234> with error 12, opcode 0, len 0, vendor err 129",
     "nccl_ib_error", {"peer": "10.1.4.17", "status": 12, "opcode": 0, "len": 0,
                       "vendor_err": 129}, "node0042", None, None),
    ("ib_2_23_hca",
     f"{T0} node0042:2231:2302 [3] NCCL WARN NET/IB: Got completion from peer "
     "10.1.4.17<51234> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid "
     "::ffff:10.1.2.42 remoteGids::ffff:10.1.4.17 hca mlx5_3",
     "nccl_ib_error", {"status": 12, "opcode": 1, "hca": "mlx5_3",
                       "remote_gid": "::ffff:10.1.4.17"}, "node0042", None, "mlx5_3"),
    ("ib_master_named_status",
     f"{T0} node0042:2231:2302 [3] NCCL WARN NET/IB: Got completion from peer "
     "10.1.4.17<51234> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) "
     "vendor_err=129 hca mlx5_3",
     "nccl_ib_error", {"status": 12, "status_name": "IBV_WC_RETRY_EXC_ERR", "vendor_err": 129,
                       "hca": "mlx5_3"}, "node0042", None, "mlx5_3"),
    ("ib_nccl_stamp",
     "[2024-07-01 12:00:03] node0042:2231:2302 [3] net_ib.cc:1696 NCCL WARN NET/IB : Got "
     "completion from peer 10.1.4.17<51234> with status=13 opcode=0 len=0 vendor err 136 (Recv)",
     "nccl_ib_error", {"status": 13, "status_name": "IBV_WC_RNR_RETRY_EXC_ERR",
                       "vendor_err": 136, "direction": "Recv"}, "node0042", None, None),
    ("async_old",
     f"{T0} node0042:2231:2302 [3] NCCL WARN NET/IB : Got async event : local catastrophic error",
     "nccl_async_error", {"event": "local catastrophic error"}, "node0042", None, None),
    ("async_new",
     f"{T0} node0042:2231:2302 [3] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error",
     "nccl_async_error", {"event": "port error", "hca": "mlx5_0", "port": 1}, "node0042",
     None, "mlx5_0"),
    ("nccl_warn_generic",
     f"{T0} node0042:2231:2302 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection "
     "closed by remote peer node0043<44238>",
     "nccl_warn", {"text": "socketProgress: Connection closed by remote peer node0043<44238>",
                   "pid": 2231, "tid": 2302, "cuda_dev": 3}, "node0042", None, None),
    ("nccl_warn_stamped",
     "[2024-07-01 12:00:03] node0042:2231:2302 [3] proxy.cc:1493 (proxyProgress) NCCL WARN "
     "[Service thread] Error encountered progressing operation",
     "nccl_warn", {"cuda_dev": 3}, "node0042", None, None),
    ("nccl_remote_error",
     f"{T0} [rank5]:   ncclRemoteError: A call failed possibly due to a network error or a "
     "remote process exiting prematurely.",
     "nccl_error", {"result": "ncclRemoteError"}, "node0007", 5, None),
    ("nccl_remote_text",
     f"{T0} node0042:2231:2302 [3] NCCL WARN remote process exited or there was a network error",
     "nccl_error", {"result": "ncclRemoteError", "pid": 2231}, "node0042", None, None),
    ("nccl_system_error",
     f"{T0} RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
     "nccl_error", {"result": "ncclSystemError"}, "node0007", None, None),
    ("nccl_internal",
     f"{T0} ncclInternalError: Internal check failed.",
     "nccl_error", {"result": "ncclInternalError"}, "node0007", None, None),
    ("nccl_cuda_failure",
     f"{T0} node0042:2231:2302 [3] enqueue.cc:1451 NCCL WARN Cuda failure 'an illegal memory "
     "access was encountered'",
     "nccl_error", {"cuda_error": "an illegal memory access was encountered"}, "node0042",
     None, None),
    ("watchdog",
     "2024-07-01T12:10:00.523456Z [rank27]:[E701 12:10:00.523400000 ProcessGroupNCCL.cpp:632] "
     "[Rank 27] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=482113, "
     "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600081 "
     "milliseconds before timing out.",
     "nccl_watchdog", {"seq_num": 482113, "op_type": "ALLREDUCE", "numel_in": 262144,
                       "numel_out": 262144, "timeout_ms": 600000, "ran_ms": 600081},
     "node0007", 27, None),
    ("watchdog_pg",
     f"{T0} [rank1]:[E1003 18:37:01.833 ProcessGroupNCCL.cpp:607] [PG 0 Rank 1] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, "
     "NumelOut=131072000, Timeout(ms)=1800000) ran for 1800100 milliseconds before timing out.",
     "nccl_watchdog", {"seq_num": 1, "op_type": "BROADCAST", "timeout_ms": 1800000,
                       "ran_ms": 1800100, "pg": "0"}, "node0007", 1, None),
    ("watchdog_pg_named_no_prefix",
     f"{T0} [E1003 18:37:01.833 ProcessGroupNCCL.cpp:607] [PG 0 (default_pg) Rank 12] Watchdog "
     "caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, "
     "NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
     "nccl_watchdog", {"seq_num": 7, "op_type": "_ALLGATHER_BASE", "timeout_ms": 600000},
     "node0007", 12, None),
    ("watchdog_pg_guid",
     f"{T0} [rank3]:[E219 08:58:32.606693321 ProcessGroupNCCL.cpp:685] [PG ID 2 PG GUID 3 Rank 3] "
     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, "
     "NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
     "nccl_watchdog", {"seq_num": 31, "ran_ms": 600012, "pg": "2"}, "node0007", 3, None),
    ("watchdog_old_no_glog_time",
     f"{T0} [rank1]:[E ProcessGroupNCCL.cpp:574] [Rank 1] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
     "ran for 600351 milliseconds before timing out.",
     "nccl_watchdog", {"seq_num": 4, "ran_ms": 600351}, "node0007", 1, None),
    ("progress_exception",
     f"{T0} [rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank "
     "1] Exception (either an error or timeout) detected by watchdog at work: 6463, last "
     "enqueued NCCL work: 6463, last completed NCCL work: 6462.",
     "nccl_watchdog_progress", {"what": "exception", "work": 6463, "last_enqueued": 6463,
                                "last_completed": 6462}, "node0007", 1, None),
    ("progress_timeout_guid",
     f"{T0} [rank3]:[E219 08:58:32.606693321 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 Rank "
     "3] Timeout at NCCL work: 31, last enqueued NCCL work: 58, last completed NCCL work: 30.",
     "nccl_watchdog_progress", {"what": "timeout", "work": 31, "last_enqueued": 58,
                                "last_completed": 30}, "node0007", 3, None),
    ("heartbeat",
     f"{T0} [rank0]:[E701 12:20:00.1 ProcessGroupNCCL.cpp:1355] [PG 0 Rank 0] Heartbeat monitor "
     "timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2",
     "nccl_heartbeat", {"what": "heartbeat_timeout"}, "node0007", 0, None),
    ("watchdog_stuck",
     f"{T0} [rank0]:[E701 12:20:00.1 ProcessGroupNCCL.cpp:1395] [PG 0 Rank 0] ProcessGroupNCCL's "
     "watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
     "collectives.",
     "nccl_heartbeat", {"what": "watchdog_stuck", "stuck_seconds": 480}, "node0007", 0, None),
    ("cuda_illegal",
     f"{T0} [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",
     "cuda_error", {"error": "an illegal memory access was encountered"}, "node0007", 3, None),
    ("cuda_ecc",
     f"{T0} [rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
     "cuda_error", {"error": "uncorrectable ECC error encountered"}, "node0007", 3, None),
    ("cuda_launch",
     f"{T0} RuntimeError: CUDA error: unspecified launch failure",
     "cuda_error", {"error": "unspecified launch failure"}, "node0007", None, None),
    ("cuda_oom",
     f"{T0} [rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 6 "
     "has a total capacity of 79.10 GiB of which 1.02 GiB is free.",
     "cuda_error", {"error": "out of memory"}, "node0007", 6, None),
    ("elastic_failed",
     f"{T0} E0701 12:10:05.123000 1234 torch/distributed/elastic/multiprocessing/api.py:869] "
     "failed (exitcode: -6) local_rank: 3 (pid: 1234) of binary: /usr/bin/python3",
     "process_exit", {"exitcode": -6, "signal": "SIGABRT", "local_rank": 3, "pid": 1234,
                      "binary": "/usr/bin/python3"}, "node0007", None, None),
    ("elastic_failed_logging",
     f"{T0} [2024-07-01 12:00:00,123] torch.distributed.elastic.multiprocessing.api: [ERROR] "
     "failed (exitcode: -9) local_rank: 0 (pid: 99) of binary: /opt/conda/bin/python",
     "process_exit", {"exitcode": -9, "signal": "SIGKILL", "local_rank": 0}, "node0007", None,
     None),
    ("elastic_signal",
     f"{T0}   traceback : Signal 6 (SIGABRT) received by PID 1234",
     "process_exit", {"exitcode": -6, "signal": "SIGABRT", "pid": 1234}, "node0007", None, None),
    ("elastic_summary_exitcode",
     f"{T0}   exitcode  : -9 (pid: 4321)",
     "process_exit", {"exitcode": -9, "signal": "SIGKILL", "pid": 4321}, "node0007", None, None),
    ("elastic_child_failed",
     f"{T0} torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
     "process_exit", {"how": "ChildFailedError"}, "node0007", None, None),
    ("srun_task_exit",
     f"{T0} srun: error: node0042: task 3: Exited with exit code 1",
     "process_exit", {"exitcode": 1, "tasks": "3"}, "node0042", None, None),
    ("srun_task_killed",
     f"{T0} srun: error: node0043: tasks 0-7: Killed",
     "process_exit", {"how": "Killed", "tasks": "0-7"}, "node0043", None, None),
    ("cancelled_node_failure",
     f"{T0} slurmstepd: error: *** JOB 1234 ON node0042 CANCELLED AT 2024-07-01T12:00:00 DUE TO "
     "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
     "job_cancelled", {"scope": "job", "slurm_job": "1234", "due_to": "NODE FAILURE",
                       "cancelled_at": us("2024-07-01T12:00:00")}, "node0042", None, None),
    ("cancelled_preemption",
     f"{T0} slurmstepd: error: *** STEP 1234.0 ON node0042 CANCELLED AT 2024-07-01T12:00:00 DUE "
     "TO PREEMPTION ***",
     "job_cancelled", {"scope": "step", "slurm_job": "1234.0", "due_to": "PREEMPTION"},
     "node0042", None, None),
    ("cancelled_time_limit",
     f"{T0} slurmstepd: error: *** JOB 1234 ON node0042 CANCELLED AT 2024-07-01T12:00:00 DUE TO "
     "TIME LIMIT ***",
     "job_cancelled", {"due_to": "TIME LIMIT"}, "node0042", None, None),
    ("cancelled_requeue",
     f"{T0} slurmstepd: error: *** JOB 1234 ON node0042 CANCELLED AT 2024-07-01T12:00:00 DUE TO "
     "JOB REQUEUE ***",
     "job_cancelled", {"due_to": "JOB REQUEUE"}, "node0042", None, None),
    ("cancelled_by_user",
     f"{T0} slurmstepd: error: *** JOB 1234 ON node0042 CANCELLED AT 2024-07-01T12:00:00 ***",
     "job_cancelled", {"due_to": None}, "node0042", None, None),
    ("srun_node_failure",
     f"{T0} srun: error: Node failure on node0042",
     "job_cancelled", {"due_to": "NODE FAILURE"}, "node0042", None, None),
]


@pytest.mark.parametrize(("line", "kind", "attrs", "host", "rank", "device"),
                         [case[1:] for case in LINES], ids=[case[0] for case in LINES])
def test_line(line, kind, attrs, host, rank, device):
    events = joblog.parse_line(line, CTX)
    assert [e.kind for e in events] == [kind]
    e = events[0]
    assert {k: e.attrs.get(k) for k in attrs} == attrs
    assert (e.host, e.rank, e.device, e.job_id) == (host, rank, device, "81234")
    assert e.line_no == e.line_end == 1
    if line.startswith("2024"):
        assert (e.ts, e.ts_quality) == (us(line.split(" ", 1)[0]), "exact")
    elif line.startswith("[2024"):  # NCCL's own zone-less stamp only
        assert (e.ts, e.ts_quality) == (us(line[1:20]), "assumed_tz")
    assert e.attrs["rule"] in {rid for rid, _, _ in joblog.RULES}


@pytest.mark.parametrize("line", [
    f"{T0} node0042:2231:2290 [3] NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/CUMEM",
    f"{T0} node0042:2231:2290 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB",
    f"{T0} node0042:2231:2290 [3] NCCL INFO comm 0x5581 rank 3 nranks 16 cudaDev 3 busId 3b000",
    f"{T0} [rank0]: iteration 182311 | lm loss 1.84 | grad norm 0.41",
    f"{T0} [rank1]:[W701 12:00:00.1 ProcessGroupNCCL.cpp:4561] Warning: barrier() using device",
    f"{T0} srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    f"{T0} [rank1]:[E1003 18:37:01.833 ProcessGroupNCCL.cpp:621] [Rank 1] Some NCCL operations "
    "have failed or timed out.",
    "",
    "garbage \x00\ufffd text",
])
def test_routine_lines(line):
    assert joblog.parse_line(line, CTX) == []


def test_every_rule_has_a_case_and_the_union_regex_reaches_it():
    covered = set()
    union = re.compile(joblog.CANDIDATE_RE)
    for _, line, *_ in LINES:
        assert union.search(line), line
        events = joblog.parse_line(line, CTX)
        covered.update(e.attrs["rule"] for e in events)
    assert covered == {rid for rid, _, _ in joblog.RULES}
    assert all(kind in EVENT_KINDS for _, kind, _ in joblog.RULES)


def test_candidate_selection_is_the_same_in_polars_and_python():
    lines = [case[1] for case in LINES] * 3 + ["routine"] * 100
    assert len(lines) >= joblog.SMALL_FILE_LINES
    big = joblog.candidate_indices(lines, joblog.CANDIDATE_RE)
    rx = re.compile(joblog.CANDIDATE_RE)
    assert big == [i for i, ln in enumerate(lines) if rx.search(ln)]
    assert big == list(range(len(LINES) * 3))


INTERLEAVED = """\
2024-07-01T12:10:01.000000Z node0042:2231:2290 [3] NCCL INFO comm 0x1 rank 3 nranks 16
2024-07-01T12:10:02.000000Z [rank3]: Traceback (most recent call last):
[rank2]: Traceback (most recent call last):
[rank3]:   File "/train.py", line 10, in <module>
[rank2]:   File "/train.py", line 12, in <module>
[rank3]:     main()
[rank2]:     step()
[rank3]: torch.distributed.DistBackendError: NCCL error in: ../N.hpp:275, unhandled system error
[rank2]:   File "/model.py", line 99, in step
[rank2]:     out = layer(x)
[rank2]:           ^^^^^^^^
[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered
2024-07-01T12:10:09.000000Z [rank2]: done
"""


def test_interleaved_rank_tracebacks_are_one_event_each():
    fp = joblog.parse(INTERLEAVED, CTX)
    check_accounting(fp)
    tbs = [e for e in fp.events if e.kind == "traceback"]
    assert [(e.rank, e.line_no, e.line_end) for e in tbs] == [(3, 2, 8), (2, 3, 12)]
    assert tbs[0].attrs["exc_type"] == "torch.distributed.DistBackendError"
    assert tbs[0].attrs["exc_message"].startswith("NCCL error in:")
    assert tbs[0].attrs["last_frame"] == "/train.py:10 in <module>"
    assert tbs[1].attrs["exc_type"] == "RuntimeError"
    assert tbs[1].attrs["last_frame"] == "/model.py:99 in step"
    t = us("2024-07-01T12:10:02Z")
    assert (tbs[0].ts, tbs[0].ts_quality) == (t, "exact")
    assert (tbs[1].ts, tbs[1].ts_quality) == (t, "inherited")
    # The exception lines are also signals of their own; body lines are not.
    others = [(e.kind, e.line_no, e.rank, e.ts_quality) for e in fp.events
              if e.kind != "traceback"]
    assert others == [("nccl_error", 8, 3, "inherited"), ("cuda_error", 12, 2, "inherited")]
    assert fp.event_lines == 11 and fp.routine_lines == 2


CHAINED = """\
2024-07-01T12:00:00.000000Z Traceback (most recent call last):
  File "/a.py", line 1, in f
    g()
ValueError: inner

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/a.py", line 3, in <module>
    f()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
2024-07-01T12:00:01.000000Z next
"""


def test_chained_traceback_is_one_event_ending_at_the_last_exception():
    fp = joblog.parse(CHAINED, CTX)
    check_accounting(fp)
    tb = fp.events[0]
    assert (tb.kind, tb.line_no, tb.line_end) == ("traceback", 1, 11)
    assert tb.attrs["exc_type"] == "torch.OutOfMemoryError"
    assert tb.attrs["chain"] == [{"exc_type": "ValueError", "exc_message": "inner"}]
    assert [e.kind for e in fp.events] == ["traceback", "cuda_error"]


def test_truncated_traceback_is_flagged():
    text = ("2024-07-01T12:00:00.000000Z [rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/a.py", line 1, in f')
    fp = joblog.parse(text, CTX)
    check_accounting(fp)
    (tb,) = fp.events
    assert (tb.line_no, tb.line_end, tb.attrs["truncated"], tb.attrs["exc_type"]) == (
        1, 2, True, None)


def test_torchrun_failure_summary_gives_rank_and_host():
    text = """\
2024-07-01T12:10:05.000000Z torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-07-01_12:10:05
  host      : node0042
  rank      : 27 (local_rank: 3)
  exitcode  : -6 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 1234
============================================================
"""
    fp = joblog.parse(text, CTX)
    check_accounting(fp)
    exits = [(e.line_no, e.host, e.rank, e.attrs.get("exitcode"), e.attrs.get("signal"))
             for e in fp.events]
    assert exits == [(1, "node0007", None, None, None), (10, "node0042", 27, -6, "SIGABRT"),
                     (12, "node0007", None, -6, "SIGABRT")]
    assert all(e.ts_quality in ("exact", "inherited") for e in fp.events)


def test_inherited_time_looks_back_past_routine_lines():
    text = ("2024-07-01T12:00:00.000000Z start\n" + "no stamp\n" * 200
            + "RuntimeError: CUDA error: unspecified launch failure\n")
    fp = joblog.parse(text, CTX)
    (e,) = fp.events
    assert (e.line_no, e.ts, e.ts_quality) == (202, us("2024-07-01T12:00:00Z"), "inherited")


def test_no_time_at_all_is_untimed():
    fp = joblog.parse("RuntimeError: CUDA error: unspecified launch failure\n", CTX)
    (e,) = fp.events
    assert (e.ts, e.ts_quality) == (None, "untimed")


def test_zoneless_collector_stamp_is_read_in_ctx_tz():
    ctx = ParseContext(path="j.log", host="h", job_id="1", tz="America/New_York")
    fp = joblog.parse("2024-07-01T12:00:00.5 srun: error: Node failure on node0042\n", ctx)
    (e,) = fp.events
    assert (e.ts, e.ts_quality) == (us("2024-07-01T12:00:00.5", "America/New_York"),
                                    "assumed_tz")


def _sample() -> str:
    return "\n".join(case[1] for case in LINES) + "\n" + INTERLEAVED + CHAINED


@pytest.mark.parametrize("name,text", [
    ("empty", ""),
    ("only_newline", "\n"),
    ("lf", _sample()),
    ("crlf", _sample().replace("\n", "\r\n")),
    ("nul_and_fffd", _sample().replace("NCCL INFO", "NCCL\x00INFO").replace("rank3", "r\ufffd")),
    ("truncated_last_line", _sample()[:-30]),
    ("no_final_newline", _sample().rstrip("\n")),
    ("binary_noise", "\x00\x01\ufffd\ufffd\n\r\n\x00" * 50),
])
def test_accounting_on_dirty_input(name, text):
    fp = joblog.parse(text, CTX)
    check_accounting(fp)
    assert fp.lines == (0 if not text else text.count("\n") + (not text.endswith("\n")))
    assert fp.rejects == []


def test_crlf_gives_the_same_events_as_lf():
    def strip(fp):
        return [(e.kind, e.line_no, e.line_end, e.ts, e.attrs, e.rank, e.host) for e in fp.events]

    lf = joblog.parse(_sample(), CTX)
    crlf = joblog.parse(_sample().replace("\n", "\r\n"), CTX)
    assert strip(lf) == strip(crlf)
    assert len(lf.events) > len(LINES)


def test_parse_is_pure_and_deterministic():
    a = joblog.parse(_sample(), CTX)
    b = joblog.parse(_sample(), CTX)
    assert a == b
