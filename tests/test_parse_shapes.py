"""Kernel log shapes beyond CORPUS.md's: plain dmesg, dmesg -H / --reltime, syslog lines
without a host field, journalctl -o short-monotonic, journalctl -o json / -o export, and
JSON lines from log stores; and how a file's host is found from its path.

Real lines carry their source. Where no public capture of a shape with a GPU fault was
found, the line is marked CONSTRUCTED: the shape as the tool's documentation or source
defines it, around a real message from the source named.

Sources (licenses of the repositories; the lines are users' log output):
- BUMBLEBEE: https://github.com/Bumblebee-Project/Bumblebee/issues/677 (GPL-3.0 repository),
  plain ``dmesg`` Xid 32/31 lines.
- NVSENTINEL: https://github.com/NVIDIA/NVSentinel/issues/155 (Apache-2.0), plain ``dmesg``
  "fallen off the bus" report with its continuation lines.
- GPUD1209: https://github.com/leptonai/gpud/pull/1209 (Apache-2.0), ``journalctl -k``.
- OGKM1150: https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150 (MIT/GPL-2.0),
  ``kernel: NVRM: Xid ... 45 ...`` lines as posted (the date cut off by the user).
- SYSTEMD_EXPORT: https://systemd.io/JOURNAL_EXPORT_FORMATS/ (systemd docs, LGPL-2.1+),
  the two example entries of the export format, one field per line.
- UTIL_LINUX: util-linux ``dmesg --reltime`` prints ``[%b%d %H:%M]`` when a minute starts
  and ``[%+5ld.%06ld]`` (seconds since the previous message) otherwise.
"""

from __future__ import annotations

import json

import pytest
from accounting import check_accounting, us

from faultline.pipeline import hostpath
from faultline.pipeline.fileparse import context_from_path, parse_file
from faultline.pipeline.parsers import kernel, structured
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings, parse_json_fields
from faultline.pipeline.sniff import sniff

CTX = ParseContext(path="x", host="node7", year=2024)

# --- plain dmesg (seconds since boot) -----------------------------------------------------

BUMBLEBEE = [  # BUMBLEBEE
    "[24128.828315] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000",
    "[24128.828608] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000",
    "[24128.834365] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000",
]
NVSENTINEL = [  # NVSENTINEL
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
    "               NVRM: (PCI ID: 10de:26b5) installed in this system has",
    "               NVRM: fallen off the bus and is not responding to commands.",
    "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).",
]


def test_plain_dmesg_without_an_anchor_is_untimed_and_keeps_its_uptime():
    fp = kernel.parse("\n".join(BUMBLEBEE) + "\n", CTX)
    check_accounting(fp)
    assert fp.shape == "dmesg"
    assert [e.xid for e in fp.events] == [32, 32, 31]
    assert all(e.ts is None and e.ts_quality == "untimed" for e in fp.events)
    assert [e.attrs["uptime_us"] for e in fp.events] == [24128828315, 24128828608,
                                                         24128834365]
    assert {e.host for e in fp.events} == {"node7"}  # from the path


def test_plain_dmesg_is_anchored_by_an_audit_record_of_the_same_boot():
    # an audit record carries the epoch: the boot is anchored and the Xids get wall times
    audit = ("[24000.000000] audit: type=1400 audit(1700000000.000:40663): "
             'apparmor="DENIED" operation="open"')
    fp = kernel.parse("\n".join([audit, *BUMBLEBEE]) + "\n", CTX)
    check_accounting(fp)
    xids = [e for e in fp.events if e.kind == "xid"]
    assert [e.ts_quality for e in xids] == ["boot_relative"] * 3
    assert xids[0].ts == 1_700_000_000_000_000 + 128_828_315


def test_plain_dmesg_continuation_lines_are_counted():
    fp = kernel.parse("\n".join(NVSENTINEL) + "\n", CTX)
    check_accounting(fp)
    assert fp.lines == 4
    assert fp.reject_lines + fp.event_lines + fp.routine_lines == 4


# --- dmesg -H / --reltime ------------------------------------------------------------------

RELTIME = [  # CONSTRUCTED: UTIL_LINUX shape, messages from BUMBLEBEE
    "[Dec27 10:31] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000",
    "[  +0.000293] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000",
    "[  +5.005757] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000",
    "[Dec27 10:32] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
]


def test_dmesg_reltime_minutes_and_deltas_give_times():
    fp = kernel.parse("\n".join(RELTIME) + "\n", CTX)
    check_accounting(fp)
    assert fp.shape == "reltime"
    xids = [e for e in fp.events if e.kind == "xid"]
    base = us("2024-12-27T10:31:00")
    assert [e.ts for e in xids] == [base, base + 293, base + 293 + 5_005_757]
    assert {e.ts_quality for e in xids} == {"inferred_year"}
    assert sniff(RELTIME, "/c/node7/dmesg-H.txt") == "kernel"


def test_reltime_year_comes_from_the_file_when_no_year_is_given():
    fp = parse_file("/c/hosts/node7/dmesg.txt", ("\n".join(RELTIME) + "\n").encode(),
                    IngestSettings(year=2023))
    ts = fp.events.column("ts").to_pylist()
    assert ts[0] is not None


# --- syslog lines without a host field ------------------------------------------------------

OGKM1150 = [  # OGKM1150, with an RFC 3164 date (CONSTRUCTED: the user cut the date off)
    "Jan 17 10:44:59 kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, "
    "Ch 00000001 caused by previous Xid 149",
    "Jan 17 10:44:59 kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, "
    "Ch 0000000c caused by previous Xid 145",
]


@pytest.mark.parametrize("prefix,quality", [
    ("", "inferred_year"),  # as above
    ("iso", "exact"),
])
def test_syslog_without_a_host_field_reads_the_tag_and_takes_the_path_host(prefix, quality):
    lines = OGKM1150 if not prefix else [
        "2025-01-17T10:44:59.000000+00:00 " + ln.split(" ", 3)[3] for ln in OGKM1150]
    fp = kernel.parse("\n".join(lines) + "\n", CTX)
    check_accounting(fp)
    assert [e.xid for e in fp.events] == [45, 45]
    assert {e.host for e in fp.events} == {"node7"}
    assert {e.ts_quality for e in fp.events} == {quality}
    assert fp.events[0].device == "0000:dc:00.0"


def test_a_syslog_host_is_still_read_from_the_line():
    line = ("Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: "
            "Port: 1 Link INIT")  # GPUD1209
    kl = kernel.parse_line(line, CTX)
    assert (kl.host, kl.program) == ("000-000-00000-1-gpu-1", "kernel")
    assert kl.message.startswith("mlx5_core 0000:ab:00.0")


# --- journalctl -o short-monotonic ------------------------------------------------------------

def test_short_monotonic_reads_host_and_tag_but_not_device_prefixes():
    # CONSTRUCTED: journalctl -o short-monotonic shape around BUMBLEBEE's message
    kl = kernel.parse_line("[24128.834365] node0042 kernel: NVRM: Xid (PCI:0000:01:00): 31, "
                           "Ch 00000003, engmask 00000101, intr 10000000", CTX)
    assert (kl.shape, kl.host, kl.program, kl.uptime_us) == ("dmesg", "node0042", "kernel",
                                                             24128834365)
    assert kl.message.startswith("NVRM: Xid")
    usb = kernel.parse_line("[ 5.000000] usb 1-1: new high-speed USB device", CTX)
    assert usb.host is None and usb.message.startswith("usb 1-1:")  # a device, not a host


# --- journalctl -o export ---------------------------------------------------------------------

SYSTEMD_EXPORT = """\
__CURSOR=s=739ad463348b4ceca5a9e69c95a3c93f;i=4ece7;b=6c7c6013a26343b29e964691ff25d04c;m=4fc72436e;t=4c508a72423d9;x=d3e5610681098c10;p=system.journal
__REALTIME_TIMESTAMP=1342540861416409
__MONOTONIC_TIMESTAMP=21415215982
_BOOT_ID=6c7c6013a26343b29e964691ff25d04c
_TRANSPORT=syslog
PRIORITY=4
SYSLOG_FACILITY=3
SYSLOG_IDENTIFIER=gdm-password]
SYSLOG_PID=587
MESSAGE=AccountsService-DEBUG(+): ActUserManager: ignoring unspecified session '8' since it's not graphical: Success
_PID=587
_HOSTNAME=epsilon

__CURSOR=s=739ad463348b4ceca5a9e69c95a3c93f;i=4ece8;b=6c7c6013a26343b29e964691ff25d04c;m=4fc72572f;t=4c508a7243799;x=68597058a89b7246;p=system.journal
__REALTIME_TIMESTAMP=1342540861421465
__MONOTONIC_TIMESTAMP=21415221039
_BOOT_ID=6c7c6013a26343b29e964691ff25d04c
_TRANSPORT=syslog
PRIORITY=6
SYSLOG_FACILITY=9
SYSLOG_IDENTIFIER=/USR/SBIN/CROND
SYSLOG_PID=8278
MESSAGE=(root) CMD (run-parts /etc/cron.hourly)
_HOSTNAME=epsilon

"""  # noqa: E501 (SYSTEMD_EXPORT, its lines as they are; fields trimmed)


def _kernel_entry(t_us: int, message: str, host: str = "node0042") -> str:
    return (f"__REALTIME_TIMESTAMP={t_us}\n__MONOTONIC_TIMESTAMP=24128834365\n"
            f"_TRANSPORT=kernel\nPRIORITY=4\nSYSLOG_IDENTIFIER=kernel\n_HOSTNAME={host}\n"
            f"MESSAGE={message}\n\n")


def test_journal_export_entries_are_records_and_every_line_is_counted():
    xid = _kernel_entry(1342540862000000, BUMBLEBEE[2].split("] ", 1)[1])  # CONSTRUCTED
    text = SYSTEMD_EXPORT + xid
    lines = text.splitlines()
    assert sniff(lines, "/c/journal/node0042.export") == "kernel"
    fp = structured.parse(text, ParseContext(path="x"))
    check_accounting(fp)
    assert fp.shape == "journal_export"
    assert fp.rejects == []
    (e,) = fp.events
    assert (e.xid, e.host, e.ts, e.ts_quality) == (31, "node0042", 1342540862000000, "exact")
    assert e.line_end - e.line_no + 1 == 7  # the entry's lines


def test_journal_export_binary_field_is_read_as_text():
    msg = "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."  # CONSTRUCTED
    body = msg.encode() + b"\n\xff"  # a newline and a bad byte: journald writes it binary
    entry = (b"__REALTIME_TIMESTAMP=1342540862000000\n_TRANSPORT=kernel\n_HOSTNAME=n1\n"
             b"MESSAGE\n" + len(body).to_bytes(8, "little") + body + b"\n\n")
    text = entry.decode("utf-8", errors="replace")
    fp = structured.parse(text, ParseContext(path="x"))
    check_accounting(fp)
    assert [e.xid for e in fp.events] == [79]


# --- journalctl -o json and log-store JSON lines ----------------------------------------------

def _journal_json(message: object, **extra: object) -> str:
    # CONSTRUCTED: the JSON format of SYSTEMD_EXPORT's page, message from BUMBLEBEE
    entry = {"__REALTIME_TIMESTAMP": "1342540862000000", "__MONOTONIC_TIMESTAMP": "24128834365",
             "_BOOT_ID": "6c7c6013a26343b29e964691ff25d04c", "_TRANSPORT": "kernel",
             "PRIORITY": "4", "SYSLOG_IDENTIFIER": "kernel", "_HOSTNAME": "node0042",
             "MESSAGE": message, **extra}
    return json.dumps(entry)


XID31 = BUMBLEBEE[2].split("] ", 1)[1]


def test_journal_json_with_byte_array_message_and_a_torn_last_line():
    lines = [
        _journal_json(XID31),
        _journal_json([*XID31.encode(), 0xFF]),  # not UTF-8: an array of bytes
        _journal_json("Started Session 1 of User root.", SYSLOG_IDENTIFIER="systemd",
                      _TRANSPORT="journal"),
        _journal_json(XID31)[:80],  # torn
    ]
    text = "\n".join(lines)
    assert sniff(text.splitlines(), "/c/export/node0042.json") == "kernel"
    fp = structured.parse(text, ParseContext(path="x"))
    check_accounting(fp)
    assert fp.shape == "journal_json"
    assert [(e.xid, e.host, e.ts_quality) for e in fp.events] == [(31, "node0042", "exact")] * 2
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(4, "bad json")]
    assert fp.rejects[0].raw == lines[3]


@pytest.mark.parametrize("record", [
    # Loki logcli --output jsonl
    {"labels": {"host": "node0042", "job": "varlogs"}, "line": XID31,
     "timestamp": "2012-07-17T16:01:02.000000000Z"},
    # Elasticsearch / OpenSearch hit
    {"_index": "logs", "_source": {"@timestamp": "2012-07-17T16:01:02.000Z",
                                   "host": {"name": "node0042"}, "message": XID31}},
    # Vector (file source, syslog line as the message; the record's time wins)
    {"host": "collector1", "timestamp": "2012-07-17T16:01:02Z",
     "message": f"Jul 17 16:01:02 node0042 kernel: {XID31}"},
    # Fluent Bit (epoch seconds, float)
    {"date": 1342540862.0, "log": XID31, "hostname": "node0042"},
])
def test_log_store_json_lines(record):
    # CONSTRUCTED: each tool's documented record shape, message from BUMBLEBEE
    line = json.dumps(record)
    assert sniff([line], "/c/export/part-0001.jsonl") == "kernel"
    fp = structured.parse(line + "\n", ParseContext(path="x"))
    check_accounting(fp)
    (e,) = fp.events
    assert e.xid == 31
    assert e.ts == 1342540862000000
    assert e.host in ("node0042", "collector1")
    if "labels" in record or "_source" in record or "date" in record:
        assert e.host == "node0042"


def test_user_named_json_fields():
    line = json.dumps({"when": "2012-07-17T16:01:02Z", "node": "gpu-a", "body": XID31})
    ctx = ParseContext(path="x", json_fields=parse_json_fields("message=body,time=when,"
                                                               "host=node"))
    (e,) = structured.parse(line, ctx).events
    assert (e.xid, e.host, e.ts) == (31, "gpu-a", 1342540862000000)
    plain = structured.parse(line, ParseContext(path="x"))
    assert plain.events == []  # without the names nothing says where the message is
    with pytest.raises(ValueError, match="unknown key"):
        parse_json_fields("mesage=body")
    with pytest.raises(ValueError, match="KEY=FIELD"):
        parse_json_fields("message")


def test_json_fields_enter_the_fingerprint():
    a = IngestSettings().fingerprint
    b = IngestSettings(json_fields=parse_json_fields("message=body")).fingerprint
    c = IngestSettings(host_from_path=r"/(?P<host>gpu-\w+)/").fingerprint
    assert len({a, b, c}) == 3


# --- host from path -----------------------------------------------------------------------------

KNOWN = hostpath.known_hosts(["node[0001-0003],gpu-a"], ["login1"])


@pytest.mark.parametrize("path,host,how", [
    ("/c/hosts/node0001/kern.log", "node0001", "path_layout"),
    ("/c/jobs/123/node0002.log", "node0002", "path_layout"),
    ("/c/node0003/var/log/kern.log.1", "node0003", "path_layout"),
    ("/c/ws/anything/var/log/dmesg", "anything", "path_layout"),  # the layout says so
    ("/c/rsyslog/node0002/kern.log", "node0002", "path_known"),  # central rsyslog tree
    ("/c/rsyslog/2024-07-01/node0003.log", "node0003", "path_known"),
    ("/c/rsyslog/2024-07-01/GPU-A.cluster.local.log", "gpu-a", "path_known"),
    ("/c/rsyslog/NODE0001/kern.log", "node0001", "path_known"),  # as Slurm spells it
    ("/c/rsyslog/2024-07-01/node9999.log", None, "none"),  # not a known host
    ("/var/log/kern.log", None, "none"),  # a machine's own /var/log: no host in the path
])
def test_host_from_path(path, host, how):
    ctx = context_from_path(path, "UTC", IngestSettings(known_hosts=KNOWN))
    assert (ctx.host, ctx.host_from) == (host, how)


def test_host_from_path_pattern_wins_and_is_validated():
    s = IngestSettings(known_hosts=KNOWN, host_from_path=r"/dumps/(?P<host>[^_/]+)_")
    ctx = context_from_path("/c/dumps/nodeX_dmesg.txt", "UTC", s)
    assert (ctx.host, ctx.host_from) == ("nodeX", "pattern")
    with pytest.raises(ValueError, match="named group"):
        IngestSettings(host_from_path=r"/dumps/([^/]+)/")
    with pytest.raises(ValueError):
        IngestSettings(host_from_path=r"(?P<host>[")


def test_files_host_from_records_how_the_host_was_decided():
    central = ("Jul 17 16:01:02 node0001 kernel: " + XID31 + "\n"
               "Jul 17 16:01:03 node0002 kernel: " + XID31 + "\n").encode()
    s = IngestSettings(year=2012, known_hosts=KNOWN)
    got = parse_file("/c/syslog/messages", central, s)
    assert got.files.column("host_from").to_pylist() == ["line"]
    assert got.files.column("host").to_pylist() == [None]
    assert sorted(got.events.column("host").to_pylist()) == ["node0001", "node0002"]
    dmesg = ("\n".join(BUMBLEBEE) + "\n").encode()
    got = parse_file("/c/node0003/var/log/dmesg", dmesg, s)
    assert got.files.column("host_from").to_pylist() == ["path_layout"]
    assert set(got.events.column("host").to_pylist()) == {"node0003"}
    got = parse_file("/c/misc/dmesg", dmesg, s)
    assert got.files.column("host_from").to_pylist() == ["none"]


def test_journalctl_markers_are_routine():
    # CONSTRUCTED: the marker lines journalctl prints between entries (journalctl(1))
    lines = ["-- Logs begin at Mon 2024-07-01 12:00:00 UTC, end at Tue 2024-07-02 "
             "12:00:00 UTC. --", *OGKM1150[:1], "-- Reboot --",
             "-- Boot 6c7c6013a26343b29e964691ff25d04c --", "-- No entries --"]
    fp = kernel.parse("\n".join(lines) + "\n", CTX)
    check_accounting(fp)
    assert (fp.routine_lines, fp.event_lines, fp.reject_lines) == (4, 1, 0)


def test_json_records_without_a_time():
    lines = [json.dumps({"message": "eth0: link becomes ready", "host": "n1"}),
             json.dumps({"message": XID31, "host": "n1"})]
    fp = structured.parse("\n".join(lines), ParseContext(path="x", host="n1"))
    check_accounting(fp)
    assert (fp.routine_lines, fp.reject_lines) == (1, 0)  # a routine record is routine
    (e,) = fp.events  # a record that matters is kept, with no time to give it
    assert (e.line_no, e.xid, e.ts_quality) == (2, 31, "untimed")


@pytest.mark.parametrize("line,ts", [
    # CONSTRUCTED: journalctl -o short / short-precise / short-iso / short-iso-precise
    # prefixes (journalctl(1)) around OGKM1150's message and host field of GPUD1209
    ("Jan 17 10:44:59 000-000-00000-1-gpu-1 kernel: ", "2025-01-17T10:44:59"),
    ("Jan 17 10:44:59.123456 000-000-00000-1-gpu-1 kernel: ", "2025-01-17T10:44:59.123456"),
    ("2025-01-17T10:44:59+0000 000-000-00000-1-gpu-1 kernel: ", "2025-01-17T10:44:59"),
    ("2025-01-17T10:44:59.123456+00:00 000-000-00000-1-gpu-1 kernel: ",
     "2025-01-17T10:44:59.123456"),
])
def test_journalctl_short_variants(line, ts):
    msg = OGKM1150[0].split("kernel: ", 1)[1]
    fp = kernel.parse(line + msg + "\n", ParseContext(path="x", year=2025))
    check_accounting(fp)
    (e,) = fp.events
    assert (e.xid, e.host, e.ts) == (45, "000-000-00000-1-gpu-1", us(ts))


def test_json_lines_with_a_byte_order_mark():
    text = "\ufeff" + _journal_json(XID31) + "\n"
    assert sniff(text.splitlines(), "/c/x.json") == "kernel"
    fp = structured.parse(text, ParseContext(path="x"))
    check_accounting(fp)
    assert [e.xid for e in fp.events] == [31]
