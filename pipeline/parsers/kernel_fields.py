"""Field extractors of the kernel rules: GPU, network and PCIe messages.

The rules themselves are data (``rules/*.toml``, loaded by :mod:`kernel_rules`); what a
regex cannot say alone (normalizing a PCI address, decoding the body of an Xid by its
code, deciding whether the next line continues an AER report) lives here, as named
functions a rule refers to with ``fields = "<name>"`` or ``absorb = "<name>"``. The
names are the keys of :data:`FIELDS` and :data:`ABSORB`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from faultline.pipeline.pci import find_bdf, normalize_pci
from faultline.pipeline.records import INT32_MAX

_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"


@dataclass(slots=True)
class MessageMatch:
    """What :func:`classify` found in one message (mutable while lines are absorbed)."""

    rule_id: str
    kind: str
    xid: int | None = None
    device: str | None = None
    attrs: dict = field(default_factory=dict)


Fields = Callable[[re.Match, MessageMatch], None]
Absorb = Callable[[MessageMatch, str], bool]


# --- helpers for field extraction -------------------------------------------------------


def _int(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _yes(text: str | None) -> bool | None:
    return None if text is None else text.lower() == "yes"


# --- NVIDIA Xid ------------------------------------------------------------------------

XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
    r"(?: GPU-I:(?P<gi>\w+))?\): (?P<code>\d+)"
    r"(?:, pid=(?P<pid>[^,]*?))?(?:, name=(?P<name>[^,]*?))?(?:,\s*(?P<text>.*))?$"
)

_XID48_UNIT = re.compile(r"detected on GPU in (?:the )?(.+?)(?: at |[.,]|$)")
_XID140_COUNTS = re.compile(r"\b(DRAM|LTC|MMU|PCIE):\s*(\d+)")
_XID154 = re.compile(
    r"recovery action changed from (0x[0-9a-fA-F]+) \(([^)]*)\) to (0x[0-9a-fA-F]+) \(([^)]*)\)"
)
_XID9495 = re.compile(
    r"\b(Contained|Uncontained): (.+?)(?: \(([^)]*)\))?\.?\s*RST: (Yes|No),?\s*D-RST: (Yes|No)"
)
_NVLINK5 = re.compile(
    r"^(?P<sub>\S+) (?P<sev>Fatal|Nonfatal|Non-fatal) XC(?P<xc>\d+) i(?P<inst>\d+) "
    r"Link (?P<link>\d+)(?: \((?P<regs>[^)]*)\))?"
)
_XID74_LINK = re.compile(r"\blink (\d+)")
_XID119 = re.compile(r"Expected function (\d+) \((\w+)\)")
_XID63 = re.compile(r"New row (?:\((0x[0-9a-fA-F]+)\) )?marked for remapping")
_XID64 = re.compile(r"Row Remapper Error: \((0x[0-9a-fA-F]+)\) - (.*)")


def _xid_48(text: str, attrs: dict) -> None:
    m = _XID48_UNIT.search(text)
    if m:
        unit = m.group(1).strip()
        attrs["unit"] = "framebuffer" if "framebuffer" in unit.lower() else unit


def _xid_140(text: str, attrs: dict) -> None:
    for unit, count in _XID140_COUNTS.findall(text):
        attrs[unit.lower()] = int(count)


def _xid_154(text: str, attrs: dict) -> None:
    m = _XID154.search(text)
    if m:
        attrs["previous_action"] = m.group(2)
        attrs["recovery_code"] = int(m.group(3), 16)
        attrs["recovery_action"] = m.group(4)


def _xid_94_95(text: str, attrs: dict) -> None:
    m = _XID9495.search(text)
    if m:
        attrs["contained"] = m.group(1) == "Contained"
        attrs["unit"] = m.group(2).strip()
        if m.group(3):
            attrs["unit_code"] = m.group(3)
        attrs["rst"] = _yes(m.group(4))
        attrs["d_rst"] = _yes(m.group(5))


def _xid_nvlink5(text: str, attrs: dict) -> None:
    m = _NVLINK5.search(text)
    if m:
        attrs["subcode"] = m.group("sub")
        attrs["fatal"] = m.group("sev") == "Fatal"
        attrs["xc"] = int(m.group("xc"))
        attrs["instance"] = int(m.group("inst"))
        attrs["link"] = int(m.group("link"))
        if m.group("regs"):
            attrs["registers"] = m.group("regs").split()


def _xid_74(text: str, attrs: dict) -> None:
    m = _XID74_LINK.search(text)
    if m:
        attrs["link"] = int(m.group(1))


def _xid_119(text: str, attrs: dict) -> None:
    m = _XID119.search(text)
    if m:
        attrs["rpc_function"] = m.group(2)
        attrs["rpc_function_id"] = int(m.group(1))


def _xid_63(text: str, attrs: dict) -> None:
    m = _XID63.search(text)
    if m and m.group(1):
        attrs["row"] = m.group(1)


def _xid_64(text: str, attrs: dict) -> None:
    m = _XID64.search(text)
    if m:
        attrs["row"] = m.group(1)
        attrs["reason"] = m.group(2).strip()


# Per-code body parsers: data, keyed by Xid.
XID_DETAIL: dict[int, Callable[[str, dict], None]] = {
    48: _xid_48,
    63: _xid_63,
    64: _xid_64,
    74: _xid_74,
    94: _xid_94_95,
    95: _xid_94_95,
    119: _xid_119,
    140: _xid_140,
    154: _xid_154,
    **{code: _xid_nvlink5 for code in range(144, 151)},
}


def _unquote_pid(raw: str | None) -> int | None:
    if raw is None:
        return None
    raw = raw.strip().strip("'\"")
    return int(raw) if raw.isdecimal() else None  # not isdigit: int("²") fails


def _unknown_none(raw: str | None) -> str | None:
    if raw is None:
        return None
    raw = raw.strip()
    return None if raw in ("", "<unknown>", "'<unknown>'") else raw


def _xid_fields(m: re.Match, mm: MessageMatch) -> None:
    code = int(m.group("code"))
    # A code of 0 or one wider than 32 bits is no Xid NVIDIA defines (a damaged line):
    # still an Xid report, but the code stays as written, not in the xid column.
    if 1 <= code <= INT32_MAX:  # the xid column: NVIDIA's codes start at 1, 32 bits
        mm.xid = code
    else:
        mm.attrs["code_raw"] = m.group("code")
    mm.device = normalize_pci(m.group("pci"))
    text = (m.group("text") or "").strip()
    attrs = mm.attrs
    attrs["pid"] = _unquote_pid(m.group("pid"))
    attrs["name"] = _unknown_none(m.group("name"))
    attrs["text"] = text
    if m.group("gi") is not None:
        attrs["gpu_instance"] = m.group("gi")
    detail = XID_DETAIL.get(code)
    if detail is not None:
        detail(text, attrs)


# --- other NVIDIA lines ----------------------------------------------------------------


def _gpu_uuid_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = normalize_pci(m.group(1))
    mm.attrs["uuid"] = m.group(2)


_SERIAL_RE = re.compile(r"NVRM: GPU Board Serial Number: (\S+)")


def _absorb_serial(mm: MessageMatch, msg: str) -> bool:
    m = _SERIAL_RE.search(msg)
    if m is None or "serial" in mm.attrs:
        return False
    mm.attrs["serial"] = m.group(1)
    return True


def _serial_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["serial"] = m.group(1)


def _nvrm_device_fields(m: re.Match, mm: MessageMatch) -> None:
    text = m.string
    pci = re.search(r"PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)", text)
    mm.device = normalize_pci(pci.group(1)) if pci else find_bdf(text)


def _absorb_rm_init(mm: MessageMatch, msg: str) -> bool:
    if "rm_init_adapter" not in msg or "failed" not in msg:
        return False
    dev = find_bdf(msg)
    return dev is None or mm.device is None or dev == mm.device


def _absorb_fallen_tail(mm: MessageMatch, msg: str) -> bool:
    """The rest of the three-line "The NVIDIA GPU <bdf> ... fallen off the bus" report."""
    if "(PCI ID:" in msg and "installed in this system has" in msg:
        pci_id = re.search(r"\(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\)", msg)
        if pci_id:
            mm.attrs["pci_id"] = pci_id.group(1).lower()
        return True
    return "fallen off the bus and is not responding" in msg


def _driver_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["version"] = m.group(2)
    mm.attrs["open"] = m.group(1) is not None


def _sxid_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = normalize_pci(m.group("pci"))
    mm.attrs["switch"] = m.group("sw")
    mm.attrs["sxid"] = int(m.group("code"))
    if m.group("sev"):
        mm.attrs["severity"] = m.group("sev")
        mm.attrs["fatal"] = m.group("sev") == "Fatal"
    rest = m.group("rest") or ""
    link = re.match(r"Link (\d+)", rest)
    if link:
        mm.attrs["link"] = int(link.group(1))
    mm.attrs["text"] = rest


_SXID_RE = re.compile(r"(nvidia-nvswitch\d+): SXid \(PCI:([^)]*)\): (\d+), (.*)")


def _absorb_sxid(mm: MessageMatch, msg: str) -> bool:
    # The driver prints "Severity ... Engine instance ..." and "Data {...}" lines with
    # the same switch and code after the headline.
    m = _SXID_RE.search(msg)
    if m is None or m.group(1) != mm.attrs.get("switch") or int(m.group(3)) != mm.attrs.get(
        "sxid"
    ):
        return False
    return not re.match(r"(Fatal|Non-fatal|Nonfatal),", m.group(4))


# --- mlx5 / network ----------------------------------------------------------------------


def _mlx5_dev(m: re.Match, mm: MessageMatch) -> None:
    mm.device = find_bdf(m.string)


def _module_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = find_bdf(m.string)
    mm.attrs["severity"] = m.group(1) or "info"
    mm.attrs["module"] = int(m.group(2))
    mm.attrs["status"] = m.group(3).strip()
    if m.group(4):
        mm.attrs["error"] = m.group(4).strip()


def _power_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = find_bdf(m.string)
    mm.attrs["watts"] = int(m.group(1))


def _mlx5_link_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group(2)
    mm.attrs["pci"] = normalize_pci(m.group(1))
    mm.attrs["ifname"] = m.group(2)


def _carrier_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group(1)
    mm.attrs["ifname"] = m.group(1)


def _cmd_timeout_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = find_bdf(m.string)
    cmd = re.search(r"\b([A-Z][A-Z0-9_]+)\((0x[0-9a-fA-F]+)\)", m.string)
    if cmd:
        mm.attrs["command"] = cmd.group(1)


# --- PCIe ----------------------------------------------------------------------------------

_SEVERITY = {
    "corrected": "Corrected",
    "correctable": "Corrected",
    "uncorrected (non-fatal)": "Uncorrected (Non-Fatal)",
    "uncorrectable (non-fatal)": "Uncorrected (Non-Fatal)",
    "uncorrected (fatal)": "Uncorrected (Fatal)",
    "uncorrectable (fatal)": "Uncorrected (Fatal)",
}

_AER_SEV = (
    r"Corrected|Correctable|Uncorrected \((?:Non-Fatal|Fatal)\)"
    r"|Uncorrectable \((?:Non-Fatal|Fatal)\)"
)
_BUS_ERROR_RE = re.compile(
    # "id=00e8(Receiver ID)": kernels before 4.x name the agent by its requester id
    r"^\s*(?:\S+ )?(?P<dev>" + _BDF + r"): (?:AER: )?(?:PCIe|CXL) Bus Error: "
    r"severity=(?P<sev>[^,]+), type=(?P<type>[^,]+), (?:id=[0-9a-fA-F]{4})?\((?P<agent>[^)]*)\)"
)
_AER_DETAIL_RE = re.compile(r"^(?:\S+ )?(?P<dev>" + _BDF + r"): (?:AER: )?(?P<body>  .*)$")
_AER_STATUS_RE = re.compile(
    r"device \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\] error"
    r" status/mask=([0-9a-fA-F]{8})/([0-9a-fA-F]{8})"
)
_AER_BIT_RE = re.compile(r"^\s*\[\s*(\d+)\] (\S+)")


def _line_dev(text: str) -> str | None:
    m = re.match(r"^(?:\S+ )?(" + _BDF + r"):", text)
    return normalize_pci(m.group(1)) if m else find_bdf(text)


def _aer_header_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = _line_dev(m.string)
    mm.attrs["severity"] = _SEVERITY.get(m.group(2).lower(), m.group(2))
    mm.attrs["multiple"] = m.group(1) is not None
    mm.attrs["source"] = normalize_pci(m.group(3))


def _bus_error_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = normalize_pci(m.group("dev"))
    mm.attrs["severity"] = _SEVERITY.get(m.group("sev").strip().lower(), m.group("sev").strip())
    mm.attrs["type"] = m.group("type").strip()
    mm.attrs["agent"] = m.group("agent")


def _absorb_aer_detail(mm: MessageMatch, msg: str) -> bool:
    m = _AER_DETAIL_RE.match(msg)
    if m is None:
        return False
    dev = normalize_pci(m.group("dev"))
    if dev != mm.attrs.get("error_device", mm.device):
        return False
    body = m.group("body")
    st = _AER_STATUS_RE.search(body)
    if st:
        mm.attrs["vendor_device"] = f"{st.group(1)}:{st.group(2)}".lower()
        mm.attrs["status"] = st.group(3)
        mm.attrs["mask"] = st.group(4)
    bit = _AER_BIT_RE.match(body)
    if bit:
        mm.attrs.setdefault("errors", []).append(bit.group(2))
    return True


def _absorb_aer(mm: MessageMatch, msg: str) -> bool:
    """After an ``AER: ... error received`` header: its Bus Error line(s) and details."""
    be = _BUS_ERROR_RE.search(msg)
    if be is not None:
        dev = normalize_pci(be.group("dev"))
        if "error_device" in mm.attrs and mm.attrs["error_device"] != dev:
            return False
        mm.attrs["error_device"] = dev
        mm.attrs["type"] = be.group("type").strip()
        mm.attrs["agent"] = be.group("agent")
        return True
    return "error_device" in mm.attrs and _absorb_aer_detail(mm, msg)


def _dpc_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = _line_dev(m.string)
    st = re.search(r"status:(0x[0-9a-fA-F]+),? source:(0x[0-9a-fA-F]+)", m.string)
    if st:
        mm.attrs["status"] = st.group(1)
        mm.attrs["source"] = st.group(2)


def _slot_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = _line_dev(m.string)
    mm.attrs["slot"] = m.group(1)




# --- generic: the rule's named groups ---------------------------------------------------


_NUMBER = re.compile(r"-?[0-9]{1,15}")  # ASCII digits: int() of "²" fails


def _group_value(text: str) -> int | str:
    """A named group's value: a decimal number as int (when it fits), else the text."""
    return int(text) if _NUMBER.fullmatch(text) else text


def groups_fields(m: re.Match, mm: MessageMatch) -> None:
    """The default of a rule without ``fields``: named groups become the event's fields.

    ``device`` is the device as written (a PCI address is normalized), ``pci`` a PCI
    address, ``xid`` an Xid code (kept only in NVIDIA's 32-bit range); every other
    named group that matched becomes an attribute of the same name.
    """
    for name, text in m.groupdict().items():
        if text is None:
            continue
        if name in ("device", "pci"):
            mm.device = normalize_pci(text) or (text if name == "device" else None)
        elif name == "xid":
            code = _int(text)
            if code is not None and 1 <= code <= INT32_MAX:
                mm.xid = code
            else:
                mm.attrs["code_raw"] = text
        else:
            mm.attrs[name] = _group_value(text)


def _bdf_groups_fields(m: re.Match, mm: MessageMatch) -> None:
    """Named groups, and the first PCI address of the line as the device (mlx5 lines
    name their function before the message: ``mlx5_core 0000:3b:00.0: ...``)."""
    groups_fields(m, mm)
    if mm.device is None:
        mm.device = find_bdf(m.string)


#: Field extractors a rule names with ``fields = "<name>"``.
FIELDS: dict[str, Fields] = {
    "groups": groups_fields,
    "bdf_groups": _bdf_groups_fields,
    "xid": _xid_fields,
    "gpu_uuid": _gpu_uuid_fields,
    "serial": _serial_fields,
    "nvrm_device": _nvrm_device_fields,
    "driver": _driver_fields,
    "sxid": _sxid_fields,
    "mlx5_dev": _mlx5_dev,
    "module": _module_fields,
    "power": _power_fields,
    "mlx5_link": _mlx5_link_fields,
    "carrier": _carrier_fields,
    "cmd_timeout": _cmd_timeout_fields,
    "aer_header": _aer_header_fields,
    "bus_error": _bus_error_fields,
    "dpc": _dpc_fields,
    "slot": _slot_fields,
}

#: Continuation deciders a rule names with ``absorb = "<name>"``.
ABSORB: dict[str, Absorb] = {
    "serial": _absorb_serial,
    "rm_init": _absorb_rm_init,
    "fallen_tail": _absorb_fallen_tail,
    "sxid": _absorb_sxid,
    "aer": _absorb_aer,
    "aer_detail": _absorb_aer_detail,
}
