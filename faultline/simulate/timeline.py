"""The run's schedule: attempts, the interruption that ends each, gaps and progress.

Everything here is small (hundreds of attempts), computed up front and kept in memory;
the log writers stream the large volumes from it. Times are UTC epoch seconds (floats)
until a writer formats them in the file's own convention.
"""

from __future__ import annotations

import random

from faultline.schemas.taxonomy import PLANNED, load_taxonomy
from faultline.simulate.cluster import Cluster
from faultline.simulate.config import Preset
from faultline.simulate.model import COLLECTIVE_TIMEOUT_S, Attempt, Incident, Timeline
from faultline.simulate.signatures import plan_incident


def component_counts(p: Preset, rng: random.Random) -> list[str]:
    """The unexpected interruptions' components, in a random order."""
    table5 = load_taxonomy().table5
    names = [c.component for c in table5]
    if p.mix == "uniform":
        weights = {n: 1.0 for n in names}
        total = p.unexpected
    elif p.mix == "weights":
        weights = {n: float(p.weights.get(n, 0)) for n in names}
        total = p.unexpected
    else:
        weights = {c.component: float(c.published_interruptions) for c in table5}
        total = p.unexpected if p.mix == "table5" else p.extra_unexpected
    counts = _largest_remainder(weights, total)
    if p.mix == "each":
        counts = {n: counts[n] + 1 for n in names}
    out = [n for n in names for _ in range(counts[n])]
    rng.shuffle(out)
    return out


def _largest_remainder(weights: dict[str, float], total: int) -> dict[str, int]:
    wsum = sum(weights.values())
    exact = {n: total * w / wsum for n, w in weights.items()}
    counts = {n: int(v) for n, v in exact.items()}
    rest = total - sum(counts.values())
    for n in sorted(exact, key=lambda n: (counts[n] - exact[n], n))[:rest]:
        counts[n] += 1
    return counts


def build_timeline(p: Preset, cluster: Cluster, seed: int, start_utc: float) -> Timeline:
    rng = random.Random(f"{seed}:timeline:{p.name}")
    tax = load_taxonomy()
    comps = component_counts(p, rng)
    planned_slots = sorted(rng.sample(range(len(comps) + p.planned), p.planned))
    kinds: list[str | None] = []
    it = iter(comps)
    for i in range(len(comps) + p.planned):
        kinds.append(PLANNED if i in planned_slots else next(it))
    n = len(kinds)
    end = start_utc + p.days * 86400
    # Overheads sized so effective training time lands near Meta's (90-95%).
    gaps = [rng.uniform(900, 1800) if k == PLANNED else rng.lognormvariate(5.0, 0.5)
            for k in kinds]  # planned windows 15-30 min; restarts ~2.5 min median
    startup = [rng.uniform(60, 120) for _ in range(n + 1)]
    hang = [COLLECTIVE_TIMEOUT_S + 60 for _ in kinds]  # upper bound of fault->fail
    budget = end - start_utc - sum(gaps) - sum(startup) - sum(hang)
    if budget <= 0:
        raise ValueError(f"{p.name}: too many interruptions for {p.days} days")
    raw = [rng.expovariate(1.0) + 0.15 for _ in range(n + 1)]
    scale = budget / sum(raw)
    run_len = [r * scale for r in raw]

    incidents: list[Incident] = []
    attempts: list[Attempt] = []
    hosts = list(cluster.run_hosts)
    spares = list(cluster.spares)
    t = start_utc
    step_no = 1
    job = 1_000_000 + rng.randrange(1000) * 1000
    for i in range(n + 1):
        first = t + startup[i]
        a = Attempt(job_id=str(job), attempt=i + 1, start=t, first_step=first, end=end,
                    hosts=tuple(hosts), first_step_no=step_no)
        attempts.append(a)
        if i == n:
            a.state = "RUNNING" if rng.random() < 0.5 else "COMPLETED"
            a.end = end
            _progress(a, p, end)
            break
        comp = kinds[i]
        inc = Incident(index=i, component=comp, category=tax.category_of(comp),
                       planned=comp == PLANNED)
        inc.t_fault = first + run_len[i]
        a.incident = inc
        incidents.append(inc)
        plan_incident(inc, a, cluster, rng)
        a.end = inc.t_fail
        _progress(a, p, inc.t_fault)
        if inc.planned:  # the trainer checkpoints on the operator's SIGTERM
            a.last_ckpt_step, a.last_ckpt_time = a.last_step_no, inc.t_fail - 5.0
        a.state = {"planned": "CANCELLED by 0", "node_fail": "NODE_FAIL"}.get(
            inc.end_mode, "FAILED")
        # Slurm requeues some node failures under the same JobID.
        a.requeued = inc.end_mode == "node_fail" and rng.random() < 0.35
        if a.requeued:
            a.state = "REQUEUED"
        else:
            job += rng.randrange(1, 40)
        # Replace a host that broke with a spare; the broken one goes to repair.
        if inc.culprit_host and not inc.planned and inc.culprit_host in hosts and spares \
                and inc.category not in ("Dependency", "Unknown"):
            pos = hosts.index(inc.culprit_host)
            hosts[pos] = spares.pop(0)
            spares.append(inc.culprit_host)
        step_no = a.last_ckpt_step + 1
        t = inc.t_fail + gaps[i]
    return Timeline(run_name="llama3-405b", user="trainer", start=start_utc, end=end,
                    attempts=attempts, incidents=incidents)


def steps_until(first_step: float, until: float, step_seconds: int) -> int:
    """Number of steps an attempt logs: one at first_step, then every step_seconds."""
    return int((until - first_step) // step_seconds) + 1 if until >= first_step else 0


def _progress(a: Attempt, p: Preset, until: float) -> None:
    """Steps and checkpoints from the attempt's first step up to ``until``.

    The trainer log writer uses the same rule (:func:`steps_until`): step i (0-based) at
    ``first_step + i * step_seconds``; a checkpoint right after every K-th step.
    """
    n = steps_until(a.first_step, until, p.step_seconds)
    k = p.checkpoint_every_steps
    a.last_step_no = a.first_step_no + n - 1
    ckpts = n // k
    a.last_ckpt_step = a.first_step_no - 1 + ckpts * k
    a.last_ckpt_time = (a.first_step + (ckpts * k - 1) * p.step_seconds + 0.5 if ckpts
                        else a.first_step)
