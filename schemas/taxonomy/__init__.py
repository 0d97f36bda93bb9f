"""The root-cause taxonomy: Table 5 components and NVIDIA's Xid catalog, as data.

The files beside this module are the truth (``taxonomy.toml``, ``table5.csv``,
``xid_catalog.csv``); this module only reads and validates them, so a fix to a row is
a data change with a version bump, never a code change. Validation is strict because
classifiers trust these rows: an Xid that points at an unknown component, or a
duplicate code, must fail at load time, not silently misclassify.
"""

from __future__ import annotations

import csv
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

XID_ROLES = ("root", "app", "follow_on", "informational", "unused")
#: roles whose rows must name a component
ATTRIBUTING_ROLES = ("root", "app")
PLANNED = "Planned Maintenance"
UNATTRIBUTED = "Unattributed"


@dataclass(frozen=True)
class Component:
    """One row of the breakdown table."""

    component: str
    category: str
    kind: str  # table5 | planned | unattributed
    published_interruptions: int | None
    published_percent: float | None
    sort_order: int


@dataclass(frozen=True)
class XidEntry:
    """One documented Xid code and what faultline makes of it."""

    xid: int
    name: str
    description: str
    resolution: str
    investigatory: str
    role: str
    component: str | None
    signal_family: str
    follows: tuple[str, ...]
    applies_to: tuple[str, ...]
    confidence: str
    source: str
    notes: str


@dataclass(frozen=True)
class Taxonomy:
    """Everything a classifier needs to name a root cause, with its version."""

    version: str
    components: tuple[Component, ...]
    xids: dict[int, XidEntry]
    table5_source: str
    xid_source: str
    xid_version: str
    meta: dict

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.component == name:
                return c
        raise KeyError(f"unknown component {name!r}")

    @property
    def component_names(self) -> tuple[str, ...]:
        return tuple(c.component for c in self.components)

    @property
    def table5(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.kind == "table5")

    def category_of(self, component: str) -> str:
        return self.component(component).category


class TaxonomyError(ValueError):
    """The taxonomy files are inconsistent."""


def _read_text(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(";") if v.strip())


def _load_components(meta: dict) -> tuple[Component, ...]:
    rows = list(csv.DictReader(_read_text(meta["table5"]["file"]).splitlines()))
    comps = [
        Component(
            component=r["component"],
            category=r["category"],
            kind="table5",
            published_interruptions=int(r["interruptions"]),
            published_percent=float(r["percent_printed"]),
            sort_order=i,
        )
        for i, r in enumerate(rows)
    ]
    for extra in meta.get("extra_components", []):
        comps.append(
            Component(
                component=extra["component"],
                category=extra["category"],
                kind=extra["kind"],
                published_interruptions=extra.get("published_interruptions"),
                published_percent=None,
                sort_order=len(comps),
            )
        )
    names = [c.component for c in comps]
    if len(set(names)) != len(names):
        raise TaxonomyError("duplicate component names")
    total = sum(c.published_interruptions or 0 for c in comps if c.kind == "table5")
    if total != meta["table5"]["unexpected_total"]:
        raise TaxonomyError(f"Table 5 counts sum to {total}, not "
                            f"{meta['table5']['unexpected_total']}")
    return tuple(comps)


def _load_xids(meta: dict, components: set[str]) -> dict[int, XidEntry]:
    text = _read_text(meta["xid_catalog"]["file"])
    xids: dict[int, XidEntry] = {}
    for line_no, r in enumerate(csv.DictReader(text.splitlines()), start=2):
        code = int(r["xid"])
        where = f"xid_catalog.csv line {line_no} (Xid {code})"
        if code in xids:
            raise TaxonomyError(f"{where}: duplicate Xid")
        role = r["role"].strip()
        if role not in XID_ROLES:
            raise TaxonomyError(f"{where}: role {role!r} not in {XID_ROLES}")
        component = r["component"].strip() or None
        if role in ATTRIBUTING_ROLES and component not in components:
            raise TaxonomyError(f"{where}: role {role} needs a known component, "
                                f"got {component!r}")
        if role not in ATTRIBUTING_ROLES and component is not None:
            raise TaxonomyError(f"{where}: role {role} must not name a component")
        xids[code] = XidEntry(
            xid=code,
            name=r["name"].strip(),
            description=r["description"].strip(),
            resolution=r["resolution"].strip(),
            investigatory=r["investigatory"].strip(),
            role=role,
            component=component,
            signal_family=r["signal_family"].strip(),
            follows=_split(r["follows"]),
            applies_to=_split(r["applies_to"]),
            confidence=r["confidence"].strip(),
            source=r["source"].strip(),
            notes=r["notes"].strip(),
        )
    return xids


@cache
def load_taxonomy() -> Taxonomy:
    """Read and validate the shipped taxonomy (cached: it is immutable data)."""
    meta = tomllib.loads(_read_text("taxonomy.toml"))
    components = _load_components(meta)
    xids = _load_xids(meta, {c.component for c in components})
    xmeta = meta["xid_catalog"]
    return Taxonomy(
        version=meta["version"],
        components=components,
        xids=xids,
        table5_source=meta["table5"]["source"],
        xid_source=xmeta.get("source", ""),
        xid_version=xmeta.get("version", ""),
        meta=meta,
    )
