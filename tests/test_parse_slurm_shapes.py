"""Slurm shapes beyond the canonical layout: ``slurm-<jobid>.out`` (every rank's output,
no collector stamp, ``srun --label`` and ``[rankN]:`` prefixes).

Every log line below is real, copied from the public thread named beside it (the
repository's license in the note); only the ``srun --label`` prefix (``<task>: ``, as
Slurm's quickstart shows it: ``0: adev3``, https://slurm.schedmd.com/quickstart.html)
is added where a line was pasted without it.
"""

# ruff: noqa: W291, W293 - the scontrol dump below keeps its real trailing blanks
from __future__ import annotations

import json
from pathlib import Path

import pytest
from accounting import check_accounting, us

from faultline.pipeline.fileparse import context_from_path, parse_file
from faultline.pipeline.parsers import joblog, jobout, sacct, slurm_nodes, slurmd
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import sniff

# https://github.com/NVIDIA/nccl/issues/983 (NCCL, BSD-3-Clause)
BOOTSTRAP = "4c217144f0b1:113168:113168 [0] NCCL INFO Bootstrap : Using eth0:10.0.1.9<0>"
# https://github.com/NVIDIA/nccl-tests/issues/213 (nccl-tests, BSD-3-Clause)
COMM_2_2x = ("hw14:798:811 [1] NCCL INFO comm 0x55a7be569d00 rank 1 nRanks 8 nNodes 1 "
             "localRanks 8 localRank 1 MNNVL 0")
# https://github.com/deepseek-ai/DeepEP/issues/106 (DeepEP, MIT)
COMM_INIT = ("VM-17-82-centos:11983:12550 [5] NCCL INFO comm 0x5648d7156820 rank 5 nranks 16 "
             "cudaDev 5 nvmlDev 5 busId 9c000 commId 0x599e30b8362d17c - Init COMPLETE")
# https://github.com/Lightning-AI/pytorch-lightning/issues/20434 (a Slurm job; Apache-2.0)
WATCHDOG = ("[rank2]:[E1119 13:21:13.092845528 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID "
            "0(default_pg) Rank 2] Process group watchdog thread terminated with exception: "
            "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            "OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800013 "
            "milliseconds before timing out.")
TAKING_DOWN = ("[rank3]:[E1119 13:21:13.938104757 ProcessGroupNCCL.cpp:636] [Rank 3] To avoid "
               "data inconsistency, we are taking the entire process down.")
# https://github.com/OEvortex/unsloth/issues/10 (unsloth fork, Apache-2.0)
SIGTERM = ("W0801 13:23:17.366000 32974 torch/distributed/elastic/multiprocessing/api.py:900] "
           "Sending process 33051 closing signal SIGTERM")
FAILED = ("E0801 13:23:20.000000 32974 torch/distributed/elastic/multiprocessing/api.py:874] "
          "failed (exitcode: 1) local_rank: 3 (pid: 33054) of binary: "
          "/home/ubuntu/pythonn3.11/bin/python3")
# https://github.com/ai4d-iasc/trixie/issues/35 (no license stated; a one-line quote)
SRUN_SEGV = "srun: error: cn125: task 0: Segmentation fault (core dumped)"

# A two-task job: task 0 ran on hw14 (rank 1 among others), task 1 on VM-17-82-centos.
OUT = [
    "MASTER_ADDR=hw14  MASTER_PORT=29500",
    f"0: {BOOTSTRAP.replace('4c217144f0b1', 'hw14')}",
    f"0: {COMM_2_2x}",
    f"1: {COMM_INIT}",
    f" 1: {WATCHDOG.replace('rank2', 'rank5').replace('Rank 2', 'Rank 5')}",
    f"0: {TAKING_DOWN.replace('rank3', 'rank1').replace('Rank 3', 'Rank 1')}",
    f"1: {SIGTERM}",
    f"1: {FAILED}",
    f"0: {SRUN_SEGV}",
]
NOV19 = (us("2024-11-19T08:00:00"), us("2024-11-19T14:00:00"))


def ctx(window: tuple[int, int] | None = NOV19, tz: str = "UTC") -> ParseContext:
    return ParseContext(path="out/slurm-63768795.out", job_id="63768795", tz=tz,
                        job_window=window)


def parse(lines: list[str], c: ParseContext) -> list:
    fp = joblog.parse("\n".join(lines) + "\n", c)
    check_accounting(fp)
    return fp


def test_labelled_output_hosts_ranks_gpus_and_times():
    fp = parse(OUT, ctx())
    assert fp.shape == "slurm_out"
    by_kind = {e.kind: e for e in fp.events}
    boot = by_kind["nccl_bootstrap"]
    # before the job's first stamp: the job's sacct start, flagged
    assert (boot.ts, boot.ts_quality, boot.attrs["ts_from"]) == (NOV19[0], "inherited",
                                                                "job_start")
    assert boot.host == "hw14" and boot.job_id == "63768795"
    wd = by_kind["nccl_watchdog"]
    assert (wd.rank, wd.host, wd.device) == (5, "VM-17-82-centos", "0000:9c:00.0")
    assert wd.attrs["cuda_dev"] == 5 and wd.attrs["seq_num"] == 1
    assert (wd.ts, wd.ts_quality) == (us("2024-11-19T13:21:13.092845"), "inferred_year")
    exits = [e for e in fp.events if e.kind == "process_exit"]
    failed = next(e for e in exits if e.attrs["rule"] == "elastic.failed")
    # task 1's line: its host is its label's; August lies nearest the job's November
    assert (failed.host, failed.attrs["exitcode"], failed.attrs["local_rank"]) == (
        "VM-17-82-centos", 1, 3)
    assert (failed.ts, failed.ts_quality) == (us("2024-08-01T13:23:20"), "inferred_year")
    segv = next(e for e in exits if e.attrs["rule"] == "srun.task_exit")
    assert segv.host == "cn125"  # the line names its host: it wins over the label's
    # srun's own line has no stamp: it inherits the last stamped line above it
    assert (segv.ts, segv.ts_quality) == (us("2024-08-01T13:23:20"), "inherited")


def test_an_unstamped_line_takes_the_next_stamp():
    """A line without a stamp was written no later than the next stamped line: its time
    (a symptom in a job log never sorts before the exact time of its cause elsewhere)."""
    # https://github.com/xiuqhou/Salience-DETR/issues/4 (Apache-2.0): a logging stamp
    before = ("[2024-05-08 08:47:31,261] torch.distributed.elastic.multiprocessing.api: "
              "[WARNING] Sending process 5938 closing signal SIGTERM")
    # https://github.com/deepseek-ai/DeepEP/issues/106 (MIT): NCCL < 2.26, no stamp
    ib = ("VM-17-82-centos:11978:12642 [0] ib_plugin.c:1075 NCCL WARN NET/IB : Got completion "
          "from peer 172.21.17.89<38536> with error 12, opcode 32715, len 0, vendor err 129")
    wd = WATCHDOG.replace("rank2", "rank5").replace("Rank 2", "Rank 5")
    fp = parse([f"0: {before}", f"1: {ib}", f"1: {wd}", "1: tail line"], ctx())
    got = {e.kind: (e.ts, e.ts_quality) for e in fp.events}
    assert got["nccl_ib_error"] == (us("2024-11-19T13:21:13.092845"), "inherited")
    assert got["nccl_watchdog"] == (us("2024-11-19T13:21:13.092845"), "inferred_year")


def test_glog_stamps_in_the_zone_of_tz():
    fp = parse(OUT, ctx(tz="America/Chicago"))
    wd = next(e for e in fp.events if e.kind == "nccl_watchdog")
    assert wd.ts == us("2024-11-19T13:21:13.092845", "America/Chicago")


def test_without_sacct_nothing_is_guessed():
    """No job window and no --year: a glog stamp has no year, so no line has a time."""
    fp = parse(OUT, ctx(window=None))
    assert fp.events and all(e.ts is None and e.ts_quality == "untimed" for e in fp.events)
    assert all("ts_from" not in e.attrs for e in fp.events)


def test_unlabelled_output_gets_hosts_from_ranks():
    lines = [COMM_INIT, WATCHDOG.replace("rank2", "rank5").replace("Rank 2", "Rank 5")]
    fp = parse(lines, ctx())
    assert fp.shape == "unstamped"
    wd = next(e for e in fp.events if e.kind == "nccl_watchdog")
    assert (wd.host, wd.rank, wd.device) == ("VM-17-82-centos", 5, "0000:9c:00.0")


def test_a_rank_not_in_any_init_line_has_no_host():
    fp = parse([COMM_2_2x, WATCHDOG], ctx())  # rank 2 never said where it ran
    wd = next(e for e in fp.events if e.kind == "nccl_watchdog")
    assert (wd.rank, wd.host, wd.device) == (2, None, None)


def test_labelled_traceback_is_one_block_per_task():
    # https://github.com/Facico/Chinese-Vicuna/issues/113 (Apache-2.0): torchrun's traceback
    tb = ["Traceback (most recent call last):",
          '  File "/home/changquan/anaconda3/envs/lang/bin/torchrun", line 8, in <module>',
          "    sys.exit(main())",
          "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]
    lines = [f"0: {tb[0]}", f"1: {tb[0]}", f"0: {tb[1]}", f"1: {tb[1]}", f"0: {tb[2]}",
             f"1: {tb[2]}", f"0: {tb[3]}", f"1: {tb[3]}"]
    fp = parse(lines, ctx())
    tbs = [e for e in fp.events if e.kind == "traceback"]
    assert [(e.line_no, e.line_end) for e in tbs] == [(1, 7), (2, 8)]
    assert all(e.attrs["exc_type"].endswith("ChildFailedError") for e in tbs)


@pytest.mark.parametrize(("line", "want"), [
    ("12: [rank12]:[E1119 13:21:13.938104757 ProcessGroupNCCL.cpp:636] x",
     "2024-11-19T13:21:13.938104757"),
    ("3: [2025-03-01 12:00:00] node1:1:2 [0] NCCL WARN x", "2025-03-01 12:00:00"),
    ("3: 2024-11-19 13:00:00,123 INFO step 10", "2024-11-19 13:00:00,123"),
    ("3: Epoch 1 2024-11-19", None),
    ("3: Epoch 1", None),
])
def test_own_stamp(line, want):
    got = jobout.own_stamp(line, True, ctx())
    assert (got[0] if isinstance(got, tuple) else got) == want


def test_nccl_bus_id():
    assert jobout.nccl_bus_id("9c000") == "0000:9c:00.0"
    assert jobout.nccl_bus_id("1b000") == "0000:1b:00.0"
    assert jobout.nccl_bus_id("zz") is None


# --- layout: slurm-*.out anywhere, job id from the name ------------------------------------

@pytest.mark.parametrize(("path", "job_id"), [
    ("runs/llama/slurm-63768795.out", "63768795"),
    ("slurm-123_4.out", "123_4"),
    ("a/b/slurm-9.out.gz", "9"),
    ("a/slurm-x.out", None),
    ("a/myslurm-9.out", None),
])
def test_job_id_from_slurm_out_name(path, job_id):
    c = context_from_path(path, "UTC")
    assert (c.job_id, c.host) == (job_id, None)


def test_slurm_out_of_user_prints_only_is_a_job_log_not_rejected():
    text = "MASTER_ADDR=hw14\nSLURM_NODELIST=hw[14-15]\nepoch 1 done\n"
    assert sniff(text.splitlines(), "runs/slurm-5.out") == "job"
    assert sniff(text.splitlines(), "runs/notes.out") == "unknown"
    got = parse_file("runs/slurm-5.out", text.encode(), IngestSettings())
    row = got.files.to_pylist()[0]
    assert (row["source"], row["lines"], row["routine_lines"], row["reject_lines"]) == (
        "job", 3, 3, 0)


def test_fileparse_takes_the_job_window_from_settings():
    data = ("\n".join(OUT) + "\n").encode()
    settings = IngestSettings(job_windows={"63768795": NOV19})
    got = parse_file("x/slurm-63768795.out", data, settings)
    assert got.files.to_pylist()[0]["shape"] == "slurm_out"
    ev = got.events.to_pylist()
    assert {e["job_id"] for e in ev} == {"63768795"}
    wd = next(e for e in ev if e["kind"] == "nccl_watchdog")
    assert wd["ts_quality"] == "inferred_year" and wd["host"] == "VM-17-82-centos"
    bare = parse_file("x/slurm-63768795.out", data, IngestSettings()).events.to_pylist()
    assert all(e["ts_quality"] == "untimed" for e in bare)


# --- sacct --json: the same job records as sacct's text -------------------------------------

DATA = Path(__file__).parent / "data" / "shapes"


def test_sacct_json_gives_the_records_and_attempts_of_the_text_dump():
    text = (DATA / "sacct-json-clockwork-excerpt.json").read_text()
    assert sniff(text.splitlines(), "slurm/sacct.json") == "sacct"
    fp = sacct.parse(text, ParseContext(path="slurm/sacct.json"))
    check_accounting(fp)
    assert fp.shape == "sacct_json" and not fp.rejects
    a = [e.attrs for e in fp.events]
    assert [(x["job_id"], x["state"], x["reason"], x["nodelist"], x["nodes"], x["exit_code"])
            for x in a] == [("63752790_7", "NODE_FAIL", "Prolog", "cdr247", 1, "0:0"),
                            ("63692861_0", "REQUEUED", "Prolog", "cdr2529", 1, "0:0")]
    assert [(e.line_no, e.line_end, e.ts, e.ts_quality) for e in fp.events] == [
        (19, 116, 1680244103 * 10**6, "exact"), (117, 214, 1680215981 * 10**6, "exact")]
    # the same two jobs as sacct -P would print them (times are UTC there: tz=UTC)
    dump = ("JobID|JobName|User|State|Start|End|NodeList|NNodes|ExitCode|Reason\n"
            "63752790_7|submitit|nobody|NODE_FAIL|2023-03-30T16:25:04|2023-03-31T06:28:23|"
            "cdr247|1|0:0|Prolog\n"
            "63692861_0|submitit|nobody2|REQUEUED|2023-03-29T22:13:12|2023-03-30T22:39:41|"
            "cdr2529|1|0:0|Prolog\n")
    txt = sacct.parse(dump, ParseContext(path="slurm/sacct.txt"))
    assert sacct.attempts(fp.events) == sacct.attempts(txt.events)


def test_sacct_json_v0039_numbers_and_bad_documents():
    job = {"job_id": 7, "name": "llm", "user": "u", "nodes": "n[1-2]",
           "allocation_nodes": {"set": True, "infinite": False, "number": 2},
           "state": {"current": ["NODE_FAIL"], "reason": "None"},
           "time": {"start": {"set": True, "infinite": False, "number": 1700000000},
                    "end": {"set": True, "infinite": False, "number": 0}},
           "exit_code": {"status": ["SIGNALED"],
                         "return_code": {"set": True, "infinite": False, "number": 0},
                         "signal": {"id": {"set": True, "infinite": False, "number": 9},
                                    "name": "SIGKILL"}}}
    fp = sacct.parse(json.dumps({"jobs": [job]}), ParseContext(path="sacct.json"))
    (e,) = fp.events
    assert (e.attrs["state"], e.attrs["nodes"], e.attrs["start"], e.attrs["end"],
            e.attrs["exit_code"]) == ("NODE_FAIL", 2, 1700000000 * 10**6, None, "0:9")
    bad = sacct.parse('{"jobs": 3}\n', ParseContext(path="sacct.json"))
    assert [r.reason for r in bad.rejects] == ["not sacct json"] and not bad.events


# --- sinfo -R, sinfo -o, scontrol show node --------------------------------------------------

# https://github.com/awslabs/awsome-distributed-ai/issues/185 (MIT-0)
SINFO_R = "REASON USER TIMESTAMP NODELIST\nKill task failed root 2024-01-25T15:12:23 ip-10-0-1-23\n"
# https://github.com/awslabs/awsome-distributed-ai/issues/195 (MIT-0), then an excerpt of
# https://github.com/SckyzO/slurm_exporter/issues/198 (GPL-3.0; the block's first lines)
SCONTROL = """\
NodeName=yigou-dev-102-68 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.99
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:nvidia-rtx-3090:1
   NodeAddr=yigou-dev-102-68 NodeHostName=yigou-dev-102-68 Version=24.05.0-0rc1
   OS=Linux 5.10.0-153.12.0.92.oe2203sp2.x86_64 #1 SMP Wed Jun 28 23:04:48 CST 2023 
   RealMemory=1 AllocMem=0 FreeMem=340 Sockets=8 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=compute100 
   BootTime=2024-11-18T20:46:45 SlurmdStartTime=2024-12-19T11:41:49
   LastBusyTime=2024-12-19T11:41:49 ResumeAfterTime=None
   CfgTRES=cpu=8,mem=1M,billing=8,gres/gpu=1
   AllocTRES=
   CurrentWatts=0 AveWatts=0
   
   Reason=gres/gpu count reported lower than configured (0 < 1) [slurm@2024-12-19T11:03:34]

NodeName=gpu02 Arch=x86_64 CoresPerSocket=4 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.00
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:1080:7,gpu:block:1
   NodeAddr=gpu02 NodeHostName=gpu02 Version=23.11.4
   OS=Linux 6.8.0-31-generic #31-Ubuntu SMP PREEMPT_DYNAMIC Sat Apr 20 00:40:06 UTC 2024 
   RealMemory=250000 AllocMem=0 FreeMem=38206 Sockets=2 Boards=1
   State=DOWN+NOT_RESPONDING ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=ifn,dll 
"""


def test_sinfo_reasons():
    assert sniff(SINFO_R.splitlines(), "state/sinfo-R.txt") == "slurm_nodes"
    fp = slurm_nodes.parse(SINFO_R, ParseContext(path="sinfo-R.txt", tz="Asia/Tokyo"))
    check_accounting(fp)
    (e,) = fp.events
    assert (e.kind, e.host, e.ts, e.ts_quality, e.attrs["reason"], e.attrs["user"]) == (
        "node_drain", "ip-10-0-1-23", us("2024-01-25T15:12:23", "Asia/Tokyo"), "assumed_tz",
        "Kill task failed", "root")


def test_scontrol_show_node():
    assert sniff(SCONTROL.splitlines(), "scontrol_show_node.txt") == "slurm_nodes"
    fp = slurm_nodes.parse(SCONTROL, ParseContext(path="scontrol.txt"))
    check_accounting(fp)
    assert fp.shape == "scontrol_nodes" and not fp.rejects
    drain, down = fp.events
    assert (drain.line_no, drain.kind, drain.host, drain.ts, drain.attrs["user"],
            drain.attrs["state"]) == (17, "node_drain", "yigou-dev-102-68",
                                      us("2024-12-19T11:03:34"), "slurm", "IDLE+DRAIN")
    assert drain.attrs["reason"] == "gres/gpu count reported lower than configured (0 < 1)"
    # down without a reason in the dump: the State line, and no time
    assert (down.line_no, down.kind, down.host, down.ts_quality, down.attrs["reason"]) == (
        27, "node_down", "gpu02", "untimed", None)


def test_scontrol_one_line_and_garbage():
    # scontrol -o (one block per line): the line a public test quotes (find_string:
    # "Reason=Kill task failed [root@"); repository not named by the index
    one = ("NodeName=g3 Arch=x86_64 CPUAlloc=0 CPUTot=256 State=IDLE+DRAIN Partitions=gpu "
           "CfgTRES=cpu=256,mem=1400000M AllocTRES= CurrentWatts=0 AveWatts=0 "
           "Reason=Kill task failed [root@2026-06-01T10:00:00]\nfoo\n")
    fp = slurm_nodes.parse(one, ParseContext(path="scontrol.txt"))
    check_accounting(fp)
    assert [(e.host, e.attrs["reason"], e.attrs["user"]) for e in fp.events] == [
        ("g3", "Kill task failed", "root")]
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(2, "unrecognized scontrol line")]


def test_sinfo_table_of_gcm(shared_dir):
    """facebookresearch/gcm's ``sinfo`` sample (MIT, ../shared/peer-data/gcm)."""
    path = shared_dir / "peer-data/gcm/gcm/tests/data/sample-sinfo-output.txt"
    lines = path.read_text().splitlines()
    assert sniff(lines, "gcm/sample-sinfo-output.txt") == "slurm_nodes"
    fp = slurm_nodes.parse(path.read_text(), ParseContext(path=str(path)))
    check_accounting(fp)
    assert fp.shape == "sinfo_table" and not fp.rejects
    # node0201 is listed twice (two partitions), drained for "replace": one event;
    # the allocated nodes have reason "none": routine
    assert [(e.line_no, e.kind, e.host, e.attrs["reason"], e.attrs["user"], e.ts)
            for e in fp.events] == [(2, "node_drain", "node0201", "replace", "root",
                                     us("2022-06-02T05:54:34"))]


# --- slurmd.log ------------------------------------------------------------------------------

# https://github.com/ai4d-iasc/trixie/issues/45 (slurmd.log of cn106; no license stated,
# quoted as a log sample; UID/GID/HOST masked by the poster)
SLURMD = """\
[2020-12-14T08:59:01.890] launch task 63532.0 request from UID:xxxxxxxxx  GID:xxxxxxxxx HOST:10.xxx.xxx.xxx PORT:63195
[2020-12-14T09:43:55.500] [63532.0] error: *** STEP 63532.0 ON cn106 CANCELLED AT 2020-12-14T09:43:55 ***
[2020-12-14T09:43:55.502] [63532.extern] done with job
[2020-12-14T09:44:56.002] [63532.0] error: *** STEP 63532.0 STEPD TERMINATED ON cn106 AT 2020-12-14T09:44:56 DUE TO JOB NOT ENDING WITH SIGNALS ***
[2020-12-14T09:44:58.306] [63532.0] done with job
"""  # noqa: E501


def test_slurmd_log():
    assert sniff(SLURMD.splitlines(), "hosts/cn106/slurmd.log") == "slurmd"
    assert sniff(SLURMD.splitlines(), "logs/node.log") == "slurmd"  # by its wording
    assert sniff(SLURMD.splitlines(), "hosts/cn106/slurmdbd.log") != "slurm_nodes"
    fp = slurmd.parse(SLURMD, ParseContext(path="hosts/cn106/slurmd.log", host="cn106"))
    check_accounting(fp)
    assert fp.shape == "iso8601_ms" and not fp.rejects
    assert [(e.line_no, e.kind, e.host, e.job_id, e.attrs["rule"], e.attrs.get("unkillable"))
            for e in fp.events] == [
        (2, "job_cancelled", "cn106", "63532", "slurmd.cancelled", None),
        (4, "job_cancelled", "cn106", "63532", "slurmd.unkillable", True)]
    got = parse_file("hosts/cn106/slurmd.log", SLURMD.encode(), IngestSettings())
    assert got.files.to_pylist()[0]["source"] == "slurmd"


def test_labels_after_the_batch_scripts_own_output():
    script = [f"echo line {k}" for k in range(30)]
    fp = parse(script + OUT, ctx())
    assert fp.shape == "slurm_out"
    wd = next(e for e in fp.events if e.kind == "nccl_watchdog")
    assert (wd.host, wd.rank) == ("VM-17-82-centos", 5)
    assert not jobout.is_labelled(["1: one", "x", "y"])  # a stray "1: " is no label
    assert context_from_path("jobs/77/slurm-77.out", "UTC").host is None


def test_prepass_job_windows(tmp_path):
    from faultline.pipeline.prepass import prepass
    dump = ("JobID|JobName|State|Start|End|NodeList\n"
            "81234|llm|NODE_FAIL|2024-07-01T08:00:12|2024-07-01T12:00:31|node[1-2]\n"
            "81234|llm|COMPLETED|2024-07-01T12:10:00|2024-07-02T00:00:00|node[1-2]\n"
            "81235|llm|RUNNING|2024-07-02T01:00:00|Unknown|node[1-2]\n")
    (tmp_path / "sacct.txt").write_text(dump)
    window, jobs = prepass([str(tmp_path / "sacct.txt")], "UTC")
    assert window == (us("2024-07-01T08:00:12"), us("2024-07-02T01:00:00"))
    # a requeued job: first start to last end; a running one: to the corpus' end
    assert jobs == {"81234": (us("2024-07-01T08:00:12"), us("2024-07-02T00:00:00")),
                    "81235": (us("2024-07-02T01:00:00"), us("2024-07-02T01:00:00"))}


def test_prepass_reads_sacct_json(tmp_path):
    from faultline.pipeline.prepass import prepass
    path = tmp_path / "sacct.json"
    path.write_bytes((DATA / "sacct-json-clockwork-excerpt.json").read_bytes())
    _window, jobs = prepass([str(path)], "UTC")
    assert jobs == {"63752790_7": (1680193504 * 10**6, 1680244103 * 10**6),
                    "63692861_0": (1680127992 * 10**6, 1680215981 * 10**6)}
