"""Rules for what is certain: which event is evidence of which component, and how sure.

Each rule is data with an id: the event kind it applies to, an optional condition on
its message, the component and signal family it names, and a tier (1 = most specific).
The root cause of an interruption is the earliest event of the lowest tier found in
its window (``classifiers.interruptions``). Xid rules come from the versioned catalog
(``schemas/taxonomy/xid_catalog.csv``), with the few refinements NVIDIA's catalog
itself describes (the text of Xid 48 and the unit counts of Xid 140 separate DRAM/HBM
from SRAM; 171/172 say which one a 48 was; 45/154 only follow another Xid).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from faultline.schemas.taxonomy import load_taxonomy

# tiers: how specific a signal is about the component it names. A node that stops
# answering the scheduler outranks NCCL transport errors: peers see any dead host
# as a vanished peer, so those errors are symptoms of whatever killed it.
HARDWARE, HOST, SOFTWARE, TEXT, SCHEDULER, TRANSPORT, WATCHDOG = 1, 2, 3, 4, 5, 6, 7


@dataclass(frozen=True)
class Rule:
    rule_id: str
    kind: str
    component: str
    family: str
    tier: int
    confidence: float
    pattern: re.Pattern[str] | None = None  # on the message

    def matches(self, message: str) -> bool:
        return self.pattern is None or bool(self.pattern.search(message))


def _r(rule_id: str, kind: str, component: str, family: str, tier: int,
       confidence: float, pattern: str | None = None) -> Rule:
    return Rule(rule_id, kind, component, family, tier, confidence,
                re.compile(pattern, re.I) if pattern else None)


# Non-Xid signatures, from the emitting software's documented messages
# (../shared/reference/log_signatures.md, section 4, and the sources it cites).
RULES: tuple[Rule, ...] = (
    _r("gpu.fallen_off_bus", "gpu_fallen_off_bus", "Faulty GPU", "fallen off bus",
       HARDWARE, 0.95),
    _r("gpu.lost", "gpu_lost", "Faulty GPU", "GPU lost", HARDWARE, 0.9),
    _r("gpu.gsp_timeout", "gsp_timeout", "GPU System Processor", "GSP", HARDWARE, 0.9),
    # nvidia-smi -q counters (NVIDIA's memory error management guide): the board itself
    # says its memory failed; a pending remap alone is recoverable by a reset
    _r("gpu.row_remap_failure", "gpu_row_remap_failure", "GPU HBM3 Memory", "row remap",
       HARDWARE, 0.9),
    _r("gpu.ecc_sram", "gpu_ecc_uncorrectable", "GPU SRAM Memory", "SRAM ECC", HARDWARE,
       0.85, r"uncorrectable SRAM"),
    _r("gpu.ecc_dram", "gpu_ecc_uncorrectable", "GPU HBM3 Memory", "DRAM ECC", HARDWARE,
       0.85, r"DRAM"),
    _r("gpu.row_remap_pending", "gpu_row_remap_pending", "GPU HBM3 Memory", "row remap",
       HOST, 0.7),
    _r("gpu.retired_pages", "gpu_retired_pages", "GPU HBM3 Memory", "retired pages", HOST,
       0.7),
    _r("gpu.sxid_fatal", "sxid", "Faulty GPU", "NVSwitch", HARDWARE, 0.8, r"Fatal"),
    _r("net.module", "ib_module", "Network Switch/Cable", "IB module", HARDWARE, 0.9,
       r"error|unplugged|shorted|temperature"),
    _r("net.link_down", "ib_link_down", "Network Switch/Cable", "IB link", HARDWARE, 0.85),
    _r("nic.health", "nic_health", "NIC", "NIC health", HARDWARE, 0.95),
    _r("nic.cmd_timeout", "nic_cmd_timeout", "NIC", "NIC firmware", HARDWARE, 0.9),
    _r("nic.pcie_power", "pcie_power", "Power Supply", "PCIe slot power", HOST, 0.6),
    _r("nic.async_fatal", "nccl_async_error", "NIC", "NIC health", HARDWARE, 0.85,
       r"catastrophic"),
    _r("net.async_port", "nccl_async_error", "Network Switch/Cable", "IB link", TRANSPORT,
       0.6, r"port error"),
    _r("pcie.aer_bridge_fatal", "pcie_aer", "IO Expansion Board", "PCIe switch",
       HARDWARE, 0.85, r"pcieport.*(?:Uncorrect|Fatal)"),
    _r("pcie.dpc", "pcie_dpc", "IO Expansion Board", "PCIe switch", HARDWARE, 0.8),
    _r("pcie.link_down", "pcie_link_down", "IO Expansion Board", "PCIe switch", HARDWARE,
       0.7),
    _r("mem.edac_ue", "edac_ue", "System Memory", "host ECC", HOST, 0.95),
    _r("mem.failure", "memory_failure", "System Memory", "host ECC", HOST, 0.85),
    _r("cpu.mce_memory", "mce", "System Memory", "host ECC", HOST, 0.85,
       r"memory error|memory read error|MC\d+_STATUS.*(?:DRAM|memory)"),
    _r("cpu.mce", "mce", "CPU", "machine check", HOST, 0.9),
    _r("ssd.nvme_timeout", "nvme_timeout", "SSD", "NVMe", HOST, 0.9),
    _r("ssd.nvme_error", "nvme_error", "SSD", "NVMe", HOST, 0.9),
    _r("ssd.io_error", "io_error", "SSD", "block I/O", HOST, 0.7, r"nvme|sd[a-z]"),
    _r("ssd.fs_error", "fs_error", "SSD", "filesystem", HOST, 0.6),
    _r("dep.nfs", "nfs_timeout", "Dependency", "NFS", SOFTWARE, 0.7),
    _r("bmc.power", "sel_power", "Power Supply", "PSU", HOST, 0.9),
    _r("bmc.fan", "sel_fan", "Server Chassis", "fan", HOST, 0.85),
    _r("bmc.chassis", "sel_chassis", "Server Chassis", "baseboard", HOST, 0.8),
    _r("bmc.gpu_thermal", "sel_thermal", "GPU Thermal Interface + Sensor", "GPU thermal",
       HOST, 0.85, r"GPU"),
    _r("bmc.memory", "sel_memory", "System Memory", "host ECC", HOST, 0.85,
       r"Uncorrectable"),
    _r("bmc.cpu", "sel_processor", "CPU", "machine check", HOST, 0.8,
       r"IERR|Machine Check|Thermal Trip|Configuration Error"),
    _r("host.soft_lockup", "soft_lockup", "Host Maintenance", "kernel hang", SOFTWARE, 0.8),
    _r("host.hung_task", "hung_task", "Host Maintenance", "kernel hang", SOFTWARE, 0.7),
    _r("host.panic", "kernel_panic", "Host Maintenance", "kernel panic", SOFTWARE, 0.75),
    _r("sdc.nonfinite", "nonfinite_loss", "Silent Data Corruption", "non-finite loss",
       HOST, 0.7, r"node|device|rank"),
    # a shape or size mismatch is a software bug, not corrupted data: only checksums
    # or replicas that disagree point at silent corruption
    _r("sdc.checksum", "checksum_mismatch", "Silent Data Corruption", "replica mismatch",
       HOST, 0.8, r"checksum|replica|parameter hash|differs from"),
    _r("sw.segfault", "segfault", "Software Bug", "segfault", SOFTWARE, 0.85),
    _r("sw.cuda_oom", "cuda_error", "Software Bug", "CUDA OOM", SOFTWARE, 0.8,
       r"out of memory"),
    _r("sw.cuda_illegal", "cuda_error", "Software Bug", "CUDA error", SOFTWARE, 0.6,
       r"illegal memory access|illegal instruction|misaligned"),
    _r("sw.oom_kill", "oom_kill", "Software Bug", "host OOM", SOFTWARE, 0.7),
    _r("sw.nccl_internal", "nccl_error", "Software Bug", "NCCL error", SOFTWARE, 0.6,
       r"ncclInternalError|ncclInvalidUsage|invalid usage"),
    _r("net.peer_error", "nccl_ib_error", "Network Switch/Cable", "IB transport",
       TRANSPORT, 0.5),
    _r("sched.not_responding", "node_not_responding", "Host Maintenance", "node down",
       SCHEDULER, 0.55),
    _r("nccl.watchdog", "nccl_watchdog", "NCCL Watchdog Timeouts", "NCCL watchdog",
       WATCHDOG, 0.5),
    # kernel families added with the rules-as-data files (pipeline/parsers/rules/).
    # nfs_recovered has no rule on purpose: a recovery ends an outage, it causes none.
    _r("gpu.nvlink", "nvlink_error", "Faulty GPU", "NVLink", HARDWARE, 0.7),
    # ACCESS_REG failures flood dmesg on restricted PFs of healthy DGX/GB200 hosts
    # (gpud infiniband kmsg_matcher.go): they name no component
    _r("nic.cmd_failed", "nic_cmd_failed", "NIC", "NIC firmware", SOFTWARE, 0.5,
       r"^(?!.*ACCESS_REG)"),
    _r("dep.nfs_state", "nfs_error", "Dependency", "NFS", SOFTWARE, 0.7),
    # the driver resets the queue and goes on: evidence only when nothing says more
    _r("nic.tx_timeout", "nic_tx_timeout", "NIC", "NIC TX timeout", TRANSPORT, 0.5),
    _r("host.os_limit", "os_limit", "Host Maintenance", "OS limit", SOFTWARE, 0.6),
    _r("host.disk_full", "disk_full", "Host Maintenance", "disk full", SOFTWARE, 0.5),
)

# Xid families whose component the message text refines (NVIDIA catalog WORKFLOW_XID_48).
_SRAM_UNITS = re.compile(r"LTC|L2|SRAM|GSP|RISCV|SM\b|L1|MMU|PCIE|register", re.I)


def xid_rule(xid: int, message: str, attrs: dict) -> Rule | None:
    """The rule an Xid line falls under, or None for follow-ons, informational and
    unused codes (they are corroboration at most)."""
    entry = load_taxonomy().xids.get(xid)
    if entry is None or entry.role not in ("root", "app"):
        return None
    component = entry.component
    rid = f"xid.{xid}"
    if xid == 48:
        unit = str(attrs.get("unit") or "")
        in_fb = "framebuffer" in message.lower()
        if not in_fb and ((unit and unit != "framebuffer") or _SRAM_UNITS.search(message)):
            component, rid = "GPU SRAM Memory", "xid.48.sram"
    elif xid == 140:
        dram = int(attrs.get("dram") or 0)
        if not dram and (int(attrs.get("ltc") or 0) or int(attrs.get("mmu") or 0)):
            component, rid = "GPU SRAM Memory", "xid.140.sram"
    elif xid == 95 and re.search(r"\bLTC\b|SRAM", message):
        component, rid = "GPU SRAM Memory", "xid.95.sram"
    tier = SOFTWARE if entry.role == "app" else HARDWARE
    confidence = {"high": 0.95, "medium": 0.85, "low": 0.6}[entry.confidence]
    return Rule(rid, "xid", component, entry.signal_family or "Xid", tier, confidence)


_BY_KIND: dict[str, list[Rule]] = {}
for _rule in RULES:
    _BY_KIND.setdefault(_rule.kind, []).append(_rule)


def rule_for(kind: str, message: str, xid: int | None, attrs_json: str | None
             ) -> Rule | None:
    """The most specific rule an event falls under, or None if it names no component."""
    if kind == "xid" and xid is not None:
        return xid_rule(xid, message, json.loads(attrs_json) if attrs_json else {})
    for rule in _BY_KIND.get(kind, ()):
        if rule.matches(message):
            return rule
    return None


def detail_xid(xid: int, attrs_json: str | None) -> str | None:
    """Follow-on Xids that settle a 48's memory type: 171 (DRAM) or 172 (SRAM)."""
    del attrs_json
    return {171: "GPU HBM3 Memory", 172: "GPU SRAM Memory"}.get(xid)
