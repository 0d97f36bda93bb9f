"""BMC SEL (ipmitool sel elist) and GPU inventory (nvidia-smi CSV) parsers. Table-driven
over the row formats in CORPUS.md and log_signatures.md (public ipmitool fixtures)."""

from __future__ import annotations

import pytest
from accounting import check_accounting, us

from faultline.pipeline.parsers import inventory, sel
from faultline.pipeline.records import ParseContext
from faultline.schemas.event_kinds import EVENT_KINDS


def ctx(**kw) -> ParseContext:
    return ParseContext(path=kw.pop("path", "hosts/node0042/sel.txt"),
                        host=kw.pop("host", "node0042"), **kw)


# --- SEL ------------------------------------------------------------------------------------

SEL_CASES = [
    # (row, ctx kwargs, kind, ts, quality, attrs subset)
    ("  1a3 | 07/01/2024 | 12:00:01 | Power Supply PSU2_Status | Failure detected () | Asserted",
     {}, "sel_power", us("2024-07-01T12:00:01"), "assumed_tz",
     {"record_id": "1a3", "sensor_type": "Power Supply", "sensor": "PSU2_Status",
      "event": "Failure detected ()", "asserted": True}),
    ("  1a4 | 07/01/2024 | 12:03:40 | Fan FAN3_Tach | Lower Critical going low | Asserted",
     {"tz": "America/Chicago"}, "sel_fan", us("2024-07-01T12:03:40", "America/Chicago"),
     "assumed_tz", {"sensor_type": "Fan", "sensor": "FAN3_Tach"}),
    ("  1a5 | 07/01/2024 | 12:05:00 | Temperature GPU5_Temp | Upper Critical going high | "
     "Asserted", {}, "sel_thermal", us("2024-07-01T12:05:00"), "assumed_tz",
     {"sensor_type": "Temperature", "sensor": "GPU5_Temp"}),
    ("   7 | 09/08/2021 | 06:34:15 | Power Supply #0x3b | Failure detected | Asserted", {},
     "sel_power", us("2021-09-08T06:34:15"), "assumed_tz", {"sensor": "#0x3b"}),
    ("   9 | 09/08/2021 | 06:34:16 | Power Supply #0x3e | Redundancy Lost | Asserted", {},
     "sel_power", us("2021-09-08T06:34:16"), "assumed_tz", {"event": "Redundancy Lost"}),
    ("  98 | 03/06/2025 | 19:00:47 | Power Supply PSU1 AC Lost | Power Supply AC lost | "
     "Asserted", {}, "sel_power", us("2025-03-06T19:00:47"), "assumed_tz",
     {"sensor": "PSU1 AC Lost"}),
    ("   2 | 09/23/2026 | 14:03:40 | Fan FAN1 Tach | Lower Critical going low  | Asserted | "
     "Reading 0 < Threshold 1000 RPM", {}, "sel_fan", us("2026-09-23T14:03:40"), "assumed_tz",
     {"detail": "Reading 0 < Threshold 1000 RPM", "event": "Lower Critical going low"}),
    ("  9a | 03/09/2025 | 17:57:40 | Fan PSU1 Slow FAN1 | Transition to Non-recoverable | "
     "Asserted", {}, "sel_fan", us("2025-03-09T17:57:40"), "assumed_tz",
     {"sensor": "PSU1 Slow FAN1"}),
    ("   1 | 09/23/2026 | 14:03:11 | Temperature Inlet Temp | Upper Non-critical going high | "
     "Asserted | Reading 51 > Threshold 45 degrees C", {}, "sel_thermal",
     us("2026-09-23T14:03:11"), "assumed_tz", {"sensor": "Inlet Temp"}),
    ("  3c | 12/14/22 | 23:09:44 CET | Memory #0x02 | Uncorrectable ECC (UnCorrectable ECC |  "
     "DIMMD7) | Asserted", {"tz": "Europe/Berlin"}, "sel_memory",
     us("2022-12-14T23:09:44", "Europe/Berlin"), "assumed_tz", {"sensor": "#0x02"}),
    ("  3d | 12/14/22 | 22:09:44 UTC | Memory #0x88 | Correctable ECC (CPU0_G1) | Asserted",
     {"tz": "Europe/Berlin"}, "sel_memory", us("2022-12-14T22:09:44+00:00"), "exact",
     {"event": "Correctable ECC (CPU0_G1)"}),
    ("   5 | 07/01/2024 | 12:00:00 | Processor #0x10 | IERR | Asserted", {}, "sel_processor",
     us("2024-07-01T12:00:00"), "assumed_tz", {"sensor_type": "Processor"}),
    ("   6 | 07/01/2024 | 12:00:00 | Physical Security #0x51 | General Chassis intrusion | "
     "Asserted", {}, "sel_chassis", us("2024-07-01T12:00:00"), "assumed_tz",
     {"sensor_type": "Physical Security"}),
    ("   8 | 07/01/2024 | 12:00:00 | Voltage P12V | Lower Critical going low | Asserted", {},
     "sel_chassis", us("2024-07-01T12:00:00"), "assumed_tz", {"sensor_type": "Voltage"}),
    ("   a | 07/01/2024 | 12:00:00 | Power Unit Pwr Unit Redund | Redundancy Lost | Asserted",
     {}, "sel_power", us("2024-07-01T12:00:00"), "assumed_tz", {"sensor_type": "Power Unit"}),
    ("   b | 07/01/2024 | 12:00:00 | System ACPI Power State ACPI_State | S0/G0: working | "
     "Asserted", {}, "sel_power", us("2024-07-01T12:00:00"), "assumed_tz",
     {"sensor_type": "System ACPI Power State", "sensor": "ACPI_State"}),
    ("   c | 07/01/2024 | 12:00:00 | Critical Interrupt #0x18 | Bus Fatal Error | Asserted", {},
     "sel_other", us("2024-07-01T12:00:00"), "assumed_tz",
     {"sensor_type": "Critical Interrupt"}),
    ("   d | 07/01/2024 | 12:00:00 | Event Logging Disabled #0x07 | Log area reset/cleared | "
     "Asserted", {}, "sel_other", us("2024-07-01T12:00:00"), "assumed_tz",
     {"sensor_type": "Event Logging Disabled"}),
    ("   e | 07/01/2024 | 12:00:00 | Mystery Sensor 7 | Something | Asserted", {}, "sel_other",
     us("2024-07-01T12:00:00"), "assumed_tz", {"sensor_type": None, "sensor": "Mystery Sensor 7"}),
    ("   8 | Pre-Init  |0000000093| System Event #0x01 | Timestamp Clock Sync | Asserted", {},
     "sel_other", None, "untimed", {"preinit_seconds": 93, "sensor_type": "System Event"}),
    ("   f | 07/01/2024 | 01:00:05 PM | Fan FAN2 | Lower Critical going low | Asserted", {},
     "sel_fan", us("2024-07-01T13:00:05"), "assumed_tz", {}),
    ("  10 | 2024-07-01 | 12:00:00 | Fan FAN2 | Lower Critical going low", {}, "sel_fan",
     us("2024-07-01T12:00:00"), "assumed_tz", {"asserted": True}),
]


@pytest.mark.parametrize(("row", "kw", "kind", "ts", "quality", "attrs"), SEL_CASES)
def test_sel_rows(row, kw, kind, ts, quality, attrs):
    e = sel.parse_row(row, 1, ctx(**kw))
    assert (e.kind, e.ts, e.ts_quality, e.host) == (kind, ts, quality, "node0042")
    assert {k: e.attrs.get(k) for k in attrs} == attrs


@pytest.mark.parametrize(
    ("row", "got"),
    [
        ("   9 | 07/01/2024 | 12:10:00 | Fan FAN3_Tach | Lower Critical going low | Deasserted",
         None),
        ("", None),
        ("SEL has no entries", None),
        ("just some text", "unrecognized sel line"),
        ("zz | 07/01/2024 | 12:00:00 | Fan | x | Asserted", "unrecognized sel line"),
        ("   1 | 13/45/2024 | 12:00:00 | Fan FAN1 | x | Asserted", "bad timestamp"),
        ("   1 | 07/01/2024 | 25:00:00 | Fan FAN1 | x | Asserted", "bad timestamp"),
        ("   1 | 07/01/2024 | 12:00 | Fan FAN1 | x | Asserted", "bad timestamp"),
        ("   1 | 07/01/2024 | 12:00:00 | Fan FAN1", "unrecognized sel line"),
    ],
)
def test_sel_routine_and_rejected_rows(row, got):
    out = sel.parse_row(row, 3, ctx())
    if got is None:
        assert out is None
    else:
        assert (out.line_no, out.reason) == (3, got)


@pytest.mark.parametrize(
    ("sensor", "stype", "name"),
    [
        ("Power Supply PSU2_Status", "Power Supply", "PSU2_Status"),
        ("Power Unit Pwr Unit Redund", "Power Unit", "Pwr Unit Redund"),
        ("Drive Slot / Bay #0x01", "Drive Slot / Bay", "#0x01"),
        ("Management Subsys Health BMC", "Management Subsys Health", "BMC"),
        ("Fan", "Fan", ""),
        ("Fanfare 1", None, "Fanfare 1"),
    ],
)
def test_sensor_type_split(sensor, stype, name):
    assert sel.sensor_type(sensor) == (stype, name)


def test_every_sensor_kind_is_a_known_event_kind():
    assert set(sel.SENSOR_KINDS.values()) | {"sel_other"} <= set(EVENT_KINDS)
    assert not set(sel.SENSOR_KINDS) & set(sel.OTHER_SENSOR_TYPES)


SEL_FILE = (
    "  1a3 | 07/01/2024 | 12:00:01 | Power Supply PSU2_Status | Failure detected () | Asserted\r\n"
    "  1a4 | 07/01/2024 | 12:03:40 | Fan FAN3_Tach | Lower Critical going low | Asserted\r\n"
    "  1a6 | 07/01/2024 | 12:04:40 | Fan FAN3_Tach | Lower Critical going low | Deasserted\r\n"
    "\r\n"
    "\x00\x00\x00\r\n"
    "  1a5 | 07/01/2024 | 12:05:00 | Temperature GPU5_Temp | Upper Critical going hi"
)


def test_sel_file_accounting():
    fp = sel.parse(SEL_FILE, ctx())
    check_accounting(fp)
    assert fp.lines == 6
    assert [(e.line_no, e.kind) for e in fp.events] == [
        (1, "sel_power"), (2, "sel_fan"), (6, "sel_thermal")]
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(5, "unrecognized sel line")]
    assert (fp.routine_lines, fp.event_lines, fp.reject_lines) == (2, 3, 1)


def test_sel_empty_file():
    fp = sel.parse("", ctx())
    assert (fp.lines, fp.events, fp.rejects) == (0, [], [])


# --- GPU inventory ---------------------------------------------------------------------------

INVENTORY = (
    "index, pci.bus_id, uuid, serial\n"
    "0, 00000000:18:00.0, GPU-1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8, 1650123456789\n"
    "1, 00000000:3B:00.0, GPU-2f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8, 1650123456790\n"
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (INVENTORY, [(0, "0000:18:00.0", "GPU-1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8",
                      "1650123456789"),
                     (1, "0000:3b:00.0", "GPU-2f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8",
                      "1650123456790")]),
        # any column order, extra columns with units, no space after commas, CRLF
        ("name, serial, memory.total [MiB], pci.bus_id, index, uuid\r\n"
         "NVIDIA H100 80GB HBM3, 1650123456789, 81559 MiB, 00000000:9B:00.0, 4, GPU-aa\r\n",
         [(4, "0000:9b:00.0", "GPU-aa", "1650123456789")]),
        # [N/A] serial (consumer boards), missing uuid column
        ("index,pci.bus_id,serial\n0,00000000:01:00.0,[N/A]\n",
         [(0, "0000:01:00.0", None, None)]),
        # --format=csv,noheader
        ("0, 00000000:18:00.0, GPU-1f, 1650123456789\n",
         [(0, "0000:18:00.0", "GPU-1f", "1650123456789")]),
        # quoted cells
        ('"index","pci.bus_id","uuid","serial"\n"2","00000000:5D:00.0","GPU-x","165"\n',
         [(2, "0000:5d:00.0", "GPU-x", "165")]),
    ],
)
def test_inventory_rows(text, want):
    fp = inventory.parse(text, ctx(path="hosts/node0042/gpus.csv"))
    check_accounting(fp)
    assert fp.rejects == []
    got = [(e.attrs["index"], e.attrs["pci"], e.attrs["uuid"], e.attrs["serial"])
           for e in fp.events]
    assert got == want
    for e in fp.events:
        assert (e.kind, e.ts, e.ts_quality, e.device, e.host) == (
            "gpu_inventory", None, "untimed", e.attrs["pci"], "node0042")


def test_inventory_accounting_on_dirty_input():
    text = (
        "index, pci.bus_id, uuid, serial\n"
        "\n"
        "0, 00000000:18:00.0, GPU-1f, 1650123456789\n"
        "x, 00000000:19:00.0, GPU-2f, 1650123456780\n"
        "1, not-a-bus-id, GPU-3f, 1\n"
        "2\n"
        "\x00\x00\n"
        "index, pci.bus_id, uuid, serial\n"
        "3, 00000000:1A:00.0, GPU-4f, 1650123456781"
    )
    fp = inventory.parse(text, ctx())
    check_accounting(fp)
    assert fp.lines == 9
    assert [e.line_no for e in fp.events] == [3, 9]
    assert [(r.line_no, r.reason) for r in fp.rejects] == [
        (4, "bad inventory row"), (5, "bad inventory row"), (6, "short inventory row"),
        (7, "short inventory row")]


def test_gpu_map_ties_pci_addresses_to_gpus():
    events = inventory.parse(INVENTORY, ctx()).events
    assert inventory.gpu_map(events) == {
        "0000:18:00.0": (0, "1650123456789", "GPU-1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"),
        "0000:3b:00.0": (1, "1650123456790", "GPU-2f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"),
    }
    # An Xid line's address finds its GPU after normalization.
    from faultline.pipeline.pci import normalize_pci

    assert inventory.gpu_map(events)[normalize_pci("PCI:0000:3b:00")][0] == 1


def test_inventory_empty_file():
    fp = inventory.parse("", ctx())
    assert (fp.lines, fp.events, fp.rejects) == (0, [], [])
