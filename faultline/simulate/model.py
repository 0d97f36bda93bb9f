"""The simulator's ground-truth objects: incidents, attempts and the run's timeline."""

from __future__ import annotations

from dataclasses import dataclass, field

# How an attempt ends, which decides the cascade the logs show:
#   watchdog  - a rank stops; every other rank times out after the collective timeout
#   node_fail - the host dies; slurmctld sees it not responding and kills the job
#   crash     - a process raises; srun tears the step down within seconds
#   planned   - an operator kills the job at a maintenance reservation
END_MODES = ("watchdog", "node_fail", "crash", "planned")
COLLECTIVE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Line:
    """One line an incident (or the noise) puts into some log, before formatting.

    ``source`` names the file family: kernel, sel (per host), job (per job and host),
    trainer (per job), slurmctld. ``role``/``kind``/``xid`` are ground truth only:
    they say what the line is evidence of, never appear in the corpus.
    """

    t: float
    source: str
    text: str
    host: str | None = None
    tag: str = "kernel"  # syslog program tag of kernel-file lines
    role: str = "symptom"  # root | corroborating | symptom | noise
    kind: str = ""
    xid: int | None = None


@dataclass
class Incident:
    """One interruption as the world caused it (the ground truth)."""

    index: int
    component: str
    category: str
    planned: bool
    variant: str = ""
    end_mode: str = "watchdog"
    t_fault: float = 0.0  # when the root signal appears
    t_fail: float = 0.0  # when the attempt ends
    culprit_host: str | None = None
    culprit_gpu: int | None = None  # GPU index on the culprit host
    culprit_rank: int | None = None  # global rank of the culprit GPU
    extra_hosts: tuple[str, ...] = ()  # other hosts that show the root signal
    drain_reason: str | None = None
    admin_comment: str | None = None
    text_family: str | None = None
    reservation: str | None = None
    straggler_rank: int | None = None  # rank that never joined (watchdog cascades)
    peer_error_hosts: tuple[str, ...] = ()  # hosts whose NCCL sees the culprit vanish
    lines: list[Line] = field(default_factory=list)


@dataclass
class Attempt:
    job_id: str
    attempt: int  # 1-based within the run
    start: float
    first_step: float
    end: float
    hosts: tuple[str, ...]
    first_step_no: int
    last_step_no: int = 0
    last_ckpt_time: float = 0.0
    last_ckpt_step: int = 0
    incident: Incident | None = None
    requeued: bool = False  # the next attempt keeps this JobID
    state: str = "RUNNING"

    @property
    def ranks(self) -> int:
        return 8 * len(self.hosts)


@dataclass
class Timeline:
    run_name: str
    user: str
    start: float
    end: float
    attempts: list[Attempt]
    incidents: list[Incident]
