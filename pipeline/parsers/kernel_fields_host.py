"""Field extractors of the kernel rules: memory, CPU, storage, hangs and crashes.

See :mod:`kernel_fields` (the GPU, network and PCIe half, and :class:`MessageMatch`).
"""

from __future__ import annotations

import re

from faultline.pipeline.parsers.kernel_fields import Absorb, Fields, MessageMatch, _int

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




#: Field extractors a rule names with ``fields = "<name>"`` (see kernel_fields.FIELDS).
FIELDS: dict[str, Fields] = {
    "edac": _edac_fields,
    "thermal_cpu": _thermal_cpu_fields,
    "apei": _apei_fields,
    "mce": _mce_fields,
    "memory_failure": _memory_failure_fields,
    "nvme_error": _nvme_error_fields,
    "nvme_timeout": _nvme_timeout_fields,
    "fs": _fs_fields,
    "nfs": _nfs_fields,
    "hung": _hung_fields,
    "lockup": _lockup_fields,
    "panic": _panic_fields,
    "bug": _bug_fields,
    "oops": _oops_fields,
    "oom_kill": _oom_kill_fields,
    "oom_summary": _oom_summary_fields,
    "segfault": _segfault_fields,
    "version": _version_fields,
    "cmdline": _cmdline_fields,
    "reboot": _reboot_fields,
    "io_any": _io_fields_any,
}

#: Continuation deciders a rule names with ``absorb = "<name>"``.
ABSORB: dict[str, Absorb] = {
    "apei": _absorb_apei,
    "mce": _absorb_mce,
    "oom_kill": _absorb_oom_kill,
}
