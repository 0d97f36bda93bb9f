"""Slurm shapes beyond the canonical layout: ``slurm-<jobid>.out`` (every rank's output,
no collector stamp, ``srun --label`` and ``[rankN]:`` prefixes).

Every log line below is real, copied from the public thread named beside it (the
repository's license in the note); only the ``srun --label`` prefix (``<task>: ``, as
Slurm's quickstart shows it: ``0: adev3``, https://slurm.schedmd.com/quickstart.html)
is added where a line was pasted without it.
"""

from __future__ import annotations

import pytest
from accounting import check_accounting, us

from faultline.pipeline.fileparse import context_from_path, parse_file
from faultline.pipeline.parsers import joblog, jobout
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
