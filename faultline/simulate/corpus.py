"""Write a whole simulated corpus, and its ground truth beside it (never inside it).

Layout (``../shared/CORPUS.md``)::

    OUT/corpus/slurm/{sacct.txt,slurmctld.log}
    OUT/corpus/hosts/<host>/{kern.log*,dmesg.txt,sel.txt,gpus.csv}
    OUT/corpus/hosts.csv
    OUT/corpus/jobs/<jobid>/{<host>.log,train.log}
    OUT/truth/{interruptions.csv,files.csv,signals.csv,summary.json}

Memory stays bounded: the timeline and per-host plans are small; routine lines and
per-rank cascades are streamed file by file.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from faultline.schemas.taxonomy import load_taxonomy
from faultline.simulate import flightrec, timefmt
from faultline.simulate.cluster import Cluster, Host, build_cluster
from faultline.simulate.config import Preset, load_preset
from faultline.simulate.jobs import job_host_lines, trainer_lines
from faultline.simulate.kernel import HostKernelPlan, kernel_stream
from faultline.simulate.layouts import get_layout
from faultline.simulate.model import Line, Timeline
from faultline.simulate.output import CorpusOutput, FileTruth, Marked
from faultline.simulate.slurm import other_jobs, sacct_lines, slurmctld_lines
from faultline.simulate.timeline import build_timeline

DRIVERS = ("550.54.15", "550.90.07", "550.127.05", "560.35.03")
HOST_DOWN = {"Power Supply", "Server Chassis", "CPU", "Host Maintenance"}


@dataclass
class SimResult:
    out: Path
    files: int
    lines: int
    bytes: int
    interruptions: int
    planned: int
    seconds: float
    effective_training_time: float


def simulate(preset_name: str, out: Path, seed: int = 0,
             progress: Callable[[str, int, int], None] | None = None,
             layout: str = "canonical", flight_recorder: int = 0) -> SimResult:
    """Generate the preset's corpus under ``out`` (deterministic per preset, seed and
    layout; see :mod:`faultline.simulate.layouts` for the layouts). ``flight_recorder``
    adds the Flight Recorder dumps of that many watchdog hangs
    (:mod:`faultline.simulate.flightrec`) and ``truth/hangs.csv``."""
    t_start = time.perf_counter()
    p = load_preset(preset_name)
    zone = ZoneInfo(p.tz)
    start_utc = p.start.replace(tzinfo=zone).timestamp()
    cluster = build_cluster(p, seed)
    tl = build_timeline(p, cluster, seed, start_utc)
    plans, sel_lines, reboots = _host_plans(p, cluster, tl, seed)
    others = other_jobs(p.other_jobs, list(cluster.others), tl.start, tl.end, seed)
    _history(others, plans, cluster, seed)
    o = CorpusOutput(out, get_layout(layout), zone=zone, start=p.start)
    step = progress or (lambda _what, _i, _n: None)

    hosts = cluster.hosts
    for i, h in enumerate(hosts):
        step("hosts", i, len(hosts))
        _write_host(o, p, h, plans[h.name], sel_lines.get(h.name, []), tl, zone, seed)
    _write_jobs(o, p, cluster, tl, zone, seed, step)
    hang_truth = _write_dumps(o, tl, seed, flight_recorder) if flight_recorder else None
    o.write("slurm/sacct.txt", sacct_lines(tl, others, zone), "sacct")
    o.write("slurm/slurmctld.log", slurmctld_lines(tl, others, zone, reboots, seed),
            "slurmctld")
    if p.hosts_csv:
        o.write("hosts.csv", _hosts_csv(cluster), "hosts")
    o.close()
    ett = _write_truth(out, p, seed, cluster, tl, o)
    if hang_truth is not None:
        with (out / "truth" / "hangs.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=flightrec.TRUTH_FIELDS)
            w.writeheader()
            w.writerows(hang_truth)
    return SimResult(out, o.n_files, o.total_lines, o.total_bytes, len(tl.incidents),
                     sum(i.planned for i in tl.incidents), time.perf_counter() - t_start,
                     ett)


def _write_dumps(o: CorpusOutput, tl: Timeline, seed: int, limit: int) -> list[dict]:
    """The dumps, counted as files of one line each (the reader counts a dump so)."""
    paths, truth = flightrec.write_dumps(o.corpus, tl.attempts, seed, limit)
    for rel in paths:
        size = (o.corpus / rel).stat().st_size
        o.written[rel] = FileTruth(rel, "flight_recorder", 1, size, False)
        o.n_files += 1
        o.total_lines += 1
        o.total_bytes += size
    return truth


# --- planning per host ------------------------------------------------------------------

def _host_plans(p: Preset, cluster: Cluster, tl: Timeline, seed: int):
    rng = random.Random(f"{seed}:hostplans")
    plans = {h.name: HostKernelPlan(h) for h in cluster.hosts}
    sel: dict[str, list[tuple[Line, int | None]]] = defaultdict(list)
    reboots: dict[str, list[float]] = defaultdict(list)
    driver = DRIVERS[1]
    for h in cluster.hosts:  # every host was booted some days before the corpus starts
        plans[h.name].boots.append((tl.start - rng.uniform(2, 20) * 86400, driver, True))
    windows: list[tuple[float, float]] = []
    for inc in tl.incidents:
        windows.append((inc.t_fault - 1800, inc.t_fail + 900))
        for ln in inc.lines:
            if ln.source == "kernel" and ln.host:
                plans[ln.host].lines.append((ln, inc.index))
            elif ln.source == "sel" and ln.host:
                sel[ln.host].append((ln, inc.index))
        if inc.end_mode == "node_fail" and inc.culprit_host:
            plan = plans[inc.culprit_host]
            last = max((ln.t for ln in inc.lines if ln.host == inc.culprit_host
                        and ln.source == "kernel"), default=inc.t_fault)
            back = inc.t_fail + rng.uniform(600, 2400)
            plan.downs.append((last + 0.01, back))
            plan.boots.append((back, driver, False))
            # rsyslog leaves NUL runs after a hard crash: at least once per corpus
            plan.nul_at_crash = (plan.nul_at_crash or rng.random() < 0.5
                                 or not any(x.nul_at_crash for x in plans.values()))
            reboots[inc.culprit_host].append(back)
        if inc.planned and inc.variant in ("driver_upgrade", "fw_rollout"):
            if inc.variant == "driver_upgrade":
                driver = DRIVERS[min(DRIVERS.index(driver) + 1, len(DRIVERS) - 1)]
            attempt = next(a for a in tl.attempts if a.incident is inc)
            for name in attempt.hosts:
                back = inc.t_fail + rng.uniform(120, 900)
                plans[name].boots.append((back, driver, True))
    _noise(p, cluster, tl, plans, sel, windows, seed)
    # dirt: one host's log ends in a truncated line, a few carry bytes that are not UTF-8
    names = [h.name for h in cluster.hosts]
    plans[rng.choice(names)].truncate_end = True
    for name in rng.sample(names, max(1, len(names) // 50)):
        plans[name].bad_utf8 = True
    return plans, sel, reboots


def _quiet(t: float, windows: list[tuple[float, float]]) -> bool:
    return all(not (a <= t <= b) for a, b in windows)


def _noise(p: Preset, cluster: Cluster, tl: Timeline, plans, sel, windows, seed) -> None:
    """Benign lines at realistic rates: recovered link flaps, informational Xids."""
    rng = random.Random(f"{seed}:noise")
    days = p.days
    for h in cluster.hosts:
        plan = plans[h.name]
        for _ in range(_poisson(rng, 0.03 * days)):  # a flap every ~month per host
            t = rng.uniform(tl.start, tl.end - 60)
            if not _quiet(t, windows):
                continue
            nic_i = rng.randrange(8)
            _dev, pci, ifn = h.nic(nic_i)
            plan.lines.append((Line(t, "kernel", f"mlx5_core {pci} {ifn}: Link down",
                                    h.name, role="noise", kind="ib_link_down"), None))
            plan.lines.append((Line(t + rng.uniform(1, 8), "kernel",
                                    f"mlx5_core {pci} {ifn}: Link up", h.name,
                                    role="noise", kind="ib_link_up"), None))
        for _ in range(_poisson(rng, 0.01 * days)):  # a remap pending, no interruption
            t = rng.uniform(tl.start, tl.end - 60)
            if not _quiet(t, windows):
                continue
            g = h.gpus[rng.randrange(8)]
            plan.lines.append((Line(
                t, "kernel", f"NVRM: Xid ({g.xid_pci}): 63, pid='<unknown>', "
                f"name=<unknown>, Row Remapper: New row (0x0000000{rng.randrange(16**9):09x})"
                " marked for remapping, reset gpu to activate.", h.name, role="noise",
                kind="xid", xid=63), None))
        for _ in range(_poisson(rng, 0.5)):  # BMC housekeeping
            t = rng.uniform(tl.start, tl.end)
            sel[h.name].append((Line(t, "sel", "Event Logging Disabled SEL_Status | Log "
                                     "area reset/cleared | Asserted", h.name, role="noise",
                                     kind="sel_other"), None))


def _history(others, plans, cluster: Cluster, seed: int) -> None:
    """Other users' failed jobs leave hardware evidence too (history, not interruptions)."""
    rng = random.Random(f"{seed}:history")
    for j in others:
        if j.state == "FAILED" and rng.random() < 0.3:
            h = cluster.host(j.hosts[0])
            g = h.gpus[rng.randrange(8)]
            code, body = rng.choice([
                (43, "Ch 0000000a"),
                (13, "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range "
                     "Address"),
                (31, "Ch 0000000a, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 "
                     "faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ"),
                (79, "GPU has fallen off the bus."),
            ])
            t = j.end - rng.uniform(1, 30)
            plans[h.name].lines.append((Line(
                t, "kernel", f"NVRM: Xid ({g.xid_pci}): {code}, pid={rng.randrange(2000, 90000)}"
                f", name=python, {body}", h.name, role="history", kind="xid", xid=code), None))


def _poisson(rng: random.Random, lam: float) -> int:
    n, t = 0, rng.expovariate(1.0)
    while t < lam:
        n += 1
        t += rng.expovariate(1.0)
    return n


# --- writing ----------------------------------------------------------------------------

def _write_host(o: CorpusOutput, p: Preset, h: Host, plan: HostKernelPlan,
                sel: list[tuple[Line, int | None]], tl: Timeline, zone: ZoneInfo,
                seed: int) -> None:
    base = f"hosts/{h.name}"
    rng = random.Random(f"{seed}:host:{h.name}")
    fqdn = h.shape == "rfc3339" and rng.random() < 0.3
    shape = o.layout.kernel_shape(h.shape)
    if h.shape == "dmesg_t":
        o.write(f"{base}/dmesg.txt",
                kernel_stream(plan, tl.start, tl.end, p.kernel_routine_per_host_day, zone,
                              seed, fqdn, True, shape), "kernel", host=h.name)
    else:
        span = p.rotate_days * 86400
        n = max(1, int((tl.end - tl.start + span - 1) // span))
        for k in range(n - 1, -1, -1):  # oldest (highest number) first
            t1 = tl.end - k * span
            t0 = max(tl.start, t1 - span)
            name = "kern.log" if k == 0 else f"kern.log.{k}"
            gz = p.gzip_rotated and k >= 2
            o.write(f"{base}/{name}{'.gz' if gz else ''}",
                    kernel_stream(plan, t0, t1, p.kernel_routine_per_host_day, zone, seed,
                                  fqdn, k == 0, shape), "kernel", compress=gz, host=h.name)
    crlf = rng.random() < 0.2
    o.write(f"{base}/sel.txt", _sel_lines(sel, zone, rng), "sel",
            newline=b"\r\n" if crlf else b"\n", host=h.name)
    o.write(f"{base}/gpus.csv", _gpus_csv(h), "inventory", host=h.name)


def _sel_lines(sel: list[tuple[Line, int | None]], zone: ZoneInfo,
               rng: random.Random) -> Iterator[object]:
    skew = rng.choice([0.0] * 8 + [rng.uniform(-90, 90)] * 2)  # BMC clocks drift
    rows = sorted(sel, key=lambda x: x[0].t)
    for i, (ln, inc) in enumerate(rows, start=1):
        d, t = timefmt.sel(ln.t + skew, zone)
        text = f"{i:>4x} | {d} | {t} | {ln.text}"
        yield Marked(text, ln, inc) if ln.role != "noise" else text


def _gpus_csv(h: Host) -> Iterator[str]:
    yield "index, pci.bus_id, uuid, serial"
    for g in h.gpus:
        yield f"{g.index}, {g.smi_pci}, {g.uuid}, {g.serial}"


def _hosts_csv(cluster: Cluster) -> Iterator[str]:
    yield "host,aliases,addresses"
    for h in cluster.hosts:
        yield f"{h.name},{h.fqdn};{h.bmc},{h.ip}"


def _write_jobs(o: CorpusOutput, p: Preset, cluster: Cluster, tl: Timeline, zone: ZoneInfo,
                seed: int, step) -> None:
    rng = random.Random(f"{seed}:jobs")
    by_job: dict[str, list] = defaultdict(list)
    for a in tl.attempts:
        by_job[a.job_id].append(a)
    for n, (job_id, attempts) in enumerate(by_job.items()):
        step("jobs", n, len(by_job))
        gz = rng.random() < p.gzip_job_fraction
        stamps = rng.random() < 0.5  # NCCL >= 2.26 stamps its WARN lines
        hosts: list[str] = []
        for a in attempts:
            hosts += [h for h in a.hosts if h not in hosts]
        for name in hosts:
            host = cluster.host(name)
            lines = (line for a in attempts if name in a.hosts
                     for line in job_host_lines(a, host, cluster, zone, p.nic,
                                                p.nccl_info_lines_per_rank, seed, stamps))
            o.write(f"jobs/{job_id}/{name}.log{'.gz' if gz else ''}", lines, "job",
                    compress=gz)
        lines = (line for a in attempts
                 for line in trainer_lines(a, zone, p.step_seconds, p.checkpoint_every_steps,
                                           tl.run_name, seed))
        o.write(f"jobs/{job_id}/train.log", lines, "trainer")


def _write_truth(out: Path, p: Preset, seed: int, cluster: Cluster, tl: Timeline,
                 o: CorpusOutput) -> float:
    tax = load_taxonomy()
    rows = []
    down_total = lost_total = 0.0
    for i, a in enumerate(tl.attempts[:-1]):
        inc = a.incident
        nxt = tl.attempts[i + 1]
        lost = inc.t_fail - a.last_ckpt_time
        down = nxt.first_step - inc.t_fail
        lost_total += lost
        down_total += down
        host = cluster.host(inc.culprit_host) if inc.culprit_host else None
        gpu = host.gpus[inc.culprit_gpu] if host and inc.culprit_gpu is not None else None
        rows.append({
            "interruption": inc.index, "run": tl.run_name, "job_id": a.job_id,
            "attempt": a.attempt,
            "failed_at": dt.datetime.fromtimestamp(inc.t_fail, dt.UTC).isoformat(),
            "fault_at": dt.datetime.fromtimestamp(inc.t_fault, dt.UTC).isoformat(),
            "planned": inc.planned, "component": inc.component,
            "category": tax.category_of(inc.component), "variant": inc.variant,
            "end_mode": inc.end_mode, "culprit_host": inc.culprit_host or "",
            "culprit_gpu": "" if inc.culprit_gpu is None else inc.culprit_gpu,
            "culprit_gpu_serial": gpu.serial if gpu else "",
            "lost_seconds": round(lost, 3), "down_seconds": round(down, 3),
            "state": a.state, "text_family": inc.text_family or "",
            "drain_reason": inc.drain_reason or "", "admin_comment": inc.admin_comment or "",
        })
    with (out / "truth" / "interruptions.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["interruption"])
        w.writeheader()
        w.writerows(rows)
    first = tl.attempts[0].first_step
    last = tl.attempts[-1].end
    wall = last - first
    ett = (wall - down_total - lost_total) / wall
    counts: dict[str, int] = defaultdict(int)
    for inc in tl.incidents:
        counts[inc.component] += 1
    summary = {
        "preset": p.name, "seed": seed, "hosts": p.hosts, "spare_hosts": p.spare_hosts,
        "days": p.days, "tz": p.tz, "interruptions": len(tl.incidents),
        "planned": sum(i.planned for i in tl.incidents),
        "unexpected": sum(not i.planned for i in tl.incidents),
        "by_component": dict(sorted(counts.items())),
        "failures_per_day": sum(not i.planned for i in tl.incidents) / p.days,
        "effective_training_time": ett, "lost_seconds": lost_total,
        "downtime_seconds": down_total, "files": o.n_files, "lines": o.total_lines,
        "bytes": o.total_bytes,
    }
    if o.layout.name != "canonical":  # the canonical summary stays as it always was
        summary["layout"] = o.layout.name
    (out / "truth" / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return ett
