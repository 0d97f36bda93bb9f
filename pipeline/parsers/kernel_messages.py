"""Kernel messages that matter, as data: one :class:`Rule` per signature.

A rule names the event kind it gives, the regex that recognizes the message (searched
in the message text, after the line's time/host prefix is removed), a ``select``
fragment for the vectorized pre-filter, where the wording comes from, and real
example messages (``tests/test_parse_kernel.py`` walks every rule and its examples).

Selection is two-stage. :data:`SELECT_PATTERN` (the union of every rule's ``select``)
runs once over all lines of a file as one polars ``str.contains``; only the lines it
selects reach :func:`classify`, which tries the rules in order (first match wins: the
Xid rule comes before the generic "fallen off the bus" rule, soft lockups before
``BUG:``). ``select`` fragments use the syntax both Rust's ``regex`` crate and Python's
``re`` accept (no look-around, no back-references) and must select every message the
rule's ``pattern`` matches.

Multi-line records: a rule with ``absorb`` decides whether the next line's message
belongs to the same event (an AER report and its ``device [...] error status/mask``
detail lines, an APEI record's ``{1}[Hardware Error]`` lines, the ``oom-kill:`` summary
and its ``Killed process`` line, ``GPU at PCI`` and the ``Board Serial Number`` line).

Sources are cited as in ``../shared/reference/log_signatures.md``: (src) the format
string was read in the emitting program, (paste) a real posted line, (inferred) a
lenient pattern for wordings that could not be verified.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from faultline.pipeline.pci import find_bdf, normalize_pci
from faultline.pipeline.records import INT32_MAX

# Programs besides the kernel whose syslog lines a rule reads. Kernel text (dmesg
# shapes, or syslog lines tagged ``kernel``) is read by every rule.
ANY_PROGRAM = "*"
_KERNEL_PROGRAMS = (None, "kernel")

_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"


# --- literal needles of a select regex (the cheap pre-check) -------------------------


def _split_alternatives(pattern: str) -> list[str]:
    """Top-level ``|`` alternatives of a regex (groups and classes kept whole)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            cur.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            j = _class_end(pattern, i)
            cur.append(pattern[i : j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _class_end(pattern: str, i: int) -> int:
    j = i + 1
    if pattern[j] == "^":
        j += 1
    if pattern[j] == "]":
        j += 1
    while pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j


def _group_end(pattern: str, i: int) -> int:
    depth, j = 0, i
    while True:
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _class_end(pattern, j) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
        j += 1


def _skip_quantifier(pattern: str, i: int) -> int:
    if i < len(pattern) and pattern[i] in "?*+":
        return i + 1
    if i < len(pattern) and pattern[i] == "{":
        return pattern.index("}", i) + 1
    return i


def required_literal(alternative: str) -> str:
    """The longest literal run every match of ``alternative`` (no top-level ``|``) contains."""
    runs: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    i, n = 0, len(alternative)
    while i < n:
        c = alternative[i]
        if c in "[(" or c in ".^$" or (c == "\\" and alternative[i + 1].isalnum()):
            # a class, group, wildcard, anchor or \d-like escape: not a literal
            flush()
            if c == "[":
                i = _class_end(alternative, i) + 1
            elif c == "(":
                i = _group_end(alternative, i) + 1
            else:
                i += 2 if c == "\\" else 1
            i = _skip_quantifier(alternative, i)
            continue
        tok, i = (alternative[i + 1], i + 2) if c == "\\" else (c, i + 1)
        if i < n and alternative[i] in "?*{":  # optional or counted: not required
            flush()
            i = _skip_quantifier(alternative, i)
            continue
        cur.append(tok)
        if i < n and alternative[i] == "+":  # one or more: the first one is required
            flush()
            i += 1
    flush()
    return max(runs, key=len, default="")


def literal_needles(pattern: str) -> tuple[str, ...] | None:
    """Literals such that every match of ``pattern`` contains at least one of them
    (case-sensitively), or None when that cannot be said of some alternative."""
    if "(?i" in pattern or "(?x" in pattern:
        return None
    out: list[str] = []
    for alt in _split_alternatives(pattern):
        lit = required_literal(alt)
        if not lit and alt.startswith("(?:"):
            # a leading group of literal alternatives: ``(?:foo|bar)\s*\d+``
            end = _group_end(alt, 0)
            inner = literal_needles(alt[3:end])
            if inner is not None and alt[end + 1:end + 2] not in ("?", "*", "{"):
                out.extend(inner)
                continue
        if not lit:
            return None
        out.append(lit)
    return tuple(out)


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


@dataclass(frozen=True)
class Rule:
    """One kernel-message signature."""

    id: str
    kind: str
    select: str  # unanchored regex fragment (Rust + Python syntax) for the pre-filter
    pattern: str  # Python regex, searched in the message
    source: str
    examples: tuple[str, ...]
    fields: Fields | None = None  # fills xid/device/attrs from the match
    absorb: Absorb | None = None  # does the next line's message belong to this event?
    max_absorb: int = 0
    programs: frozenset[str] = frozenset()  # syslog programs besides the kernel
    regex: re.Pattern = field(init=False, repr=False, compare=False)
    needles: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))
        object.__setattr__(
            self,
            "needles",
            tuple(required_literal(a) for a in _split_alternatives(self.select)),
        )

    def applies_to(self, program: str | None) -> bool:
        return (
            program in _KERNEL_PROGRAMS
            or ANY_PROGRAM in self.programs
            or program in self.programs
        )


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
    r"^(?:\S+ )?(?P<dev>" + _BDF + r"): (?:AER: )?(?:PCIe|CXL) Bus Error: severity=(?P<sev>[^,]+), "
    r"type=(?P<type>[^,]+), \((?P<agent>[^)]*)\)"
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


# --- memory / CPU ------------------------------------------------------------------------


def _edac_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = f"MC{m.group(1)}"
    mm.attrs["count"] = _int(m.group(2)) or 1
    loc = re.search(r" on (\S+)", m.string)
    if loc:
        mm.attrs["location"] = loc.group(1)


def _thermal_cpu_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = f"cpu{m.group(1)}"
    mm.attrs["scope"] = m.group(2).lower()


def _apei_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["record"] = int(m.group(1))
    _apei_detail(mm, m.group(2))


def _apei_detail(mm: MessageMatch, body: str) -> None:
    st = re.search(r"section_type: (.+)$", body)
    if st and "section_type" not in mm.attrs:
        mm.attrs["section_type"] = st.group(1).strip()
    sev = re.search(r"event severity: (\S+)", body)
    if sev:
        mm.attrs["severity"] = sev.group(1)


def _absorb_apei(mm: MessageMatch, msg: str) -> bool:
    m = re.search(r"\{(\d+)\}\[Hardware Error\]: ?(.*)", msg)
    if m is None or int(m.group(1)) != mm.attrs.get("record"):
        return False
    _apei_detail(mm, m.group(2))
    return True


_MCE_BANK = re.compile(r"CPU (\d+): Machine Check(?: Exception)?: (\S+) Bank (\d+): ([0-9a-fA-F]+)")


def _mce_detail(mm: MessageMatch, body: str) -> None:
    b = _MCE_BANK.search(body)
    if b and "bank" not in mm.attrs:
        mm.device = f"cpu{b.group(1)}"
        mm.attrs["bank"] = int(b.group(3))
        mm.attrs["status"] = b.group(4)
    if "memory error" in body.lower():
        mm.attrs["memory"] = True


def _mce_fields(m: re.Match, mm: MessageMatch) -> None:
    _mce_detail(mm, m.string)


def _absorb_mce(mm: MessageMatch, msg: str) -> bool:
    if re.search(r"\{\d+\}\[Hardware Error\]", msg) or not re.match(
        r"(?:mce: )?\[Hardware Error\]:", msg
    ):
        return False
    _mce_detail(mm, msg)
    return True


def _memory_failure_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["pfn"] = m.group(1)
    body = m.group(2)
    sig = re.search(r"Sending SIGBUS to (.+?):(\d+)", body)
    if sig:
        mm.attrs["comm"] = sig.group(1)
        mm.attrs["pid"] = int(sig.group(2))
    rec = re.search(r"recovery action for (.+?): (\w+)", body)
    if rec:
        mm.attrs["page"] = rec.group(1)
        mm.attrs["result"] = rec.group(2)


# --- storage -----------------------------------------------------------------------------


def _nvme_error_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group(1) or m.group(2)


def _nvme_timeout_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group(1)
    act = re.search(r"timeout, (.+)$", m.string)
    if act:
        mm.attrs["action"] = act.group(1).strip()
    if "Admin Cmd" in m.string or re.search(r"QID 0 ", m.string):
        mm.attrs["admin"] = True


def _io_error_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group("dev")
    if m.group("what"):
        mm.attrs["error"] = m.group("what")
    if m.group("sector"):
        mm.attrs["sector"] = int(m.group("sector"))
    op = re.search(r"op 0x[0-9a-f]+:\((\w+)\)", m.string)
    if op:
        mm.attrs["op"] = op.group(1)


def _fs_fields(m: re.Match, mm: MessageMatch) -> None:
    text = m.string
    fs = re.search(r"\b(EXT4-fs|EXT3-fs|XFS|BTRFS)\b", text)
    if fs:
        mm.attrs["fs"] = fs.group(1).split("-")[0].lower()
    dev = re.search(r"\((?:device )?([^()\s]+)\)", text)
    if dev:
        mm.device = dev.group(1)
    if "read-only" in text:
        mm.attrs["read_only"] = True


def _nfs_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.device = m.group(1)
    mm.attrs["server"] = m.group(1)
    if m.group(2):
        mm.attrs["state"] = m.group(2)


# --- hangs, crashes, processes -----------------------------------------------------------


def _hung_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["comm"] = m.group(1)
    mm.attrs["pid"] = int(m.group(2))
    mm.attrs["seconds"] = int(m.group(3))


def _lockup_fields(m: re.Match, mm: MessageMatch) -> None:
    if m.group("cpu") is not None:
        mm.device = f"cpu{m.group('cpu')}"
        mm.attrs["lockup"] = "soft"
        mm.attrs["seconds"] = int(m.group("sec"))
        if m.group("comm"):
            mm.attrs["comm"] = m.group("comm")
            mm.attrs["pid"] = int(m.group("pid"))
    else:
        mm.device = f"cpu{m.group('hcpu')}"
        mm.attrs["lockup"] = "hard"


def _panic_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["type"] = "panic"
    mm.attrs["reason"] = (m.group(1) or "").strip()


def _bug_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["type"] = "bug"
    mm.attrs["reason"] = m.group(0).strip()


def _oops_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["type"] = "oops"
    mm.attrs["reason"] = m.group(0).strip()


_KILLED_RE = re.compile(
    r"(?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process (\d+)\D.*?\(([^)]*)\)"
)


def _oom_kill_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["pid"] = int(m.group(1))
    mm.attrs["comm"] = m.group(2)
    mm.attrs["cgroup"] = m.string.lstrip().startswith("Memory cgroup")


def _oom_summary_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["constraint"] = m.group(1)
    task = re.search(r",task=([^,]*),pid=(\d+)", m.string)
    if task:
        mm.attrs["comm"] = task.group(1)
        mm.attrs["pid"] = int(task.group(2))


def _absorb_oom_kill(mm: MessageMatch, msg: str) -> bool:
    # dump_header() ends with the oom-kill: summary; __oom_kill_process() prints the
    # "Killed process" line right after it: one kill, one event.
    m = _KILLED_RE.search(msg)
    if m is None or mm.attrs.get("kill_line"):
        return False
    mm.attrs["kill_line"] = True
    mm.attrs["pid"] = int(m.group(1))
    mm.attrs["comm"] = m.group(2)
    return True


def _segfault_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["comm"] = m.group("comm")
    mm.attrs["pid"] = int(m.group("pid"))
    mm.attrs["address"] = m.group("addr")
    mm.attrs["error"] = m.group("err")
    if m.group("lib"):
        mm.attrs["library"] = m.group("lib")


def _version_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["marker"] = "linux_version"
    mm.attrs["version"] = m.group(1)


def _cmdline_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["marker"] = "command_line"
    mm.attrs["command_line"] = m.group(1).strip()


def _reboot_fields(m: re.Match, mm: MessageMatch) -> None:
    mm.attrs["action"] = m.group(1)


def _io_fields_any(m: re.Match, mm: MessageMatch) -> None:
    if m.group("dev"):
        _io_error_fields(m, mm)
    elif m.group("bdev"):
        mm.device = m.group("bdev")
        mm.attrs["error"] = "buffer"
        mm.attrs["block"] = int(m.group("block"))
    else:
        mm.device = m.group("disk")
        mm.attrs["error"] = "raid_disk_failure"
        mm.attrs["array"] = m.group("md")


# --- the rules (order matters: first match wins) -----------------------------------------

RULES: tuple[Rule, ...] = (
    # GPU
    Rule(
        id="nvidia.xid",
        kind="xid",
        select=r"NVRM: Xid",
        pattern=XID_RE.pattern,
        source="log_signatures.md s2 (gpud xid tests, NVIDIA catalog, pastes)",
        examples=(
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off"
            " the bus.",
            "NVRM: Xid (PCI:0004:01:00): 119, pid=430, name=nv_queue, Timeout waiting for RPC"
            " from GSP!",
            "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for"
            " remapping, reset gpu to activate.",
            "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 09 (0x004525c6"
            " 0x00000000)",
        ),
        fields=_xid_fields,
    ),
    Rule(
        id="nvidia.gpu_uuid",
        kind="gpu_serial",
        select=r"NVRM: GPU at PCI:",
        pattern=(
            r"NVRM: GPU at PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):"
            r" (GPU-[0-9a-fA-F-]+)"
        ),
        source="log_signatures.md s2; gpud testdata/dmesg-with-xid-119.log (paste)",
        examples=("NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",),
        fields=_gpu_uuid_fields,
        absorb=_absorb_serial,
        max_absorb=1,
    ),
    Rule(
        id="nvidia.board_serial",
        kind="gpu_serial",
        select=r"NVRM: GPU Board Serial Number",
        pattern=_SERIAL_RE.pattern,
        source="log_signatures.md s2; gpud testdata/dmesg-with-xid-119.log (paste)",
        examples=("NVRM: GPU Board Serial Number: 1650124014249",),
        fields=_serial_fields,
    ),
    Rule(
        id="nvidia.fallen_off_bus",
        kind="gpu_fallen_off_bus",
        select=r"fallen off the bus",
        pattern=r"NVRM: .*fallen off the bus",
        source="NVIDIA driver (inferred wording without Xid; lenient)",
        examples=("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",),
        fields=_nvrm_device_fields,
    ),
    Rule(
        id="nvidia.gpu_lost",
        kind="gpu_lost",
        select=(
            r"RmInitAdapter failed|rm_init_adapter|GPU is lost|Unable to determine the device"
            r" handle"
        ),
        pattern=(
            r"NVRM: .*(?:RmInitAdapter failed|rm_init_adapter(?:\(\d+\))? failed|GPU is lost)"
            r"|Unable to determine the device handle for (?:GPU )?\S+"
        ),
        source="(paste) forum/issue pastes of 'NVRM: GPU 0000:01:00.0: RmInitAdapter failed! "
        "(0x62:0xffff:1863)'; nvidia-smi device-handle error (log_signatures 4.1)",
        examples=(
            "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0xffff:1863)",
            "NVRM: RmInitAdapter failed! (0x27:0x38:1193)",
            "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error",
        ),
        fields=_nvrm_device_fields,
        absorb=_absorb_rm_init,
        max_absorb=1,
        programs=frozenset({ANY_PROGRAM}),
    ),
    Rule(
        id="nvidia.gsp_timeout",
        kind="gsp_timeout",
        select=r"NVRM: .*(?:rpcRecvPoll timedout|GSP.*[Tt]ime(?:d ?)?out|[Hh]eartbeat timed out)",
        pattern=r"NVRM: .*(?:rpcRecvPoll timedout|GSP.*[Tt]ime(?:d ?)?out|[Hh]eartbeat timed out)",
        source="open-gpu-kernel-modules rpc.c 'rpcRecvPoll timedout for fn %d!' (src); "
        "other GSP timeout wordings (inferred; lenient)",
        examples=("NVRM: _issueRpcAndWait: rpcRecvPoll timedout for fn 76!",),
        fields=_nvrm_device_fields,
    ),
    Rule(
        id="nvidia.driver_load",
        kind="nvidia_driver_load",
        select=r"NVRM: loading NVIDIA UNIX",
        pattern=(
            r"NVRM: loading NVIDIA UNIX (Open )?.*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)"
        ),
        source="log_signatures.md 4.19; gpud pstore testdata (paste)",
        examples=(
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC"
            " 2024",
            "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build "
            " (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024",
        ),
        fields=_driver_fields,
    ),
    Rule(
        id="nvidia.sxid",
        kind="sxid",
        select=r"SXid \(PCI:",
        pattern=(
            r"(?P<sw>nvidia-nvswitch\d+): SXid \(PCI:(?P<pci>[^)]*)\): (?P<code>\d+), "
            r"(?:(?P<sev>Fatal|Non-fatal|Nonfatal), )?(?P<rest>.*)"
        ),
        source="log_signatures.md 4.1 (paste, MENTHOS dataset)",
        examples=(
            "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
            "nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat"
            " Timeout Error (First)",
        ),
        fields=_sxid_fields,
        absorb=_absorb_sxid,
        max_absorb=4,
    ),
    # network (mlx5 / carrier)
    Rule(
        id="mlx5.port_module",
        kind="ib_module",
        select=r"Port module event",
        pattern=r"Port module event(?:\[(\w+)\])?: module (\d+), ([^,]+)(?:, (.*))?",
        source="linux mlx5/core/events.c 'Port module event: module %u, %s' (src)",
        examples=(
            "mlx5_core 0000:0c:00.0: mlx5_port_module_event:1136:(pid 0): Port module"
            " event[error]: module 0, Cable error, High Temperature",
            "mlx5_core 0000:41:00.1: Port module event: module 1, Cable unplugged",
        ),
        fields=_module_fields,
    ),
    Rule(
        id="mlx5.health",
        kind="nic_health",
        select=r"health compromised|Fatal error [0-9]+ detected|poll_health",
        pattern=r"mlx5.*(?:health compromised|Fatal error \d+ detected|poll_health)",
        source="linux mlx5/core/health.c (src); gpud infiniband matcher",
        examples=(
            "mlx5_core 0000:d2:00.0: poll_health:825:(pid 0): device's health compromised -"
            " reached miss count",
            "mlx5_core 0000:d2:00.0: Fatal error 1 detected",
        ),
        fields=_mlx5_dev,
    ),
    Rule(
        id="mlx5.cmd_timeout",
        kind="nic_cmd_timeout",
        select=r"mlx5.*(?:\(0x[0-9a-fA-F]+\) timeout|No done completion)",
        pattern=r"mlx5.*(?:\(0x[0-9a-fA-F]+\) timeout|No done completion)",
        source="linux mlx5/core/cmd.c wait_func (src, lenient)",
        examples=(
            "mlx5_core 0000:3b:00.0: wait_func:1155:(pid 2231): ENABLE_HCA(0x104) timeout. Will"
            " cause a leak of a command resource",
        ),
        fields=_cmd_timeout_fields,
    ),
    Rule(
        id="mlx5.pcie_power",
        kind="pcie_power",
        select=r"insufficient power on the PCIe slot",
        pattern=r"Detected insufficient power on the PCIe slot \((\d+)W\)",
        source="linux mlx5/core/events.c (src); gpud infiniband matcher (paste)",
        examples=(
            "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient"
            " power on the PCIe slot (27W).",
        ),
        fields=_power_fields,
    ),
    Rule(
        id="mlx5.temp_warn",
        kind="thermal",
        select=r"temp_warn|High temperature on sensors",
        pattern=r"mlx5.*(?:temp_warn|High temperature on sensors)",
        source="linux mlx5/core/events.c temp_warn (src)",
        examples=(
            "mlx5_core 0000:3b:00.0: temp_warn:165:(pid 0): High temperature on sensors with bit"
            " set 0 1",
        ),
        fields=_mlx5_dev,
    ),
    Rule(
        id="mlx5.link_down",
        kind="ib_link_down",
        select=r" Link down",
        pattern=r"mlx5_core (" + _BDF + r") (\S+): Link down",
        source="log_signatures.md 4.8 (src linux mlx5 en_main.c)",
        examples=("mlx5_core 0000:01:00.0 ibp1s0: Link down",),
        fields=_mlx5_link_fields,
    ),
    Rule(
        id="mlx5.link_up",
        kind="ib_link_up",
        select=r" Link up",
        pattern=r"mlx5_core (" + _BDF + r") (\S+): Link up",
        source="log_signatures.md 4.8; gpud pstore testdata (paste)",
        examples=("mlx5_core 0000:41:00.0 enp65s0f0np0: Link up",),
        fields=_mlx5_link_fields,
    ),
    Rule(
        id="net.lost_carrier",
        kind="ib_link_down",
        select=r"[Ll]ost carrier",
        pattern=r"^(\S+): [Ll]ost carrier",
        source="systemd-networkd; azurehpc-health-checks 1dev_6flap_syslog (paste)",
        examples=("ib6: lost carrier", "ib0: Lost carrier"),
        fields=_carrier_fields,
        programs=frozenset({"systemd-networkd"}),
    ),
    Rule(
        id="net.gained_carrier",
        kind="ib_link_up",
        select=r"Gained carrier",
        pattern=r"^(\S+): Gained carrier",
        source="systemd-networkd; azurehpc-health-checks 1dev_6flap_syslog (paste)",
        examples=("ib6: Gained carrier",),
        fields=_carrier_fields,
        programs=frozenset({"systemd-networkd"}),
    ),
    # PCIe
    Rule(
        id="pcie.aer_received",
        kind="pcie_aer",
        select=r"AER: .*error (?:message )?received",
        pattern=(
            r"AER: (Multiple )?(" + _AER_SEV + r") error (?:message )?received(?::| from) ("
            + _BDF
            + ")"
        ),
        source="linux drivers/pci/pcie/aer.c (src; 5.x and 6.x wordings)",
        examples=(
            "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
            "pcieport 0000:00:1c.5: AER: Correctable error message received from 0000:00:1c.5",
            "pcieport 0000:00:01.1: AER: Multiple Corrected error received: 0000:01:00.0",
        ),
        fields=_aer_header_fields,
        absorb=_absorb_aer,
        max_absorb=24,
    ),
    Rule(
        id="pcie.bus_error",
        kind="pcie_aer",
        select=r"(?:PCIe|CXL) Bus Error: severity=",
        pattern=_BUS_ERROR_RE.pattern,
        source="linux drivers/pci/pcie/aer.c 'PCIe Bus Error: severity=%s, type=%s, (%s)' (src)",
        examples=(
            "pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal),"
            " type=Transaction Layer, (Receiver ID)",
            "nvme 0000:01:00.0: AER: PCIe Bus Error: severity=Correctable, type=Physical Layer,"
            " (Receiver ID)",
        ),
        fields=_bus_error_fields,
        absorb=_absorb_aer_detail,
        max_absorb=24,
    ),
    Rule(
        id="pcie.dpc",
        kind="pcie_dpc",
        select=r"DPC: (?:containment event|unmasked uncorrectable error)",
        pattern=r"DPC: (?:containment event|unmasked uncorrectable error)",
        source="linux drivers/pci/pcie/dpc.c (inferred wording; lenient)",
        examples=("pcieport 0000:00:01.0: DPC: containment event, status:0x1f01 source:0x0000",),
        fields=_dpc_fields,
    ),
    Rule(
        id="pcie.hotplug_link_down",
        kind="pcie_link_down",
        select=r"Slot\([^)]*\): Link Down",
        pattern=r"pciehp.*Slot\(([^)]*)\): Link Down",
        source="linux drivers/pci/hotplug/pciehp_ctrl.c (inferred wording; lenient)",
        examples=("pcieport 0000:c0:01.1: pciehp: Slot(3): Link Down",),
        fields=_slot_fields,
    ),
    # memory / CPU
    Rule(
        id="edac.ue",
        kind="edac_ue",
        select=r"EDAC [^:]*MC[0-9]+: (?:[0-9]+ )?UE ",
        pattern=r"EDAC (?:\S+ )?MC(\d+): (?:(\d+) )?UE ",
        source="linux drivers/edac/edac_mc.c (src); LKML EINJ log (paste)",
        examples=(
            "EDAC MC3: 1 UE memory read error on CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (channel:0 slot:0"
            " page:0x7e025e offset:0x400 grain:32 -  err_code:0x00a0:0x0090)",
        ),
        fields=_edac_fields,
    ),
    Rule(
        id="edac.ce",
        kind="edac_ce",
        select=r"EDAC [^:]*MC[0-9]+: (?:[0-9]+ )?CE ",
        pattern=r"EDAC (?:\S+ )?MC(\d+): (?:(\d+) )?CE ",
        source="linux drivers/edac/edac_mc.c (src)",
        examples=(
            "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0"
            " page:0x12 offset:0x0 grain:32)",
        ),
        fields=_edac_fields,
    ),
    Rule(
        id="thermal.cpu_throttle",
        kind="thermal",
        select=r"temperature above threshold",
        pattern=r"CPU(\d+): (Core|Package) temperature above threshold",
        source="linux arch/x86 therm_throt.c (src); log_signatures 4.16",
        examples=(
            "CPU12: Core temperature above threshold, cpu clock throttled (total events = 1)",
        ),
        fields=_thermal_cpu_fields,
    ),
    Rule(
        id="mce.apei",
        kind="mce",
        select=r"\{[0-9]+\}\[Hardware Error\]",
        pattern=r"\{(\d+)\}\[Hardware Error\]: ?(.*)",
        source="linux drivers/firmware/efi/cper.c (src); LKML EINJ log (paste)",
        examples=(
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
        ),
        fields=_apei_fields,
        absorb=_absorb_apei,
        max_absorb=64,
    ),
    Rule(
        id="mce.hardware_error",
        kind="mce",
        select=r"\[Hardware Error\]|mce: Uncorrected hardware memory error",
        pattern=r"^(?:mce: )?\[Hardware Error\]: |mce: Uncorrected hardware memory error",
        source="linux arch/x86/kernel/cpu/mce/core.c (src); LKML EINJ log (paste)",
        examples=(
            "mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 6: b200000000000185",
            "mce: [Hardware Error]: Machine check events logged",
            "mce: Uncorrected hardware memory error in user-access at 7e025e400",
        ),
        fields=_mce_fields,
        absorb=_absorb_mce,
        max_absorb=32,
    ),
    Rule(
        id="memory.failure",
        kind="memory_failure",
        select=r"Memory failure: ",
        pattern=r"Memory failure: (\S+?):? (.*)",
        source="linux mm/memory-failure.c (src); LKML EINJ log (paste)",
        examples=(
            "Memory failure: 0x7e025e: Sending SIGBUS to python3:2231 due to hardware memory"
            " corruption",
            "Memory failure: 0x7740c0: recovery action for dirty page: Recovered",
        ),
        fields=_memory_failure_fields,
    ),
    # storage
    Rule(
        id="nvme.timeout",
        kind="nvme_timeout",
        select=r"nvme nvme[0-9]+: I/O .*timeout",
        pattern=r"nvme (nvme\d+): I/O .*timeout",
        source="linux drivers/nvme/host/pci.c (src); gpud disk matcher (paste)",
        examples=(
            "nvme nvme0: I/O 566 QID 3 timeout, aborting",
            "nvme nvme4: I/O tag 22 (2016) opcode 0x2 (Admin Cmd) QID 0 timeout, reset controller",
        ),
        fields=_nvme_timeout_fields,
    ),
    Rule(
        id="nvme.error",
        kind="nvme_error",
        select=(
            r"nvme nvme[0-9]+: (?:controller is down|Removing after probe failure|"
            r"Disabling device after reset failure|Device not ready)|no available path - failing"
            r" I/O"
        ),
        pattern=(
            r"nvme (nvme\d+): (?:controller is down|Removing after probe failure|"
            r"Disabling device after reset failure|Device not ready)"
            r"|block (nvme\d+n\d+): no available path - failing I/O"
        ),
        source="linux drivers/nvme/host/{pci,core}.c (src); gpud disk matcher (paste)",
        examples=(
            "nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff",
            "nvme nvme0: Removing after probe failure status: -19",
            "nvme nvme4: Disabling device after reset failure: -19",
            "block nvme0n1: no available path - failing I/O",
        ),
        fields=_nvme_error_fields,
    ),
    Rule(
        id="block.io_error",
        kind="io_error",
        select=(
            r"error, dev [^ ,]+, sector|Buffer I/O error on dev|Disk failure on .* detected,"
            r" failing array"
        ),
        pattern=(
            r"(?P<what>I/O|critical medium|critical target|critical nexus|critical space allocation"
            r"|timeout) error, dev (?P<dev>[^\s,]+), sector (?P<sector>\d+)"
            r"|Buffer I/O error on dev (?P<bdev>[^\s,]+), logical block (?P<block>\d+)"
            r"|md/raid\w*:(?P<md>\S+): Disk failure on (?P<disk>\S+) detected, failing array"
        ),
        source="linux block/blk-core.c blk_print_req_error (src); fs/buffer.c; gpud disk matcher",
        examples=(
            "blk_update_request: I/O error, dev nvme0n1, sector 123456 op 0x0:(READ) flags 0x0"
            " phys_seg 1 prio class 0",
            "I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2",
            "Buffer I/O error on dev dm-0, logical block 1308098575, lost async page write",
            "md/raid0:md0: Disk failure on nvme0n1p1 detected, failing array.",
        ),
        fields=_io_fields_any,
    ),
    Rule(
        id="fs.error",
        kind="fs_error",
        select=(
            r"EXT[34]-fs error|EXT[34]-fs \([^)]*\): I/O error|Remounting filesystem read-only"
            r"|XFS \([^)]*\): .*(?:error|[Cc]orruption|[Ss]hut(?:ting)? ?down)"
            r"|BTRFS (?:error|critical)"
        ),
        pattern=(
            r"EXT[34]-fs error|EXT[34]-fs \([^)]*\): I/O error|Remounting filesystem read-only"
            r"|XFS \([^)]*\): .*(?:\berror\b|[Cc]orruption|[Ss]hut(?:ting)? ?down)"
            r"|BTRFS (?:error|critical)"
        ),
        source="linux fs/ext4/super.c, fs/xfs (src); gpud disk matcher (paste)",
        examples=(
            "EXT4-fs error (device sda1): ext4_find_entry:1455: inode #2: comm ls: reading"
            " directory lblock 0",
            "EXT4-fs (md0): Remounting filesystem read-only",
            "XFS (dm-0): Log I/O Error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] "
            "(fs/xfs/xfs_log.c:1378).  Shutting down filesystem.",
            "EXT4-fs (dm-0): I/O error while writing superblock",
        ),
        fields=_fs_fields,
    ),
    Rule(
        id="nfs.not_responding",
        kind="nfs_timeout",
        select=r"nfs: server [^ ]+ not responding",
        pattern=r"nfs: server (\S+) not responding(?:, (still trying|timed out))?",
        source="linux fs/nfs (src); gpud nfs matcher",
        examples=(
            "nfs: server storage01 not responding, still trying",
            "nfs: server 10.1.0.5 not responding, timed out",
        ),
        fields=_nfs_fields,
    ),
    # hangs and crashes
    Rule(
        id="kernel.hung_task",
        kind="hung_task",
        select=r"blocked for more than [0-9]+ seconds",
        pattern=r"task (.+?):(\d+) blocked for more than (\d+) seconds",
        source="linux kernel/hung_task.c (src); gpud cpu matcher (paste)",
        examples=("INFO: task kcompactd1:1177 blocked for more than 120 seconds.",),
        fields=_hung_fields,
    ),
    Rule(
        id="kernel.lockup",
        kind="soft_lockup",
        select=r"soft lockup - CPU#|hard LOCKUP on cpu",
        pattern=(
            r"soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<sec>\d+)s!(?:"
            r" \[(?P<comm>.+?):(?P<pid>\d+)\])?"
            r"|hard LOCKUP on cpu (?P<hcpu>\d+)"
        ),
        source="linux kernel/watchdog.c (src); gpud cpu matcher (paste)",
        examples=(
            "watchdog: BUG: soft lockup - CPU#18 stuck for 27s! [python3:2254956]",
            "watchdog: Watchdog detected hard LOCKUP on cpu 5",
        ),
        fields=_lockup_fields,
    ),
    Rule(
        id="kernel.panic",
        kind="kernel_panic",
        select=r"Kernel [Pp]anic - not syncing",
        pattern=r"Kernel [Pp]anic - not syncing(?::? (.*))?",
        source="linux kernel/panic.c (src); gpud pstore testdata (paste)",
        examples=(
            "Kernel panic - not syncing: Fatal machine check",
            "Kernel panic - not syncing: Test panic triggered by crash_test module",
        ),
        fields=_panic_fields,
    ),
    Rule(
        id="kernel.bug",
        kind="kernel_panic",
        select=r"BUG: unable to handle|BUG: kernel NULL pointer dereference|kernel BUG at ",
        pattern=(
            r"BUG: unable to handle .*|BUG: kernel NULL pointer dereference.*|kernel BUG at \S+"
        ),
        source="linux arch/x86/mm/fault.c, include/asm-generic/bug.h (src); gpud pstore (paste)",
        examples=(
            "BUG: unable to handle kernel NULL pointer dereference at           (null)",
            "BUG: kernel NULL pointer dereference, address: 0000000000000000",
            "kernel BUG at mm/slub.c:3880!",
        ),
        fields=_bug_fields,
    ),
    Rule(
        id="kernel.oops",
        kind="kernel_panic",
        select=r"Oops: |general protection fault",
        pattern=r"^Oops: .*|^general protection fault.*\[#\d+\].*",
        source="linux arch/x86/kernel/dumpstack.c die() (src); gpud pstore (paste)",
        examples=(
            "Oops: 0002 [#1] SMP",
            "general protection fault, probably for non-canonical address 0xdead000000000100:"
            " 0000 [#1] SMP NOPTI",
        ),
        fields=_oops_fields,
    ),
    Rule(
        id="mm.oom_summary",
        kind="oom_kill",
        select=r"oom-kill:constraint=",
        pattern=r"oom-kill:constraint=([^,]*)",
        source="linux mm/oom_kill.c dump_oom_summary (src); gpud memory matcher (paste)",
        examples=(
            "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x.scope,mems_allowed=0-1,"
            "oom_memcg=/a,task_memcg=/a/b,task=node,pid=863987,uid=0",
        ),
        fields=_oom_summary_fields,
        absorb=_absorb_oom_kill,
        max_absorb=1,
    ),
    Rule(
        id="mm.oom_kill",
        kind="oom_kill",
        select=r"out of memory: Kill|Out of memory: Kill",
        pattern=_KILLED_RE.pattern,
        source="linux mm/oom_kill.c __oom_kill_process (src); gpud memory matcher (paste)",
        examples=(
            "Out of memory: Killed process 2231 (python3) total-vm:123456kB, anon-rss:1234kB,"
            " file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:100kB oom_score_adj:0",
            "Out of memory: Kill process 456 (python) score 50 or sacrifice child",
            "Memory cgroup out of memory: Killed process 2231 (python3) total-vm:1kB",
        ),
        fields=_oom_kill_fields,
    ),
    Rule(
        id="user.segfault",
        kind="segfault",
        select=r"\]: segfault at ",
        pattern=(
            r"(?P<comm>\S+)\[(?P<pid>\d+)\]: segfault at (?P<addr>\S+) ip \S+ sp \S+ "
            r"error (?P<err>\S+)(?: in (?P<lib>[^\[\s]+))?"
        ),
        source="linux arch/x86/mm/fault.c show_signal_msg (src); gpud nccl testdata (paste)",
        examples=(
            "pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp"
            " 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]",
        ),
        fields=_segfault_fields,
    ),
    Rule(
        id="nvidia.peermem",
        kind="peermem_error",
        select=r"nvidia-peermem .*ERROR",
        pattern=r"nvidia-peermem .*ERROR",
        source="gpud peermem testdata kmsg.2.peermem.log (paste)",
        examples=(
            "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping"
            " further processing",
        ),
    ),
    Rule(
        id="boot.linux_version",
        kind="boot",
        select=r"Linux version ",
        pattern=r"^Linux version (\S+)",
        source="linux init/main.c linux_banner (src); loghub Linux_2k.log (paste)",
        examples=(
            "Linux version 5.15.0-112-generic (buildd@lcy02-amd64-051) (gcc 11.4.0) #122-Ubuntu"
            " SMP Thu May 23 07:48:21 UTC 2024",
        ),
        fields=_version_fields,
    ),
    Rule(
        id="boot.command_line",
        kind="boot",
        select=r"[Cc]ommand line: ",
        pattern=r"^(?:Kernel )?[Cc]ommand line: (.*)",
        source="linux arch/x86/kernel/setup.c, init/main.c (src); loghub Linux_2k.log (paste)",
        examples=(
            "Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-112-generic root=UUID=1234 ro",
            "Kernel command line: ro root=LABEL=/ rhgb quiet",
        ),
        fields=_cmdline_fields,
    ),
    Rule(
        id="boot.reboot",
        kind="reboot",
        select=r"reboot: (?:Restarting system|Power down|System halted)",
        pattern=r"^reboot: (Restarting system|Power down|System halted)",
        source="linux kernel/reboot.c (src)",
        examples=("reboot: Restarting system", "reboot: Power down"),
        fields=_reboot_fields,
    ),
)


RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
if len(RULES_BY_ID) != len(RULES):  # pragma: no cover - caught at import
    raise ValueError("duplicate kernel rule id")

#: The one vectorized pre-filter: a line can give an event only if it matches this.
SELECT_PATTERN: str = "|".join(f"(?:{r.select})" for r in RULES)


#: Literal needles, one per select alternative: a line the SELECT_PATTERN matches
#: contains at least one of them (the cheap pre-check of small files).
SELECT_NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(nd for r in RULES for nd in r.needles))


def classify(message: str, program: str | None = None) -> MessageMatch | None:
    """The first rule matching ``message`` (text after the line prefix), or None.

    ``program`` is the syslog tag (``kernel``, ``systemd-networkd``...); None means
    kernel text without a tag (dmesg, kmsg). Non-kernel programs are read only by the
    rules that name them.
    """
    for rule in RULES:
        if not rule.applies_to(program) or not any(nd in message for nd in rule.needles):
            continue
        m = rule.regex.search(message)
        if m is None:
            continue
        mm = MessageMatch(rule.id, rule.kind)
        if rule.fields is not None:
            rule.fields(m, mm)
        return mm
    return None


def absorbs(mm: MessageMatch, next_message: str) -> bool:
    """Whether the next line's message continues the event ``mm`` (updating it)."""
    rule = RULES_BY_ID[mm.rule_id]
    return rule.absorb is not None and rule.absorb(mm, next_message)
