"""Simulator presets: TOML files in ``fixtures/presets``, loaded into one typed object.

A preset says how big the cluster is, how long the run lasts, which mix of root causes
it suffers and how dirty its logs are; the simulator derives everything else from it
and the seed.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from faultline.fixtures import fixtures_dir
from faultline.schemas.taxonomy import load_taxonomy

MIXES = ("table5", "uniform", "weights", "each")


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    hosts: int
    spare_hosts: int
    start: dt.datetime  # local wall time in `tz`
    days: float
    tz: str
    host_pattern: str
    fqdn_suffix: str
    nic: str
    mix: str
    unexpected: int
    planned: int
    step_seconds: int
    checkpoint_every_steps: int
    kernel_routine_per_host_day: int
    nccl_info_lines_per_rank: int
    other_jobs: int
    kernel_shapes: dict[str, float]
    gzip_rotated: bool
    rotate_days: int
    gzip_job_fraction: float
    weights: dict[str, float] = field(default_factory=dict)
    extra_unexpected: int = 0
    gpus_per_host: int = 8
    hosts_csv: bool = True  # the corpus layout makes hosts.csv optional

    def host_name(self, i: int) -> str:
        return self.host_pattern.format(i=i, rack=i // 16, slot=i % 16)

    @property
    def all_hosts(self) -> int:
        return self.hosts + self.spare_hosts


def preset_path(name: str) -> Path:
    return fixtures_dir() / "presets" / f"{name}.toml"


def preset_names() -> list[str]:
    return sorted(p.stem for p in (fixtures_dir() / "presets").glob("*.toml"))


def load_preset(name_or_path: str) -> Preset:
    """Load a preset by name (``fixtures/presets/NAME.toml``) or from a TOML path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = preset_path(name_or_path)
    if not path.is_file():
        raise ValueError(f"unknown preset {name_or_path!r}; known: "
                         f"{', '.join(preset_names())}")
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    raw["start"] = dt.datetime.fromisoformat(raw["start"])
    raw.setdefault("unexpected", 0)
    preset = Preset(name=path.stem, **raw)
    _validate(preset)
    return preset


def _validate(p: Preset) -> None:
    if p.mix not in MIXES:
        raise ValueError(f"{p.name}: mix must be one of {MIXES}")
    names = {c.component for c in load_taxonomy().table5}
    unknown = set(p.weights) - names
    if unknown:
        raise ValueError(f"{p.name}: unknown components in weights: {unknown}")
    if p.mix == "weights" and not p.weights:
        raise ValueError(f"{p.name}: mix 'weights' needs a [weights] table")
    if abs(sum(p.kernel_shapes.values()) - 1.0) > 0.02:
        raise ValueError(f"{p.name}: kernel_shapes must sum to 1")
    if p.hosts < 2 or p.gpus_per_host != 8:
        raise ValueError(f"{p.name}: need >= 2 hosts of 8 GPUs (HGX layout)")
