"""BMC event logs beyond ``ipmitool sel elist``: ``ipmitool sel list``, FreeIPMI
``ipmi-sel`` and Redfish ``LogEntry`` JSON all give the same ``sel_*`` events.

Every line is real: copied from the public thread or file named beside it (license in
the note); the Redfish collection is ``tests/data/shapes/`` (see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from accounting import check_accounting, us

from faultline.pipeline.fileparse import parse_file
from faultline.pipeline.parsers import redfish, sel
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import sniff

DATA = Path(__file__).parent / "data" / "shapes"
CTX = ParseContext(path="hosts/node0042/sel.json", host="node0042")

# ipmitool sel list: https://github.com/open-power/op-build/issues/594 (Apache-2.0)
SEL_LIST = [
    "   1 | 01/01/2000 | 00:15:20 | System Firmware Progress #0x05 | Motherboard "
    "initialization | Asserted",
    "   a | 01/01/2000 | 00:31:18 | System Firmware Progress #0x05 | Secondary CPU "
    "Initialization | Asserted",
]
# ipmitool sel elist: https://github.com/sosreport/sos/issues/2015 (GPL-2.0)
SEL_ELIST = [
    "  30 | 11/15/2019 | 18:50:40 | Power Unit Pwr Unit Status | Power off/down | Asserted",
    "  31 | 11/15/2019 | 18:50:44 | Power Unit Pwr Unit Status | Power off/down | Deasserted",
]
# FreeIPMI ipmi-sel --output-event-state:
# https://github.com/thomas-krenn/check_ipmi_sensor_v3/issues/26 (GPL-3.0)
FREEIPMI = """\
ID   | Date        | Time     | Name                                              | Type              | State    | Event
1    | PostInit    | PostInit | Sensor #0                                         | OS Boot           | Nominal  | C: boot completed
2    | PostInit    | PostInit | Power Supply PS2 Status                           | Power Supply      | Critical | Power Supply Failure detected
4    | Jul-20-2017 | 10:29:49 | Power Supply PS2 Status                           | Power Supply      | Critical | Power Supply Failure detected
6    | Jul-20-2017 | 10:37:20 | Sensor #0                                         | OS Critical Stop  | Warning  | OS Graceful Shutdown
"""  # noqa: E501 - the tool's own column widths
# iDRAC's Redfish SEL (list-valued enums): https://github.com/mrlhansen/idrac_exporter/issues/26
# (MIT); one entry per line, as a collector paging through the collection writes them
IDRAC_JSONL = "\n".join(json.dumps(e) for e in (
    {"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1/Logs/Sel/30",
     "@odata.type": "#LogEntry.v1_3_0.LogEntry", "Created": "2023-01-09T20:02:15-06:00",
     "Description": " Log Entry 30", "EntryCode": [{"Member": "Assert"}], "EntryType": "SEL",
     "Id": "30", "Links": {}, "Message": "The PERC1 battery is low.", "MessageArgs": [],
     "MessageArgs@odata.count": 0, "MessageId": "0ffff", "Name": " Log Entry 30",
     "SensorNumber": 104, "SensorType": [{"Member": "Battery"}], "Severity": "Warning"},
    {"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1/Logs/Sel/29",
     "@odata.type": "#LogEntry.v1_3_0.LogEntry", "Created": "2022-10-11T19:40:35-05:00",
     "Description": " Log Entry 29", "EntryCode": [{"Member": "Deassert"}],
     "EntryType": "SEL", "Id": "29", "Links": {},
     "Message": "The PERC1 battery is operating normally."},
)) + "\n"


def test_ipmitool_sel_list_and_elist():
    fp = sel.parse("\n".join(SEL_LIST + SEL_ELIST) + "\n", CTX)
    check_accounting(fp)
    assert [(e.line_no, e.kind, e.ts, e.attrs["sensor_type"], e.attrs["sensor"])
            for e in fp.events] == [
        (1, "sel_other", us("2000-01-01T00:15:20"), "System Firmware Progress", "#0x05"),
        (2, "sel_other", us("2000-01-01T00:31:18"), "System Firmware Progress", "#0x05"),
        (3, "sel_power", us("2019-11-15T18:50:40"), "Power Unit", "Pwr Unit Status"),
    ]  # line 4 deasserts: routine
    assert not fp.rejects and fp.routine_lines == 1


def test_freeipmi_ipmi_sel():
    fp = sel.parse(FREEIPMI, ParseContext(path="hosts/n1/ipmi-sel.txt", host="n1",
                                          tz="Europe/Berlin"))
    check_accounting(fp)
    assert fp.shape == "freeipmi" and not fp.rejects
    got = [(e.line_no, e.kind, e.ts, e.ts_quality, e.device, e.attrs["state"])
           for e in fp.events]
    assert got == [
        (2, "sel_other", None, "untimed", "Sensor #0", "Nominal"),
        (3, "sel_power", None, "untimed", "Power Supply PS2 Status", "Critical"),
        (4, "sel_power", us("2017-07-20T10:29:49", "Europe/Berlin"), "assumed_tz",
         "Power Supply PS2 Status", "Critical"),
        (5, "sel_other", us("2017-07-20T10:37:20", "Europe/Berlin"), "assumed_tz",
         "Sensor #0", "Warning"),
    ]
    assert fp.events[2].attrs["event"] == "Power Supply Failure detected"


def test_freeipmi_deassertion_and_bad_rows():
    text = ("ID,Date,Time,Name,Type,Event Direction,Event\n"
            "4,Jul-20-2017,10:29:49,PS2 Status,Power Supply,Assertion Event,Power Supply "
            "Failure detected\n"
            "5,Jul-20-2017,10:31:00,PS2 Status,Power Supply,Deassertion Event,Power Supply "
            "Failure detected\n"
            "6,Foo-20-2017,10:31:00,PS2 Status,Power Supply,Assertion Event,x\n"
            "garbage\n")
    fp = sel.parse(text, CTX)
    check_accounting(fp)
    assert [(e.line_no, e.kind) for e in fp.events] == [(2, "sel_power")]
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(4, "bad timestamp"),
                                                          (5, "unrecognized sel line")]


def test_redfish_collection_dmtf_mockup():
    text = (DATA / "redfish-dmtf-public-rackmount1-sel.json").read_text()
    fp = redfish.parse(text, CTX)
    check_accounting(fp)
    assert fp.shape == "redfish" and not fp.rejects
    assert [(e.line_no, e.line_end, e.kind, e.ts, e.ts_quality, e.device) for e in fp.events] == [
        (7, 27, "sel_thermal", us("2012-03-07T14:44:00Z"), "exact", "#0x01"),
        (28, 48, "sel_thermal", us("2012-03-07T14:45:00Z"), "exact", "#0x02"),
    ]
    a = fp.events[0].attrs
    assert (a["record_id"], a["severity"], a["message_id"], a["entry_code"], a["event"]) == (
        "1", "Critical", "0x592A28", "Upper Critical - going high",
        "Temperature threshold exceeded")
    assert fp.routine_lines == 53 - 42


def test_redfish_idrac_json_lines():
    fp = redfish.parse(IDRAC_JSONL, CTX)
    check_accounting(fp)
    assert fp.shape == "redfish_jsonl"
    (e,) = fp.events  # entry 29 deasserts: routine
    assert (e.line_no, e.kind, e.ts, e.ts_quality) == (
        1, "sel_chassis", us("2023-01-09T20:02:15-06:00"), "exact")
    assert (e.attrs["sensor_type"], e.attrs["entry_code"], e.device) == (
        "Battery", "Assert", "#0x68")


@pytest.mark.parametrize(("entry", "kind", "rule"), [
    ({"EntryType": "Event", "Created": "2024-07-01T12:00:00Z",
      "Message": "The system board MEM1 Memory device status is disabled."}, "sel_memory",
     "redfish.msg.memory"),
    ({"EntryType": "Event", "Created": "2024-07-01T12:00:00Z",
      "Message": "BMC SW update"}, "sel_other", None),
    ({"EntryType": "SEL", "Created": "2024-07-01T12:00:00Z", "Message": "x",
      "SensorType": "Power Supply / Converter"}, "sel_power", None),
])
def test_redfish_kind_without_or_with_dmtf_sensor_type(entry, kind, rule):
    e = redfish.entry_event(entry, 1, 1, CTX)
    assert (e.kind, e.attrs.get("rule")) == (kind, rule)


def test_redfish_pages_appended_and_a_cut_file():
    page = (DATA / "redfish-dmtf-public-rackmount1-sel.json").read_text()
    fp = redfish.parse(page + page, CTX)  # two pages curl'ed into one file
    check_accounting(fp)
    assert fp.shape == "redfish_jsonl" and not fp.rejects
    assert [e.line_no for e in fp.events] == [7, 28, 60, 81]
    cut = redfish.parse(page[:page.index('"Name": "Log Entry 2"')], CTX)  # file cut short
    check_accounting(cut)
    assert [(e.line_no, e.line_end, e.kind) for e in cut.events] == [(7, 27, "sel_thermal")]
    assert {r.reason for r in cut.rejects} <= {"bad json", "not a log entry"}
    assert cut.rejects[0].line_no == 1


def test_redfish_rejects_and_accounting():
    text = ('{"Id": "1", "EntryType": "SEL", "Created": "1970-01-01T00:00:00Z", '
            '"Message": "x"}\nnot json\n\n{"Name": "LogService"}\n')
    fp = redfish.parse(text, CTX)
    check_accounting(fp)
    assert not fp.events
    assert [(r.line_no, r.reason) for r in fp.rejects] == [
        (2, "bad json"), (1, "timestamp out of range"), (4, "not a log entry")]


def test_bmc_shapes_are_sniffed_and_parsed_through_fileparse():
    dmtf = (DATA / "redfish-dmtf-public-rackmount1-sel.json").read_text()
    for name, text, shape in (("sel.json", dmtf, "redfish"),
                              ("bmc/entries.jsonl", IDRAC_JSONL, "redfish_jsonl"),
                              ("ipmi-sel.txt", FREEIPMI, "freeipmi")):
        assert sniff(text.splitlines(), f"hosts/n1/{name}") == "sel"
        got = parse_file(f"hosts/n1/{name}", text.encode(), IngestSettings())
        row = got.files.to_pylist()[0]
        assert (row["source"], row["shape"], row["host"]) == ("sel", shape, "n1")
        assert row["lines"] == row["routine_lines"] + row["event_lines"] + row["reject_lines"]
        assert got.events.num_rows > 0
