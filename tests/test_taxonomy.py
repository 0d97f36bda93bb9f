"""The taxonomy loads, matches the published Table 5, and every Xid row is sound."""

from __future__ import annotations

import csv

import pytest

from faultline.schemas import taxonomy as tx
from faultline.schemas.taxonomy import TaxonomyError, load_taxonomy


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


def test_table5_has_18_components_summing_to_419(tax):
    assert len(tax.table5) == 18
    assert sum(c.published_interruptions for c in tax.table5) == 419
    assert tax.component("Faulty GPU").published_interruptions == 148
    assert tax.component("Faulty GPU").published_percent == 30.1  # as printed (a typo)


def test_planned_and_unattributed_rows(tax):
    pm = tax.component("Planned Maintenance")
    assert (pm.category, pm.kind, pm.published_interruptions) == (
        "Planned Maintenance", "planned", 47)
    un = tax.component("Unattributed")
    assert (un.category, un.kind) == ("Unknown", "unattributed")
    assert tax.category_of("NCCL Watchdog Timeouts") == "Unknown"
    assert len(tax.components) == 20


@pytest.mark.shared
def test_table5_is_the_reference_table(tax, shared_dir):
    with (shared_dir / "reference" / "llama3_table5.csv").open() as f:
        ref = [(r["component"], r["category"], int(r["interruptions"]),
                float(r["percent_printed"])) for r in csv.DictReader(f)]
    ours = [(c.component, c.category, c.published_interruptions, c.published_percent)
            for c in tax.table5]
    assert ours == ref


def test_every_documented_xid_is_present_once(tax):
    assert set(range(1, 173)) <= set(tax.xids)
    text = (tx.resources.files(tx).joinpath("xid_catalog.csv")).read_text()
    codes = [int(r["xid"]) for r in csv.DictReader(text.splitlines())]
    assert len(codes) == len(set(codes)) == len(tax.xids)


def test_xid_rows_point_at_real_components(tax):
    names = set(tax.component_names)
    for x in tax.xids.values():
        assert x.role in tx.XID_ROLES
        assert x.confidence in ("high", "medium", "low")
        assert x.source, x.xid
        if x.role in tx.ATTRIBUTING_ROLES:
            assert x.component in names, x.xid
        else:
            assert x.component is None, x.xid
        if x.role == "follow_on":
            assert x.follows, x.xid
            assert all(f == "*" or int(f) in tax.xids for f in x.follows), x.xid
        if x.role == "app":
            assert x.component == "Software Bug", x.xid


@pytest.mark.parametrize(
    ("xid", "role", "component"),
    [
        (79, "root", "Faulty GPU"),          # fallen off the bus
        (74, "root", "Faulty GPU"),          # NVLink (Meta counts NVLink under Faulty GPU)
        (48, "root", "GPU HBM3 Memory"),     # DBE; text decides HBM vs SRAM
        (64, "root", "GPU HBM3 Memory"),     # row-remap failure
        (94, "root", "GPU HBM3 Memory"),
        (95, "root", "GPU HBM3 Memory"),
        (119, "root", "GPU System Processor"),
        (120, "root", "GPU System Processor"),
        (54, "root", "Power Supply"),
        (13, "app", "Software Bug"),
        (31, "app", "Software Bug"),
        (43, "app", "Software Bug"),
        (45, "follow_on", None),             # preemptive cleanup after another error
        (154, "follow_on", None),            # recovery-action summary
        (171, "follow_on", None),            # DRAM detail of a 48
        (172, "follow_on", None),            # SRAM detail of a 48
        (63, "informational", None),         # remap pending: not an interruption alone
        (92, "informational", None),         # SBE rate: a trend
    ],
)
def test_the_xids_that_decide_root_causes(tax, xid, role, component):
    entry = tax.xids[xid]
    assert (entry.role, entry.component) == (role, component)


def test_catalog_carries_source_and_version(tax):
    assert "nvidia" in tax.xid_source.lower()
    assert tax.xid_version
    assert tax.version


def _broken(monkeypatch, name: str, mutate) -> None:
    original = tx._read_text

    def fake(n: str) -> str:
        text = original(n)
        return mutate(text) if n == name else text

    monkeypatch.setattr(tx, "_read_text", fake)
    load_taxonomy.cache_clear()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t + t.splitlines()[1] + "\n", "duplicate Xid"),
        (lambda t: t.replace(",root,Faulty GPU,", ",root,Faulty Widget,", 1),
         "needs a known component"),
        (lambda t: t.replace(",follow_on,,", ",follow_on,Faulty GPU,", 1),
         "must not name a component"),
        (lambda t: t.replace(",informational,", ",maybe,", 1), "role"),
    ],
)
def test_a_broken_catalog_fails_at_load(monkeypatch, mutate, message):
    _broken(monkeypatch, "xid_catalog.csv", mutate)
    try:
        with pytest.raises(TaxonomyError, match=message):
            load_taxonomy()
    finally:
        load_taxonomy.cache_clear()


def test_a_table5_that_does_not_add_up_fails_at_load(monkeypatch):
    _broken(monkeypatch, "table5.csv", lambda t: t.replace("Faulty GPU,GPU,148",
                                                           "Faulty GPU,GPU,149"))
    try:
        with pytest.raises(TaxonomyError, match="sum to 420"):
            load_taxonomy()
    finally:
        load_taxonomy.cache_clear()
