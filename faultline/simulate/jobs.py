"""Job logs (torchrun output per host) and trainer logs (rank 0) for the run's attempts.

The cascade is written procedurally per host, so a 16,384-rank job costs no memory:
the incident says how the attempt ended, and every host's file is derived from that.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from zoneinfo import ZoneInfo

from faultline.simulate import timefmt
from faultline.simulate.cluster import Cluster, Host
from faultline.simulate.model import COLLECTIVE_TIMEOUT_S, Attempt, Line
from faultline.simulate.output import Marked
from faultline.simulate.timeline import steps_until

GPU_DEAD = {"Faulty GPU", "GPU HBM3 Memory", "GPU SRAM Memory", "GPU System Processor"}


def _nccl_prefix(host: str, pid: int, lr: int) -> str:
    return f"{host}:{pid}:{pid + 60 + lr} [{lr}]"


def job_host_lines(attempt: Attempt, host: Host, cluster: Cluster, zone: ZoneInfo,
                   nic: str, info_lines: int, seed: int, nccl_stamps: bool
                   ) -> Iterator[object]:
    """One host's torchrun output for one attempt."""
    rng = random.Random(f"{seed}:job:{attempt.job_id}:{attempt.attempt}:{host.name}")
    node = attempt.hosts.index(host.name)
    n_ranks = attempt.ranks
    base_pid = rng.randrange(2000, 400000)
    t = attempt.start + rng.uniform(5, 30)
    c = timefmt.collector
    yield (f"{c(t)} W{timefmt.glog(t, zone)[:-3]} {base_pid} torch/distributed/run.py:793] "
           "Setting OMP_NUM_THREADS environment variable for each process to be 1 in "
           "default, to avoid your system being overloaded.")
    link = "RoCE" if nic == "roce" else "IB"
    for lr in range(8):
        pid = base_pid + 1 + lr
        r = node * 8 + lr
        p = _nccl_prefix(host.name, pid, lr)
        tt = t + 20 + lr * 0.01
        info = [
            f"{p} NCCL INFO Bootstrap : Using eth0:{host.ip}<0>",
            f"{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/{link} [1]mlx5_1:1/{link} "
            f"[2]mlx5_2:1/{link} [3]mlx5_3:1/{link} ; OOB eth0:{host.ip}<0>",
            f"{p} NCCL INFO comm 0x{rng.getrandbits(48):x} rank {r} nRanks {n_ranks} "
            f"nNodes {len(attempt.hosts)} localRanks 8 localRank {lr} MNNVL 0",
        ]
        for ch in range(max(0, info_lines - 4)):
            info.append(f"{p} NCCL INFO Channel {ch:02d}/32 : {r} -> {(r + 1) % n_ranks} "
                        f"via P2P/CUMEM")
        info.append(f"{p} NCCL INFO Init COMPLETE")
        for i, text in enumerate(info[:max(info_lines, 1)] if info_lines < 4 else info):
            yield f"{c(tt + i * 0.001)} {text}"
    inc = attempt.incident
    if inc is None:
        return
    out: list[tuple[float, object]] = []
    # incident lines written by this host's ranks (CUDA errors, NCCL async events)
    for ln in inc.lines:
        if ln.source == "job" and ln.host == host.name:
            lr = inc.culprit_gpu if inc.culprit_gpu is not None else rng.randrange(8)
            if ln.kind == "nccl_async_error":
                text = f"{_nccl_prefix(host.name, base_pid + 1 + lr, lr)} {ln.text}"
            else:
                text = f"[rank{node * 8 + lr}]: {ln.text}"
            out.append((ln.t, Marked(f"{c(ln.t)} {text}", ln, inc.index)))
    # peers whose transfers to the vanished host fail
    if host.name in inc.peer_error_hosts:
        target = cluster.host(inc.culprit_host or inc.extra_hosts[0]
                              if (inc.culprit_host or inc.extra_hosts) else host.name)
        lr = rng.randrange(8)
        tt = inc.t_fault + rng.uniform(5, 25)
        stamp = f"[{timefmt.one(tt, zone).strftime('%Y-%m-%d %H:%M:%S')}] " \
            if nccl_stamps else ""
        gids = (f" localGid ::ffff:{host.ip} remoteGids ::ffff:{target.ip}"
                if nic == "roce" else "")
        text = (f"{stamp}{_nccl_prefix(host.name, base_pid + 1 + lr, lr)} "
                f"transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                f"{target.ip}<{rng.randrange(30000, 60000)}> with status=12 opcode=0 "
                f"len=0 vendor err 129 (Send){gids}")
        ln = Line(tt, "job", text, host.name, role="symptom", kind="nccl_ib_error")
        out.append((tt, Marked(f"{c(tt)} {text}", ln, inc.index)))
    out.extend(_ending(attempt, host, node, base_pid, zone, rng))
    out.sort(key=lambda x: x[0])
    for _t, item in out:
        yield item


def _ending(attempt: Attempt, host: Host, node: int, base_pid: int, zone: ZoneInfo,
            rng: random.Random) -> list[tuple[float, object]]:
    inc = attempt.incident
    assert inc is not None
    c = timefmt.collector
    jid = attempt.job_id
    lines: list[tuple[float, object]] = []
    when = timefmt.slurm(inc.t_fail, zone)
    if inc.end_mode == "watchdog":
        t_wd = inc.t_fault + COLLECTIVE_TIMEOUT_S + rng.uniform(1, 3)
        seq = 400_000 + inc.index * 997
        dead = inc.straggler_rank
        if dead is None and inc.component in GPU_DEAD:
            dead = inc.culprit_rank
        # Only timeouts and nothing else: the truth marks the straggler host's first
        # timeout line as the root (the rank that never joined is the culprit).
        mark_root = (inc.component == "NCCL Watchdog Timeouts"
                     and host.name == inc.culprit_host)
        for lr in range(8):
            r = node * 8 + lr
            if r == dead:
                continue
            tt = t_wd + lr * 0.0003
            g = f"[rank{r}]:[E{timefmt.glog(tt, zone)}"
            ran = int(COLLECTIVE_TIMEOUT_S * 1000 + rng.randrange(20, 200))
            for j, text in enumerate((
                f"{g} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                f"NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for {ran} "
                "milliseconds before timing out.",
                f"{g} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception "
                f"(either an error or timeout) detected by watchdog at work: {seq}, last "
                f"enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
                f"{g} ProcessGroupNCCL.cpp:630] [Rank {r}] Some NCCL operations have "
                "failed or timed out. Due to the asynchronous nature of CUDA kernels, "
                "subsequent GPU operations might run on corrupted/incomplete data.",
                f"{g} ProcessGroupNCCL.cpp:636] [Rank {r}] To avoid data inconsistency, "
                "we are taking the entire process down.",
            )):
                line = f"{c(tt)} {text}"
                if mark_root and j == 0:
                    mark_root = False
                    ln = Line(tt, "job", text, host.name, role="root", kind="nccl_watchdog")
                    lines.append((tt, Marked(line, ln, inc.index)))
                else:
                    lines.append((tt, line))
        te = t_wd + 2
        lines.append((te, f"{c(te)} E{timefmt.glog(te, zone)[:-3]} {base_pid} torch/"
                          "distributed/elastic/multiprocessing/api.py:869] failed "
                          f"(exitcode: -6) local_rank: 0 (pid: {base_pid + 1}) of binary: "
                          "/usr/bin/python3"))
    elif inc.end_mode == "node_fail":
        if host.name != inc.culprit_host:
            lines.append((inc.t_fail, f"{c(inc.t_fail)} slurmstepd: error: *** JOB {jid} ON "
                          f"{host.name} CANCELLED AT {when} DUE TO NODE FAILURE, SEE "
                          "SLURMCTLD LOG FOR DETAILS ***"))
    elif inc.end_mode == "crash":
        origin = inc.culprit_host or (inc.extra_hosts[0] if inc.extra_hosts
                                      else attempt.hosts[0])
        if host.name == origin:
            te = inc.t_fail - 1
            lines.append((te, f"{c(te)} E{timefmt.glog(te, zone)[:-3]} {base_pid} torch/"
                              "distributed/elastic/multiprocessing/api.py:869] failed "
                              f"(exitcode: 1) local_rank: {inc.culprit_gpu or 0} (pid: "
                              f"{base_pid + 1}) of binary: /usr/bin/python3"))
        else:
            lines.append((inc.t_fail, f"{c(inc.t_fail)} slurmstepd: error: *** STEP "
                          f"{jid}.0 ON {host.name} CANCELLED AT {when} ***"))
    else:  # planned
        lines.append((inc.t_fail, f"{c(inc.t_fail)} slurmstepd: error: *** JOB {jid} ON "
                      f"{host.name} CANCELLED AT {when} ***"))
    return lines


def trainer_lines(attempt: Attempt, zone: ZoneInfo, step_seconds: int, ckpt_every: int,
                  run: str, seed: int) -> Iterator[object]:
    """Rank 0's trainer log for one attempt: progress, checkpoints, the end."""
    rng = random.Random(f"{seed}:trainer:{attempt.job_id}:{attempt.attempt}")
    fmt = timefmt.trainer
    inc = attempt.incident
    stop = inc.t_fault if inc else attempt.end
    t0 = attempt.first_step
    yield (f"{fmt(t0 - 4, zone)} INFO resuming from checkpoint step="
           f"{attempt.first_step_no - 1} attempt={attempt.attempt} hosts="
           f"{len(attempt.hosts)}")
    step = attempt.first_step_no
    special = sorted((ln for ln in (inc.lines if inc else []) if ln.source == "trainer"),
                     key=lambda ln: ln.t)
    k = 0
    n = steps_until(t0, stop, step_seconds)
    for i in range(n):
        t = t0 + i * step_seconds
        while k < len(special) and special[k].t <= t:
            yield from _trainer_special(special[k], fmt(special[k].t, zone), inc.index)
            k += 1
        loss = 1.6 + 2.5 / math.sqrt(1 + step / 2000) + rng.gauss(0, 0.01)
        yield (f"{fmt(t, zone)} INFO step={step} loss={loss:.4f} "
               f"grad_norm={abs(rng.gauss(0.4, 0.05)):.2f} "
               f"tokens_per_s={rng.gauss(2.9e7, 2e5):.3e}")
        if (i + 1) % ckpt_every == 0:
            yield (f"{fmt(t + 0.5, zone)} INFO checkpoint saved step={step} "
                   f"path=/ckpt/{run}/step_{step:07d} seconds={rng.uniform(30, 45):.1f}")
        step += 1
    for ln in special[k:]:
        yield from _trainer_special(ln, fmt(ln.t, zone), inc.index)
    if inc is not None and inc.planned:
        tc = inc.t_fail - 5
        yield f"{fmt(tc - 30, zone)} INFO received SIGTERM: saving checkpoint before exit"
        yield (f"{fmt(tc, zone)} INFO checkpoint saved step={attempt.last_step_no} "
               f"path=/ckpt/{run}/step_{attempt.last_step_no:07d} seconds=29.8")


def _trainer_special(ln: Line, stamp: str, incident: int) -> Iterator[object]:
    first, *rest = ln.text.split("\n")
    yield Marked(f"{stamp} {first}", ln, incident)
    yield from rest
