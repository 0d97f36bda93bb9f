"""Labeled free text (drain reasons, admin comments, tracebacks) from ``fixtures/text``.

The same templates feed the simulator (which writes them into logs) and the text
classifiers (which train on some wording families and are scored on the others), so
both read them through this module.
"""

from __future__ import annotations

import csv
import random
import string
import tomllib
from dataclasses import dataclass
from functools import cache

from faultline.fixtures import fixtures_dir

PLACEHOLDERS = ("host", "gpu", "serial", "pci", "xid", "port", "switch", "ticket", "date",
                "dimm", "psu", "fan", "nvme", "ver", "user", "rank")


# Xids that fit a component, for templates that name one (fixtures/text/README.md).
XIDS_BY_COMPONENT: dict[str, tuple[int, ...]] = {
    "Faulty GPU": (79, 74, 62, 46, 109, 110, 143, 158, 169, 136),
    "GPU HBM3 Memory": (48, 63, 64, 94, 95, 140, 171),
    "GPU SRAM Memory": (48, 172, 95, 140),
    "GPU System Processor": (119, 120),
    "Software Bug": (13, 31, 43),
    "Power Supply": (54,),
}


@dataclass(frozen=True)
class Template:
    kind: str  # drain_reason | admin_comment | traceback
    label: str  # component (or Software Bug / Dependency for tracebacks)
    family: str
    text: str
    exc_type: str = ""


@cache
def templates() -> tuple[Template, ...]:
    base = fixtures_dir() / "text"
    out: list[Template] = []
    with (base / "free_text.csv").open(encoding="utf-8", newline="") as f:
        out += [Template(r["kind"], r["component"], r["family"], r["template"])
                for r in csv.DictReader(f)]
    tb = tomllib.loads((base / "tracebacks.toml").read_text(encoding="utf-8"))
    out += [Template("traceback", t["label"], t["family"], t["text"].rstrip("\n"),
                     t.get("exc_type", "")) for t in tb["traceback"]]
    return tuple(out)


def choose(rng: random.Random, kind: str, label: str) -> Template | None:
    pool = [t for t in templates() if t.kind == kind and t.label == label]
    return rng.choice(pool) if pool else None


def fill(template: str, slots: dict[str, object]) -> str:
    """Fill ``{name}`` placeholders; unknown or missing names are left as written."""
    out = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            out.append(str(slots[name]) if name in slots else "{" + name + "}")
    return "".join(out)


def random_slots(rng: random.Random, component: str | None = None,
                 **known: object) -> dict[str, object]:
    """Plausible values for every placeholder, overridden by what is known; ``{xid}``
    fits ``component`` when one is given."""
    slots: dict[str, object] = {
        "host": f"node{rng.randrange(10000):04d}",
        "gpu": rng.randrange(8),
        "serial": str(1650120000000 + rng.randrange(10**9)),
        "pci": f"0000:{rng.choice(['18', '2a', '3a', '5d', '9a', 'ab', 'ba', 'db'])}:00.0",
        "xid": rng.choice(XIDS_BY_COMPONENT.get(component or "", (79, 48, 74, 119))),
        "port": rng.choice([f"mlx5_{rng.randrange(8)}", f"ib{rng.randrange(8)}"]),
        "switch": f"leaf-r{rng.randrange(1, 40)}-s{rng.randrange(1, 9)}",
        "ticket": f"{rng.choice(['INC', 'HW', 'RMA', 'CASE'])}-{rng.randrange(10000, 99999)}",
        "date": f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        "dimm": f"CPU{rng.randrange(2)}_DIMM_{rng.choice('ABCDEFGH')}{rng.randrange(1, 3)}",
        "psu": f"PSU{rng.randrange(1, 5)}",
        "fan": f"FAN{rng.randrange(1, 9)}",
        "nvme": f"nvme{rng.randrange(4)}n1",
        "ver": rng.choice(["550.90.07", "550.127.05", "560.35.03", "28.39.1002"]),
        "user": rng.choice(["jsmith", "akumar", "lchen", "mgarcia", "oncall"]),
        "rank": rng.randrange(16384),
    }
    slots.update({k: v for k, v in known.items() if v is not None})
    return slots
