"""The load step's host resolution and the rebuild's lazily read candidates give the
same answers as reading everything: one NCCL bring-up line per (host, address)
resolves names as every line does, a candidate's attrs read from the stored JSON text
equal the parsed dict, and the kinds the rebuild leaves unread name no component.

NCCL bring-up wording (``NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>``) as quoted in
../shared/reference/log_signatures.md (NCCL section); the Xid line is leptonai/gpud's
(see test_cause_consequence.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultline import db as fdb
from faultline.classifiers import signals
from faultline.classifiers.interruptions import NOT_READ, Candidate, _attrs_json, decide
from faultline.pipeline import load
from faultline.pipeline.parsers import hosts as hosts_parser
from faultline.pipeline.parsers.hosts import HostResolver
from faultline.pipeline.records import ParsedEvent

# (host, address, path, line): repeats across attempts and paths, one address first
# claimed by n3 and later by n4 (the first claim wins), an FQDN host, a host without
# an address, and n2's address also named in hosts.csv
BOOTSTRAP = [
    ("n1", "10.0.0.1", "job1/rank0.log", 1), ("n1", "10.0.0.1", "job2/rank0.log", 1),
    ("n1", "10.0.0.1", "job1/rank0.log", 7), ("n2", "10.0.0.9", "job1/rank1.log", 3),
    ("n3", "10.0.0.7", "job1/rank2.log", 2), ("n4", "10.0.0.7", "job2/rank3.log", 1),
    ("n3", "10.0.0.7", "job3/rank2.log", 9), ("n5.cluster.local", "10.0.0.5", "j/r5.log", 4),
    ("n6", None, "job1/rank6.log", 1), ("n1", "10.0.0.11", "job3/rank0.log", 2),
    ("n4", "10.0.0.4", "job2/rank3.log", 5), ("n4", "10.0.0.7", "job4/rank3.log", 1),
]
ALIAS = {"host": "n2", "aliases": ["n2-bmc"], "addresses": ["10.0.0.9", "10.0.1.9"]}


def _db(tmp_path: Path):
    con = fdb.connect(tmp_path / "x.duckdb")
    rows = [(f"b{i}", host, "nccl", "nccl_bootstrap", "NCCL INFO Bootstrap", path, line,
             json.dumps({} if addr is None else {"address": addr}))
            for i, (host, addr, path, line) in enumerate(BOOTSTRAP)]
    rows.append(("a0", "n2", "hosts", "host_alias", "n2,n2-bmc", "hosts.csv", 2,
                 json.dumps(ALIAS)))
    # lines logged under an address or an alias: resolved to their host by the load
    rows += [("x1", "10.0.0.9", "kernel", "xid", "Xid 79", "k1.log", 1, None),
             ("x2", "n2-bmc", "bmc", "sel_other", "SEL", "sel.log", 1, None),
             ("x3", "10.0.0.7", "kernel", "xid", "Xid 79", "k2.log", 1, None)]
    con.executemany("INSERT INTO events (event_id, host, source, kind, message, path, "
                    "line_no, line_end, sha256, ts_quality, attrs) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, 1, 'h', 'untimed', ?)", rows)
    return con


def _every_line_resolver() -> HostResolver:
    """The resolver as main built it before: every bring-up line, in (host, line, path)
    order."""
    lines = sorted(BOOTSTRAP, key=lambda r: (r[0], r[3], r[2]))
    events = [ParsedEvent(2, "host_alias", "", host="n2", attrs=ALIAS)]
    events += [ParsedEvent(line, "nccl_bootstrap", "", host=host,
                           attrs={} if addr is None else {"address": addr})
               for host, addr, _path, line in lines]
    return hosts_parser.build_resolver(events)


def test_one_line_per_host_and_address_resolves_as_every_line(tmp_path: Path) -> None:
    con = _db(tmp_path)
    pairs = load._bootstrap_objects(con)
    assert len(pairs) == len({(h, a) for h, a, _p, _n in BOOTSTRAP})
    assert [e.host for e in pairs] == sorted(e.host for e in pairs)
    got = hosts_parser.build_resolver(load._event_objects(con, ("host_alias",)) + pairs)
    assert got.names == _every_line_resolver().names
    assert got.resolve("10.0.0.7") == "n3"  # the first claim, not n4's later one


def test_load_renames_addresses_and_aliases_to_their_host(tmp_path: Path) -> None:
    con = _db(tmp_path)
    load._resolve_hosts(con)
    hosts = dict(con.execute("SELECT event_id, host FROM events "
                             "WHERE event_id LIKE 'x%'").fetchall())
    assert hosts == {"x1": "n2", "x2": "n2", "x3": "n3"}


XID_LINE = ("NVRM: Xid (PCI:0000:38:00): 79, pid=2924364, name=pt_main_thread, "
            "GPU has fallen off the bus.")
FAILED = 1_735_000_000.0


def _cands(as_text: bool) -> list[Candidate]:
    def attrs(a: dict) -> dict | str:
        return json.dumps(a) if as_text else a

    return [
        Candidate("e1", FAILED - 60, "n1", "xid", 79, XID_LINE,
                  attrs({"pci": "0000:38:00", "pid": 2924364}), 0, "S1", "0000:38:00.0"),
        Candidate("e2", FAILED - 30, "n2", "nccl_ib_error",
                  None, "NET/IB : Got completion from peer 10.0.0.9 with error 12",
                  attrs({"peer": "10.0.0.9"}), None, None, None),
        Candidate("e3", FAILED - 10, "n1", "reboot", None, "reboot: Restarting system",
                  attrs({}), None, None, None),
    ]


@pytest.mark.parametrize("first", [0, 1])
def test_candidates_read_from_json_text_decide_as_parsed_dicts(first: int) -> None:
    resolver = HostResolver()
    resolver.add("10.0.0.9", "n2")
    attempt = ("run", "100", FAILED - 3600, FAILED, "FAILED", "n[1-2]", None, 1)
    cands = {t: _cands(t)[first:] for t in (False, True)}
    a, b = (decide(cands[t], {}, ["n1", "n2"], FAILED, attempt, {}, resolver)
            for t in (False, True))
    assert (a.component, a.rule_id, a.culprit_host, a.culprit_gpu, a.evidence) == \
        (b.component, b.rule_id, b.culprit_host, b.culprit_gpu, b.evidence)
    assert a.root is not None and b.root is not None
    assert a.root.event_id == b.root.event_id


def test_attrs_are_parsed_on_first_use_only() -> None:
    c = _cands(True)[1]
    assert _attrs_json(c) == '{"peer": "10.0.0.9"}'
    assert isinstance(c.raw_attrs, str)  # asking for the JSON parses nothing
    assert c.attrs == {"peer": "10.0.0.9"}
    assert c.attrs is c.raw_attrs  # parsed once, then kept
    empty = Candidate("e", 0.0, None, "reboot", None, "", None, None, None, None)
    assert empty.attrs == {} and _attrs_json(empty) is None


def test_kinds_left_unread_name_no_component() -> None:
    for kind in NOT_READ:
        assert signals.rule_for(kind, "reboot: Restarting system", None, None) is None
        assert kind not in signals._BY_KIND


def test_the_rebuild_resolver_reads_one_pair_per_host_and_address(tmp_path: Path) -> None:
    from faultline.classifiers.interruptions import _resolver

    got, want = _resolver(_db(tmp_path)), _every_line_resolver()
    keys = [*want.names, "n2-bmc", "10.0.1.9", "10.0.0.7<0>", "n5", "10.9.9.9"]
    assert {k: got.resolve(k) for k in keys} == {k: want.resolve(k) for k in keys}
    assert got.resolve("10.0.0.7") == "n3"  # the first claim, not n4's later one
