"""Slurm's view: sacct job records and the slurmctld log, for the run and everyone else."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from faultline.simulate import timefmt
from faultline.simulate.model import Line, Timeline
from faultline.simulate.output import Marked

SACCT_COLUMNS = ("JobID", "JobName", "User", "Partition", "State", "Start", "End",
                 "Elapsed", "NNodes", "NodeList", "ExitCode", "Reason", "AdminComment")


def compress_hosts(names: list[str]) -> str:
    """Slurm host-list syntax: ``node[0001-0003,0007]``, ``gpu-[9-10]``."""
    split: list[tuple[str, str]] = []
    plain: list[str] = []
    for n in names:
        i = len(n)
        while i and n[i - 1].isdigit():
            i -= 1
        if i == len(n):
            plain.append(n)
        else:
            split.append((n[:i], n[i:]))
    # A prefix is zero-padded to a width if any of its numbers has a leading zero.
    padded = {p: len(d) for p, d in split if d.startswith("0") and len(d) > 1}
    groups: dict[tuple[str, int], list[int]] = {}
    for prefix, digits in split:
        width = padded.get(prefix, 0) if len(digits) == padded.get(prefix) else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    parts = list(plain)
    for (prefix, width), nums in groups.items():
        nums.sort()
        ranges, start, prev = [], nums[0], nums[0]
        for x in [*nums[1:], None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            ranges.append(f"{start:0{width}d}" if start == prev
                          else f"{start:0{width}d}-{prev:0{width}d}")
            if x is not None:
                start = prev = x
        parts.append(prefix + ranges[0] if len(nums) == 1
                     else f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


@dataclass
class OtherJob:
    job_id: str
    name: str
    user: str
    state: str
    start: float
    end: float
    hosts: list[str]
    exit_code: str
    comment: str = ""


def other_jobs(n: int, spares: list[str], t0: float, t1: float, seed: int
               ) -> list[OtherJob]:
    rng = random.Random(f"{seed}:others")
    users = ["akumar", "lchen", "mgarcia", "bwong", "ppatel", "svc-eval"]
    states = [("COMPLETED", "0:0", 55), ("FAILED", "1:0", 15), ("CANCELLED by 1042", "0:15",
              10), ("TIMEOUT", "0:0", 7), ("OUT_OF_MEMORY", "0:125", 5),
              ("NODE_FAIL", "0:0", 3), ("PREEMPTED", "0:0", 5)]
    jobs = []
    next_id = 500_000
    for i in range(n):
        state, code, _w = rng.choices(states, weights=[s[2] for s in states])[0]
        start = rng.uniform(t0, t1 - 600)
        end = min(start + rng.expovariate(1 / 7200) + 60, t1)
        k = max(1, min(len(spares), int(rng.expovariate(0.5)) + 1))
        hosts = sorted(rng.sample(spares, k))
        array = rng.random() < 0.12  # an array task keeps its index in the id
        job_id = f"{next_id}_{rng.randrange(1, 64)}" if array else str(next_id)
        next_id += rng.randrange(1, 30)
        comment = ""
        if rng.random() < 0.05:
            comment = "user asked to keep\noutput for debugging"  # embedded newline
        jobs.append(OtherJob(job_id, rng.choice(["eval", "sweep", "sft-7b", "bench",
                                                 "data-prep"]) + f"-{i % 17}",
                             rng.choice(users), state, start, end, hosts, code, comment))
    return jobs


def _elapsed(seconds: float) -> str:
    s = int(max(seconds, 0))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def sacct_lines(tl: Timeline, others: list[OtherJob], zone: ZoneInfo) -> Iterator[str]:
    fmt = timefmt.slurm
    rows: list[tuple[float, list[str]]] = []
    for a in tl.attempts:
        inc = a.incident
        running = a.state == "RUNNING"
        end = "Unknown" if running else fmt(a.end, zone)
        code = {"COMPLETED": "0:0", "RUNNING": "0:0", "CANCELLED by 0": "0:15"}.get(
            a.state, "1:0" if a.state == "FAILED" else "0:0")
        comment = (inc.admin_comment or "") if inc else ""
        nodelist = compress_hosts(list(a.hosts))
        base = [a.job_id, tl.run_name, tl.user, "train", a.state, fmt(a.start, zone), end,
                _elapsed(a.end - a.start), str(len(a.hosts)), nodelist, code,
                "None", comment]
        rows.append((a.start, base))
        step_state = "RUNNING" if running else ("CANCELLED" if a.state.startswith(
            "CANCELLED") or a.state in ("NODE_FAIL", "REQUEUED") else
            "FAILED" if a.state == "FAILED" else "COMPLETED")
        for step, hosts in ((".batch", a.hosts[:1]), (".extern", a.hosts), (".0", a.hosts)):
            st = "COMPLETED" if step == ".extern" and not running else step_state
            rows.append((a.start + 1e-6, [a.job_id + step, step[1:], "", "", st,
                                          fmt(a.start, zone), end,
                                          _elapsed(a.end - a.start), str(len(hosts)),
                                          compress_hosts(list(hosts)), code, "", ""]))
    for j in others:
        rows.append((j.start, [j.job_id, j.name, j.user, "batch", j.state,
                               fmt(j.start, zone), fmt(j.end, zone),
                               _elapsed(j.end - j.start), str(len(j.hosts)),
                               compress_hosts(j.hosts), j.exit_code, "None", j.comment]))
        rows.append((j.start + 1e-6, [j.job_id + ".batch", "batch", "", "",
                                      j.state.split(" ")[0], fmt(j.start, zone),
                                      fmt(j.end, zone), _elapsed(j.end - j.start), "1",
                                      j.hosts[0], j.exit_code, "", ""]))
    rows.sort(key=lambda r: r[0])
    yield "|".join(SACCT_COLUMNS)
    for _t, r in rows:
        yield "|".join(r)


def slurmctld_lines(tl: Timeline, others: list[OtherJob], zone: ZoneInfo,
                    reboots: dict[str, list[float]], seed: int) -> Iterator[object]:
    rng = random.Random(f"{seed}:slurmctld")
    out: list[tuple[float, object]] = []

    def add(t: float, text: str, line: Line | None = None, inc: int | None = None) -> None:
        s = f"{timefmt.slurmctld(t, zone)} {text}"
        out.append((t, Marked(s, line, inc) if line else s))

    for a in tl.attempts:
        add(a.start, f"sched: Allocate JobId={a.job_id} NodeList="
                     f"{compress_hosts(list(a.hosts))} #CPUs={len(a.hosts) * 192} "
                     "Partition=train")
        inc = a.incident
        if inc is None:
            continue
        jid = a.job_id
        h = inc.culprit_host
        if inc.end_mode == "node_fail" and h:
            root = inc.variant == "silent_reboot"
            t1 = inc.t_fault + rng.uniform(30, 60)
            ln = Line(t1, "slurmctld", "", h, role="root" if root else "symptom",
                      kind="node_not_responding")
            add(t1, f"error: Nodes {h} not responding", ln, inc.index)
            ln2 = Line(inc.t_fail - 1, "slurmctld", "", h, role="symptom",
                       kind="node_not_responding")
            add(inc.t_fail - 1, f"error: Nodes {h} not responding, setting DOWN", ln2,
                inc.index)
            ln3 = Line(inc.t_fail, "slurmctld", "", h, role="symptom", kind="job_killed")
            add(inc.t_fail, f"Killing JobId={jid} on failed node {h}", ln3, inc.index)
            if a.requeued:
                add(inc.t_fail + 0.2, f"requeue job JobId={jid} due to failure of node {h}")
            for rb in reboots.get(h, []):
                if rb > inc.t_fail:
                    add(rb + 95, f"validate_node_specs: Node {h} unexpectedly rebooted "
                                 f"boot_time={int(rb)} last response={int(inc.t_fault)}")
                    add(rb + 95.5, f"Node {h} now responding")
                    break
        elif inc.end_mode == "planned":
            res_start = timefmt.slurm(inc.t_fault, zone)
            res_end = timefmt.slurm(inc.t_fault + 2400, zone)
            tc = inc.t_fault - rng.uniform(2 * 3600, 20 * 3600)
            ln = Line(tc, "slurmctld", "", None, role="corroborating", kind="reservation")
            add(tc, f"sched: Created reservation={inc.reservation} start={res_start} "
                    f"end={res_end} nodes={compress_hosts(list(a.hosts))} users=root "
                    "flags=MAINT", ln, inc.index)
            ln = Line(inc.t_fault, "slurmctld", "", None, role="root", kind="operator_kill")
            add(inc.t_fault, f"_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId={jid} uid 0", ln,
                inc.index)
            if inc.variant in ("driver_upgrade", "fw_rollout"):
                add(inc.t_fail + 20, f"reboot request queued for nodes "
                                     f"{compress_hosts(list(a.hosts))}")
        else:
            status = "WTERMSIG 6" if inc.end_mode == "watchdog" else "WEXITSTATUS 1"
            add(inc.t_fail, f"_job_complete: JobId={jid} {status}")
            add(inc.t_fail + 0.01, f"_job_complete: JobId={jid} done")
        if inc.drain_reason and h:
            td = inc.t_fail + rng.uniform(60, 1800)
            ln = Line(td, "slurmctld", inc.drain_reason, h, role="corroborating",
                      kind="node_drain")
            add(td, f"update_node: node {h} reason set to: {inc.drain_reason}", ln,
                inc.index)
            add(td + 0.001, f"update_node: node {h} state set to DRAINING")
    for j in others:
        add(j.start, f"sched: Allocate JobId={j.job_id} NodeList={compress_hosts(j.hosts)}"
                     f" #CPUs={len(j.hosts) * 192} Partition=batch")
        add(j.end, f"_job_complete: JobId={j.job_id} done")
    t = tl.start
    while t < tl.end:  # the controller's own heartbeat
        add(t, f"backfill: completed testing {rng.randrange(1, 60)}({rng.randrange(1, 60)})"
               f" jobs, usec={rng.randrange(800, 90000)}")
        t += 3600
    out.sort(key=lambda x: x[0])
    for _t, item in out:
        yield item
