"""BMC event log (``ipmitool sel elist`` / ``sel list``, FreeIPMI ``ipmi-sel``) to events:
``parse(text, ctx)``. Redfish's JSON form of the same log: :mod:`.redfish`.

A row is ``id | date | time | sensor | event | direction [| detail]``::

      1a3 | 07/01/2024 | 12:00:01 | Power Supply PSU2_Status | Failure detected () | Asserted
      1a4 | 07/01/2024 | 12:03:40 | Fan FAN3_Tach | Lower Critical going low | Asserted
       7 | 12/14/22 | 23:09:44 CET | Memory #0x02 | Uncorrectable ECC | Asserted
       8 | Pre-Init  |0000000093| System Event #0x01 | Timestamp Clock Sync | Asserted

- An optional 7th column (``Reading 0 < Threshold 1000 RPM``) goes to ``attrs["detail"]``.
- Dates are ``MM/DD/YYYY`` or, from ipmitool 1.8.19 on (locale ``%x``), ``MM/DD/YY``;
  ISO ``YYYY-MM-DD`` is accepted too. The time may carry a zone abbreviation (``%Z``):
  ``UTC``/``GMT``/``Z`` make the time exact; any other abbreviation is not trusted (they
  are ambiguous) and the time is read in ``ctx.tz`` like a zone-less one (``assumed_tz``).
- ``Pre-Init`` rows were logged before the BMC clock was set: ``untimed`` (the seconds
  since BMC init go to ``attrs["preinit_seconds"]``).
- The sensor column starts with the IPMI sensor type (ipmitool's ``sensor_type_desc``);
  :data:`SENSOR_KINDS` maps it to an event kind, anything else is ``sel_other``.
- Decision: only ``Asserted`` rows (and rows without a direction) are events.
  ``Deasserted`` rows record that a condition cleared; they are routine lines, so a
  fault counts once, when it was raised.
- The header-less dump has nothing else: blank lines and ``SEL has no entries`` are
  routine, every other line is a reject (``unrecognized sel line``, ``bad timestamp``,
  ``timestamp out of range`` for a date outside 2000..2099: a BMC clock reset to 1970 or
  corrupted; see :mod:`faultline.pipeline.timeutil`).
"""

from __future__ import annotations

import datetime as dt
import re

from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import OUT_OF_RANGE, in_range, local_to_utc_us, to_us

# IPMI sensor types as ipmitool prints them -> event kind. Types not listed (System
# Event, OS Boot, Critical Interrupt, Drive Slot / Bay, Watchdog2, ...) are sel_other.
SENSOR_KINDS: dict[str, str] = {
    "Power Supply": "sel_power",
    "Power Unit": "sel_power",
    "Current": "sel_power",
    "System ACPI Power State": "sel_power",
    "Fan": "sel_fan",
    "Cooling Device": "sel_fan",
    "Temperature": "sel_thermal",
    "Memory": "sel_memory",
    "POST Memory Resize": "sel_memory",
    "Processor": "sel_processor",
    "Voltage": "sel_chassis",
    "Physical Security": "sel_chassis",
    "Platform Security": "sel_chassis",
    "Platform Security Violation": "sel_chassis",
    "Chassis": "sel_chassis",
    "Module / Board": "sel_chassis",
    "Management Subsys Health": "sel_chassis",
    "Microcontroller": "sel_chassis",
    "Battery": "sel_chassis",
    "Chip Set": "sel_chassis",
    "Cable / Interconnect": "sel_chassis",
    "Terminator": "sel_chassis",
}

# The remaining ipmitool sensor type names (sel_other), so the type can still be split
# off the sensor name.
OTHER_SENSOR_TYPES: tuple[str, ...] = (
    "Other", "Drive Slot / Bay", "Drive Slot (Bay)", "System Firmwares",
    "System Firmware Progress", "Event Logging Disabled", "Watchdog1", "Watchdog 1",
    "System Event", "Critical Interrupt", "Button", "Add-in Card", "Other FRU",
    "System Boot Initiated", "Boot Error", "OS Boot", "OS Critical Stop",
    "Slot / Connector", "Watchdog2", "Watchdog 2", "Platform Alert", "Entity Presence",
    "Monitor ASIC", "LAN", "Session Audit", "Version Change", "FRU State", "OEM reserved",
    "Unknown",
)

# Longest first, so "Power Supply" is not read as "Power Unit"'s prefix and so on.
_TYPES = sorted((*SENSOR_KINDS, *OTHER_SENSOR_TYPES), key=len, reverse=True)

_ID = re.compile(r"^[0-9a-fA-F]+$")
_DATE_US = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})$")
_DATE_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})(?:\s*(AM|PM))?(?:\s+([A-Za-z][A-Za-z0-9+-]*))?$")
_UTC_NAMES = frozenset({"UTC", "GMT", "Z", "UCT"})
_ROUTINE = re.compile(r"^\s*(?:SEL has no entries|SEL Information)?\s*$")


def sensor_type(sensor: str) -> tuple[str | None, str]:
    """Split ``Power Supply PSU2_Status`` into (``Power Supply``, ``PSU2_Status``)."""
    for name in _TYPES:
        if sensor == name or sensor.startswith(name + " "):
            return name, sensor[len(name):].strip()
    return None, sensor


def kind_of(sensor_type_name: str | None) -> str:
    """Event kind of an IPMI sensor type."""
    return SENSOR_KINDS.get(sensor_type_name or "", "sel_other")


# Other spellings of the IPMI sensor types: DMTF Redfish's ``SensorType`` enum
# (LogEntry schema, https://redfish.dmtf.org/schemas/v1/LogEntry.v1_16_0.json) and
# FreeIPMI's ``ipmi-sel`` Type column. Keys lower-case.
TYPE_ALIASES: dict[str, str] = {
    "power supply / converter": "sel_power",
    "power unit / power management": "sel_power",
    "system acpi powerstate": "sel_power",
    "system acpi power state": "sel_power",
    "cooling device": "sel_fan",
    "physical chassis security": "sel_chassis",
    "platform security violation attempt": "sel_chassis",
    "management subsystem health": "sel_chassis",
    "microcontroller / coprocessor": "sel_chassis",
    "microcontroller/coprocessor": "sel_chassis",
    "module / board": "sel_chassis",
    "module/board": "sel_chassis",
    "cable / interconnect": "sel_chassis",
    "cable/interconnect": "sel_chassis",
    "chip set": "sel_chassis",
    "chassis": "sel_chassis",
    "system chassis": "sel_chassis",
    "memory": "sel_memory",
    "post memory resize": "sel_memory",
}
_LOWER_KINDS = {k.lower(): v for k, v in SENSOR_KINDS.items()}


def kind_of_type(name: str | None) -> str:
    """Event kind of a sensor type however a tool spells it (ipmitool, FreeIPMI,
    Redfish): exact ipmitool name first, then case-insensitive aliases."""
    if not name:
        return "sel_other"
    if name in SENSOR_KINDS:
        return SENSOR_KINDS[name]
    low = " ".join(name.lower().split())
    return _LOWER_KINDS.get(low) or TYPE_ALIASES.get(low, "sel_other")


def parse_time(date: str, time: str, ctx: ParseContext) -> tuple[int | None, str] | None:
    """(epoch_us or None, ts_quality) of a row's date and time; None if unreadable."""
    if date.lower().startswith("pre-init"):
        return None, "untimed"
    m = _DATE_US.match(date)
    if m:
        mon, day, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if year < 100:
            year += 2000
    else:
        m = _DATE_ISO.match(date)
        if not m:
            return None
        year, mon, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    t = _TIME.match(time)
    if not t:
        return None
    h, mi, s, ampm, zone = t.groups()
    hour = int(h)
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "PM" else 0)
    try:
        naive = dt.datetime(year, mon, day, hour, int(mi), int(s))
    except ValueError:
        return None
    if zone and zone.upper() in _UTC_NAMES:
        return to_us(naive.replace(tzinfo=dt.UTC)), "exact"
    try:
        return local_to_utc_us(naive, ctx.zone), "assumed_tz"
    except ValueError:  # 12/31/9999 west of UTC: past the end of the calendar
        return None


def parse_row(line: str, line_no: int, ctx: ParseContext) -> ParsedEvent | Reject | None:
    """One SEL line: an event, a reject, or None for a routine line."""
    if _ROUTINE.match(line):
        return None
    fields = [f.strip() for f in line.split("|")]
    if len(fields) < 5 or not _ID.match(fields[0]):
        return Reject.of(line_no, "unrecognized sel line", line)
    record, date, time, sensor, event = fields[:5]
    direction = fields[5] if len(fields) > 5 else ""
    detail = " | ".join(f for f in fields[6:] if f)
    when = parse_time(date, time, ctx)
    if when is None:
        return Reject.of(line_no, "bad timestamp", line)
    if when[0] is not None and not in_range(when[0]):
        return Reject.of(line_no, OUT_OF_RANGE, line)
    if direction.lower() == "deasserted":
        return None
    stype, name = sensor_type(sensor)
    attrs: dict = {
        "record_id": record.lower(),
        "sensor_type": stype,
        "sensor": name,
        "event": event,
        "asserted": True,
    }
    if detail:
        attrs["detail"] = detail
    if date.lower().startswith("pre-init") and time.isdecimal():
        attrs["preinit_seconds"] = int(time)
    ts, quality = when
    return ParsedEvent(
        line_no=line_no,
        kind=kind_of(stype),
        message=" | ".join(fields[3:]),
        ts=ts,
        ts_quality=quality,
        host=ctx.host,
        device=name or None,
        job_id=ctx.job_id,
        attrs=attrs,
    )


# FreeIPMI ``ipmi-sel``: a header row names the columns (``ID | Date | Time | Name |
# Type | [State |] Event``; ``--comma-separated-output`` uses commas).
_FREEIPMI_HEADER = re.compile(r"^\s*ID\s*([|,])\s*Date\s*[|,]\s*Time\s*[|,]\s*Name\s*[|,]", re.I)
_FREEIPMI_DATE = re.compile(r"^([A-Z][a-z]{2})-(\d{1,2})-(\d{4})$")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_UNTIMED_DATES = frozenset({"postinit", "pre-init", "preinit", "n/a", "unknown"})


def looks_like_freeipmi(first_line: str) -> bool:
    """Whether a file's first line is ``ipmi-sel``'s header (for sniffing)."""
    return bool(_FREEIPMI_HEADER.match(first_line))


def parse_freeipmi(lines: list[str], first: int, ctx: ParseContext) -> FileParse:
    """Parse FreeIPMI ``ipmi-sel`` output whose header is ``lines[first]``.

    Dates are ``Jul-20-2017`` (read in ``ctx.tz``); ``PostInit`` rows were logged before
    the BMC clock was set (``untimed``). The kind comes from the Type column (the IPMI
    sensor type, :func:`kind_of_type`). With ``--verbose`` an ``Event Direction`` column
    says ``Deassertion Event``: such rows are routine, as ipmitool's ``Deasserted``."""
    out = FileParse(len(lines), shape="freeipmi")
    m = _FREEIPMI_HEADER.match(lines[first])
    delim = m.group(1) if m else "|"
    cols = [c.strip().lower() for c in lines[first].split(delim)]
    col = {c: i for i, c in enumerate(cols)}
    need = ("id", "date", "time", "name", "type", "event")
    if not all(c in col for c in need):
        out.rejects.extend(Reject.of(i + 1, "unrecognized sel header", ln)
                           for i, ln in enumerate(lines) if ln.strip())
        return out
    for i in range(first + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.strip() == lines[first].strip():
            continue
        f = [x.strip() for x in line.split(delim, len(cols) - 1)]
        if len(f) < len(cols) or not _ID.match(f[col["id"]]):
            out.rejects.append(Reject.of(i + 1, "unrecognized sel line", line))
            continue
        date, time = f[col["date"]], f[col["time"]]
        if date.lower() in _UNTIMED_DATES:
            when: tuple[int | None, str] | None = (None, "untimed")
        elif (dm := _FREEIPMI_DATE.match(date)) and dm.group(1) in _MONTHS:
            when = parse_time(f"{_MONTHS[dm.group(1)]}/{dm.group(2)}/{dm.group(3)}", time, ctx)
        else:
            when = None
        if when is None:
            out.rejects.append(Reject.of(i + 1, "bad timestamp", line))
            continue
        if when[0] is not None and not in_range(when[0]):
            out.rejects.append(Reject.of(i + 1, OUT_OF_RANGE, line))
            continue
        direction = f[col["event direction"]] if "event direction" in col else ""
        if direction.lower().startswith("deassertion"):
            continue
        stype, name, event = f[col["type"]], f[col["name"]], f[col["event"]]
        attrs: dict = {"record_id": f[col["id"]].lower(), "sensor_type": stype or None,
                       "sensor": name, "event": event, "asserted": True}
        if "state" in col and f[col["state"]]:
            attrs["state"] = f[col["state"]]
        out.events.append(ParsedEvent(
            line_no=i + 1, kind=kind_of_type(stype), message=" | ".join(f[col["name"]:]),
            ts=when[0], ts_quality=when[1], host=ctx.host, device=name or None,
            job_id=ctx.job_id, attrs=attrs))
    return out


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse an ``ipmitool sel elist`` / ``sel list`` dump, or ``ipmi-sel`` output."""
    lines = split_lines(text)
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is not None and looks_like_freeipmi(lines[first].lstrip("\ufeff")):
        lines[first] = lines[first].lstrip("\ufeff")
        return parse_freeipmi(lines, first, ctx)
    out = FileParse(len(lines), shape="sel_elist")
    for i, line in enumerate(lines, 1):
        got = parse_row(line, i, ctx)
        if isinstance(got, ParsedEvent):
            out.events.append(got)
        elif isinstance(got, Reject):
            out.rejects.append(got)
    return out
