"""Host names: Slurm host-list expansion/compression, hosts.csv and the name resolver."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.pipeline.hostlist import (
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    try_expand_hostlist,
)
from faultline.pipeline.parsers import hosts
from faultline.pipeline.records import ParseContext, ParsedEvent

EXPAND = [
    ("node0042", ["node0042"]),
    ("node[0000-0003,0012]", ["node0000", "node0001", "node0002", "node0003", "node0012"]),
    ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
    ("gpu-[01-03],cpu5", ["gpu-01", "gpu-02", "gpu-03", "cpu5"]),
    ("node[8-10]", ["node8", "node9", "node10"]),
    ("node[08-10]", ["node08", "node09", "node10"]),
    ("node[098-101]", ["node098", "node099", "node100", "node101"]),
    ("rack[1-2]-node[1,3]-ib", ["rack1-node1-ib", "rack1-node3-ib", "rack2-node1-ib",
                                "rack2-node3-ib"]),
    ("learnnode[1273,1405,1529,1666]", ["learnnode1273", "learnnode1405", "learnnode1529",
                                        "learnnode1666"]),
    ("a,b , c", ["a", "b", "c"]),
    ("n[1-2],n[1-2]", ["n1", "n2", "n1", "n2"]),
    ("node0001.cluster.local", ["node0001.cluster.local"]),
    ("[1-3]", ["1", "2", "3"]),
    ("", []),
    ("None assigned", []),
    ("None", []),
]


@pytest.mark.parametrize(("text", "want"), EXPAND, ids=[t or "empty" for t, _ in EXPAND])
def test_expand(text, want):
    assert expand_hostlist(text) == want


def test_expand_large():
    got = expand_hostlist("node[0000-2047]")
    assert len(got) == 2048 and got[0] == "node0000" and got[-1] == "node2047"


@pytest.mark.parametrize("bad", ["node[1-", "node1-2]", "node[[1]]", "node[a-b]", "node[3-1]",
                                 "node[1,,2]", "node[]", "n[0-99999999]"])
def test_expand_rejects_malformed(bad):
    with pytest.raises(HostlistError):
        expand_hostlist(bad)
    assert try_expand_hostlist(bad) == [bad]


COMPRESS = [
    (["node0000", "node0001", "node0002", "node0003", "node0012"], "node[0000-0003,0012]"),
    (["node5"], "node5"),
    (["node3", "node1", "node2", "node2"], "node[1-3]"),
    (["gpu-01", "gpu-02", "gpu-03", "cpu5"], "cpu5,gpu-[01-03]"),
    (["node8", "node9", "node10"], "node[8-10]"),
    (["node09", "node10"], "node[09-10]"),
    (["node9", "node010"], "node[9,010]"),
    (["a1b3", "a1b4", "a2b3"], "a1b[3-4],a2b3"),
    (["login", "node1-ib", "node2-ib"], "login,node[1-2]-ib"),
    ([], ""),
]


@pytest.mark.parametrize(("hosts_", "want"), COMPRESS)
def test_compress(hosts_, want):
    assert compress_hostlist(hosts_) == want
    assert sorted(set(expand_hostlist(want))) == sorted(set(hosts_))


_name = st.builds(
    lambda p, n, w, s: f"{p}{str(n).zfill(w)}{s}",
    st.sampled_from(["node", "gpu-", "a1b", "x"]),
    st.integers(0, 300),
    st.integers(1, 4),
    st.sampled_from(["", "-ib"]),
)


@given(st.lists(_name, max_size=40))
def test_compress_then_expand_round_trips(names):
    assert sorted(set(expand_hostlist(compress_hostlist(names)))) == sorted(set(names))


# --- hosts.csv ------------------------------------------------------------------------------

CTX = ParseContext(path="hosts.csv")


@pytest.mark.parametrize(("text", "rows"), [
    ("host,aliases,addresses\n"
     "node0042,node0042.cluster.local;node0042-bmc,10.1.2.42;10.2.2.42\n",
     [("node0042", ["node0042.cluster.local", "node0042-bmc"], ["10.1.2.42", "10.2.2.42"])]),
    ("Addresses,Host,Aliases\n10.1.2.43,node0043,n43 node0043.local\n",
     [("node0043", ["n43", "node0043.local"], ["10.1.2.43"])]),
    ('host, aliases, addresses\nnode1, "a1, a2", "10.0.0.1 10.0.0.2"\nnode2,,\n',
     [("node1", ["a1", "a2"], ["10.0.0.1", "10.0.0.2"]), ("node2", [], [])]),
    ("node3,n3,10.0.0.3\n", [("node3", ["n3"], ["10.0.0.3"])]),
    ("# host,aliases,addresses\n# comment\n\nnode4,n4|node4-bmc,\n",
     [("node4", ["n4", "node4-bmc"], [])]),
    ("hostname\tip\n", []),
])
def test_hosts_csv_rows(text, rows):
    fp = hosts.parse(text, CTX)
    got = [(e.attrs["host"], e.attrs["aliases"], e.attrs["addresses"]) for e in fp.events]
    assert got == rows
    assert all(e.kind == "host_alias" and e.ts_quality == "untimed" and e.ts is None
               for e in fp.events)
    assert fp.lines == fp.routine_lines + fp.event_lines + fp.reject_lines


def test_hosts_csv_rejects_rows_without_a_host_and_keeps_accounting():
    text = "host,aliases,addresses\r\n,a,10.0.0.9\r\nnode1,a1,\x00\r\n\ufffd,\"unclosed\r\nnode2"
    fp = hosts.parse(text, CTX)
    assert [r.line_no for r in fp.rejects] == [2]
    assert [e.attrs["host"] for e in fp.events] == ["node1", "\ufffd", "node2"]
    assert fp.lines == 5 == fp.routine_lines + fp.event_lines + fp.reject_lines


def _bootstrap(host: str, addr: str, ts: int = 1) -> ParsedEvent:
    return ParsedEvent(line_no=1, kind="nccl_bootstrap", message="", ts=ts, ts_quality="exact",
                       host=host, attrs={"ifname": "eth0", "address": addr})


def test_resolver_from_hosts_csv_and_nccl_bootstrap():
    fp = hosts.parse("host,aliases,addresses\nnode0042,node0042-bmc,10.1.2.42\n", CTX)
    events = [*fp.events, _bootstrap("node0043", "10.1.4.17"),
              _bootstrap("node0042.cluster.local", "10.1.2.99"),
              _bootstrap("node0044", "10.1.2.42", ts=5)]  # conflicts with hosts.csv
    r = hosts.build_resolver(events)
    assert r.resolve("NODE0042-BMC") == "node0042"
    assert r.resolve("10.1.2.42") == "node0042"
    assert r.resolve("10.1.4.17<51234>") == "node0043"
    assert r.resolve("::ffff:10.1.4.17") == "node0043"
    assert r.resolve("node0042.cluster.local") == "node0042"  # FQDN of a known short name
    assert r.resolve("10.1.2.99") == "node0042"
    assert r.resolve("unknown-host") == "unknown-host"
    assert r.resolve(None) is None
    assert ("10.1.2.42", "node0042", "node0044") in r.conflicts
    assert "10.1.4.17" in r


@pytest.mark.parametrize(("name", "key"), [
    ("10.1.4.17<51234>", "10.1.4.17"),
    ("::ffff:10.1.4.17", "10.1.4.17"),
    ("[FE80::1]", "fe80::1"),
    ("Node0042.Cluster.Local.", "node0042.cluster.local"),
])
def test_normalize_name(name, key):
    assert hosts.normalize_name(name) == key
