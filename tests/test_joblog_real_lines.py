"""Real slurmstepd cancellation and torch elastic worker-failure lines, as the job-log
lanes and the general path read them.

Each line below is quoted verbatim (one log line) from the public issue or pull-request
thread named with it; licences of those threads were not checked, a single quoted log
line being test data. Every line is parsed as a collector-stamped line of a node's log
(``<stamp> <line>``, where the lanes may take it) and bare, as a ``slurm-N.out`` holds
it (general path only): both ways give the event named in the table, and the lanes and
the per-line path give the same event, attrs byte for byte (``joblog_paths.both``).

Shapes: slurmstepd's current ``*** JOB|STEP N ON host CANCELLED AT t [DUE TO R] ***``
(time limit, preemption, ``scancel`` with no reason), a node-named ``slurmstepd-host:``
prefix, and the older Slurm wording that names the host last (``... DUE TO TIME LIMIT
on n447 ***``, ``... *** on sh-2-3``), which used to read the host into the reason;
torch elastic's ``failed (exitcode: N)`` after glog's header (``E0325 20:57:27.620000
2606 .../api.py:869]``), after the ``logging`` module's ``ERROR:torch...api:`` and
``[2024-11-26 02:04:31,514] torch...api: [ERROR]`` prefixes, behind ``stderr:``, cut at
``of binary:``, and wrapped after the exit code; signals -6, -7, -9 and -11.
"""

from __future__ import annotations

import json

import pytest
from accounting import us
from joblog_paths import CTX, ROUTINE, T0, both, lane_rows

_SLURM = "slurmstepd: error: *** "
_ERR = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: "
_BRACKET = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: "
_GLOG = "torch/distributed/elastic/multiprocessing/api.py:"

# (id, source, line, whether a lane takes it stamped, host, attrs it must hold)
CANCELLED = [
    ("time_limit_job", "https://github.com/Nextomics/NextDenovo/issues/114",
     f"{_SLURM}JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***",
     True, "c0700a-s1", {"scope": "job", "slurm_job": "867816", "due_to": "TIME LIMIT",
                         "cancelled_at": us("2021-05-11T12:06:17")}),
    ("time_limit_step", "https://github.com/desihub/desitarget/issues/628",
     f"{_SLURM}STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME "
     "LIMIT ***",
     True, "nid01934", {"scope": "step", "slurm_job": "32233190.0", "due_to": "TIME LIMIT",
                        "cancelled_at": us("2020-07-03T02:59:56")}),
    ("time_limit_dashed_host", "https://github.com/labsyspharm/mcmicro/issues/163",
     f"{_SLURM}JOB 13055114 ON compute-h-17-51 CANCELLED AT 2020-07-11T22:48:26 DUE TO TIME "
     "LIMIT ***",
     True, "compute-h-17-51", {"scope": "job", "slurm_job": "13055114",
                               "due_to": "TIME LIMIT"}),
    ("preemption", "https://github.com/SystemsGenetics/GEMmaker/pull/242",
     f"{_SLURM}JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO PREEMPTION ***",
     True, "cn119", {"scope": "job", "slurm_job": "32391783", "due_to": "PREEMPTION",
                     "cancelled_at": us("2021-06-18T13:05:36")}),
    ("scancel_step", "https://github.com/qiskit-community/spank-plugins/pull/17",
     f"{_SLURM}STEP 3.0 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***",
     True, "c1", {"scope": "step", "slurm_job": "3.0", "due_to": None,
                  "cancelled_at": us("2025-02-13T15:47:35")}),
    ("scancel_job", "https://github.com/qiskit-community/spank-plugins/pull/17",
     f"{_SLURM}JOB 3 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***",
     True, "c1", {"scope": "job", "slurm_job": "3", "due_to": None}),
    ("node_named_prefix", "https://github.com/lyulyul/shine-cluster/issues/4",
     "slurmstepd-localhost: error: *** STEP 204.0 ON localhost CANCELLED AT "
     "2021-02-13T16:38:01 ***",
     False, "localhost", {"scope": "step", "slurm_job": "204.0", "due_to": None,
                          "cancelled_at": us("2021-02-13T16:38:01")}),
    ("old_host_after_reason", "https://github.com/marbl/canu/issues/1067",
     "slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***",
     False, "n447", {"scope": "job", "slurm_job": "830329", "due_to": "TIME LIMIT",
                     "cancelled_at": us("2018-08-06T17:21:44")}),
    ("old_host_after_stars", "https://github.com/bcbio/bcbio-nextgen/issues/741",
     "slurmstepd: *** JOB 1479012 CANCELLED AT 2015-02-04T06:33:25 *** on sh-2-3",
     False, "sh-2-3", {"scope": "job", "slurm_job": "1479012", "due_to": None,
                       "cancelled_at": us("2015-02-04T06:33:25")}),
]

ELASTIC = [
    ("glog_sigkill", "https://github.com/lmzpai/roboMamba/issues/10",
     f"E0325 20:57:27.620000 2606 site-packages/{_GLOG}869] failed (exitcode: -9) "
     "local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
     True, {"exitcode": -9, "signal": "SIGKILL", "local_rank": 5, "pid": 2630,
            "binary": "/root/miniconda3/bin/python"}),
    ("glog_sigabrt_thread_id", "https://github.com/pytorch/pytorch/issues/126544",
     f"E0517 08:24:03.805000 140617718325696 {_GLOG}826] failed (exitcode: -6) "
     "local_rank: 0 (pid: 970611) of binary: /tmp/venv/bin/python3",
     True, {"exitcode": -6, "signal": "SIGABRT", "local_rank": 0, "pid": 970611,
            "binary": "/tmp/venv/bin/python3"}),
    ("glog_header_cut", "https://github.com/OpenBMB/MiniCPM-V/issues/770",
     f"{_GLOG}826] failed (exitcode: -9) local_rank: 0 (pid: 1322) of binary: "
     "/root/miniconda3/bin/python",
     False, {"exitcode": -9, "signal": "SIGKILL", "local_rank": 0, "pid": 1322}),
    ("logging_exit_1", "https://github.com/Facico/Chinese-Vicuna/issues/113",
     f"{_ERR}1) local_rank: 0 (pid: 1622990) of binary: "
     "/home/changquan/anaconda3/envs/lang/bin/python",
     False, {"exitcode": 1, "local_rank": 0, "pid": 1622990,
             "binary": "/home/changquan/anaconda3/envs/lang/bin/python"}),
    ("logging_sigkill", "https://github.com/showlab/EgoVLP/issues/21",
     f"{_ERR}-9) local_rank: 3 (pid: 407727) of binary: "
     "/fs/nexus-scratch/sanjoyc/anaconda/envs/egovlp/bin/python",
     False, {"exitcode": -9, "signal": "SIGKILL", "local_rank": 3, "pid": 407727}),
    ("logging_sigabrt", "https://github.com/Vision-CAIR/MiniGPT-4/issues/237",
     f"{_ERR}-6) local_rank: 0 (pid: 16) of binary: /opt/conda/bin/python",
     False, {"exitcode": -6, "signal": "SIGABRT", "local_rank": 0, "pid": 16,
             "binary": "/opt/conda/bin/python"}),
    ("logging_sigbus_cut", "https://github.com/OreoChocolate/MUREN/issues/15",
     f"{_ERR}-7) local_rank: 0 (pid: 3311)",
     False, {"exitcode": -7, "signal": "SIGBUS", "local_rank": 0, "pid": 3311}),
    ("stderr_prefix", "https://github.com/hiyouga/LlamaFactory/issues/163",
     f"stderr: {_ERR}1) local_rank: 7 (pid: 153932) of binary: "
     "/home/panww/miniconda3/tools/bin/python",
     False, {"exitcode": 1, "local_rank": 7, "pid": 153932}),
    ("bracket_sigsegv", "https://github.com/fudan-generative-vision/hallo2/issues/56",
     f"[2024-11-26 02:04:31,514] {_BRACKET}-11) local_rank: 1 (pid: 750662) of binary: "
     "/home/jinlin_li/anaconda3/envs/hallo/bin/python",
     False, {"exitcode": -11, "signal": "SIGSEGV", "local_rank": 1, "pid": 750662}),
    ("bracket_exit_1", "https://github.com/xiuqhou/Salience-DETR/issues/4",
     f"[2024-05-08 08:47:31,877] {_BRACKET}1) local_rank: 2 (pid: 5939) of binary: "
     "/home/ubuntu/anaconda3/envs/salience_detr/bin/python",
     False, {"exitcode": 1, "local_rank": 2, "pid": 5939}),
    ("bracket_no_binary", "https://github.com/AkariAsai/self-rag/issues/83",
     f"{_BRACKET}-9) local_rank: 0 (pid: 14447) of binary:",
     False, {"exitcode": -9, "signal": "SIGKILL", "local_rank": 0, "pid": 14447}),
    ("bracket_wrapped", "https://github.com/zd11024/NaviLLM/issues/34",
     f"[2026-01-17 06:10:35,778] {_BRACKET}-6)",
     False, {"exitcode": -6, "signal": "SIGABRT"}),
]

# attrs a line must NOT have: exit codes >= 0 name no signal; a binary cut off, or a
# local rank and pid wrapped onto the next line, are not guessed
_ABSENT = {"logging_exit_1": ("signal",), "stderr_prefix": ("signal",),
           "bracket_exit_1": ("signal",), "bracket_no_binary": ("binary",),
           "logging_sigbus_cut": ("binary",), "bracket_wrapped": ("local_rank", "pid")}


def _read(line: str) -> tuple[list[tuple], bool]:
    """(the events of ``line`` in a node's stamped log and in a bare one, whether a
    lane took the stamped line); each way, the lanes and the per-line path agree."""
    stamped = [*ROUTINE, f"{T0} {line}", *ROUTINE[:3]]
    fast, slow = both(stamped, CTX)
    assert fast == slow
    bare = [ln[len(T0) + 1:] for ln in stamped]
    fast_bare, slow_bare = both(bare, CTX)
    assert fast_bare == slow_bare
    assert lane_rows(bare) == set()
    return fast + fast_bare, len(ROUTINE) in lane_rows(stamped)


@pytest.mark.parametrize(("source", "line", "taken", "host", "attrs"),
                         [c[1:] for c in CANCELLED], ids=[c[0] for c in CANCELLED])
def test_a_real_cancel_line_reads_the_same_both_ways(source, line, taken, host, attrs):
    events, took = _read(line)
    assert took is taken, source
    assert [e[2] for e in events] == ["job_cancelled", "job_cancelled"]
    for e in events:
        got = json.loads(e[-1])
        assert e[6] == host
        assert got["rule"] == "slurm.job_cancelled"
        assert {k: got.get(k, "absent") for k in attrs} == attrs, source


@pytest.mark.parametrize(("case_id", "source", "line", "taken", "attrs"), ELASTIC,
                         ids=[c[0] for c in ELASTIC])
def test_a_real_elastic_failure_reads_the_same_both_ways(case_id, source, line, taken, attrs):
    events, took = _read(line)
    assert took is taken, source
    assert [e[2] for e in events] == ["process_exit", "process_exit"]
    for e in events:
        got = json.loads(e[-1])
        assert e[6] == CTX.host  # the worker's host is the file's: the line names none
        assert got["rule"] == "elastic.failed"
        assert {k: got.get(k, "absent") for k in attrs} == attrs, source
        assert not set(_ABSENT.get(case_id, ())) & set(got)

