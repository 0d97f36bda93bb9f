"""What each root cause writes into the logs: several signatures per component.

Message texts follow what the emitting software prints (NVIDIA driver Xid lines,
mlx5_core, PCIe AER, EDAC, MCE, NVMe, ipmitool SEL, Slurm, NCCL, PyTorch), as collected
with their sources in ``../shared/reference/log_signatures.md`` and NVIDIA's Xid catalog;
the simulator's job is to place them plausibly in time and across hosts, not to invent
wordings. Each variant also decides how the attempt ends (``END_MODES``), which drives
the cascade the job logs show on every rank.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from faultline.simulate import freetext
from faultline.simulate.cluster import SWITCH_BRIDGES, Cluster, Host
from faultline.simulate.model import COLLECTIVE_TIMEOUT_S, Attempt, Incident, Line


@dataclass
class Ctx:
    inc: Incident
    attempt: Attempt
    cluster: Cluster
    rng: random.Random

    # --- choosing the culprit ---
    def pick_host(self) -> Host:
        host = self.cluster.host(self.rng.choice(self.attempt.hosts))
        self.inc.culprit_host = host.name
        return host

    def pick_gpu(self, host: Host) -> int:
        g = self.rng.randrange(8)
        self.inc.culprit_gpu = g
        self.inc.culprit_rank = self.attempt.hosts.index(host.name) * 8 + g
        return g

    # --- emitting lines ---
    def add(self, dt: float, source: str, text: str, host: str | None = None,
            role: str = "symptom", kind: str = "", xid: int | None = None,
            tag: str = "kernel") -> None:
        self.inc.lines.append(Line(self.inc.t_fault + dt, source, text, host, tag, role,
                                   kind, xid))

    def xid(self, dt: float, host: Host, gpu: int, code: int, body: str,
            role: str = "root", pid: str | None = None) -> None:
        pid_part = (f"pid={pid}, name=python3, " if pid else
                    self.rng.choice(["pid='<unknown>', name=<unknown>, ",
                                     "pid=<unknown>, name=<unknown>, "]))
        self.add(dt, "kernel",
                 f"NVRM: Xid ({host.gpus[gpu].xid_pci}): {code}, {pid_part}{body}",
                 host.name, role, "xid", code)

    def xid154(self, dt: float, host: Host, gpu: int, action: str) -> None:
        self.xid(dt, host, gpu, 154, f"GPU recovery action changed from 0x0 (None) to "
                 f"{action}", role="corroborating")

    def ended(self, mode: str, t_fail_after: float) -> None:
        self.inc.end_mode = mode
        self.inc.t_fail = self.inc.t_fault + t_fail_after

    def end_watchdog(self) -> None:
        self.ended("watchdog", COLLECTIVE_TIMEOUT_S + self.rng.uniform(2, 30)
                   + self.rng.uniform(5, 40))

    def end_node_fail(self) -> None:
        self.ended("node_fail", self.rng.uniform(90, 300))

    def end_crash(self) -> None:
        self.ended("crash", self.rng.uniform(5, 60))


def _pid(rng: random.Random) -> str:
    return str(rng.randrange(2000, 4_000_000))


# --- GPU -----------------------------------------------------------------------------

def faulty_gpu(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    v = c.rng.choice(["xid79", "xid79", "nvrm_off_bus", "xid74", "xid62", "xid46",
                      "xid109"])
    c.inc.variant = v
    if v == "xid79":
        c.xid(0, h, g, 79, "GPU has fallen off the bus.")
        if c.rng.random() < 0.5:
            c.xid(0.02, h, g, 154, "GPU recovery action changed from 0x0 (None) to 0x2 "
                  "(Node Reboot Required)", role="corroborating")
        if c.rng.random() < 0.4:  # GSP cannot answer once the GPU is gone
            c.xid(6.1, h, g, 119, f"Timeout after 6s of waiting for RPC response from "
                  f"GPU{g} GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
                  role="symptom")
    elif v == "nvrm_off_bus":
        c.add(0, "kernel", f"NVRM: GPU {h.gpus[g].pci}: GPU has fallen off the bus.",
              h.name, "root", "gpu_fallen_off_bus")
        c.add(0.01, "kernel", f"NVRM: GPU at {h.gpus[g].xid_pci}: {h.gpus[g].uuid}",
              h.name, "corroborating", "gpu_serial")
        c.add(0.01, "kernel", f"NVRM: GPU Board Serial Number: {h.gpus[g].serial}",
              h.name, "corroborating", "gpu_serial")
    elif v == "xid74":
        link = c.rng.randrange(18)
        c.xid(0, h, g, 74, f"NVLink: fatal error detected on link {link}(0x10000, 0x0, "
              "0x0, 0x0, 0x0, 0x0, 0x0)")
        peer = (g + 1) % 8  # the healthy end of the link may log it too, later
        if c.rng.random() < 0.5:
            c.xid(0.4, h, peer, 74, f"NVLink: fatal error detected on link "
                  f"{(link + 3) % 18}(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
                  role="symptom")
        c.xid154(0.05, h, g, "0x1 (GPU Reset Required)")
    elif v == "xid62":
        c.xid(0, h, g, 62, "0000(0000) 00000000 00000000")
        c.xid(0.3, h, g, 45, "Ch 00000008", role="symptom", pid=_pid(c.rng))
    elif v == "xid46":
        c.xid(0, h, g, 46, "GPU stopped processing")
    else:
        c.xid(0, h, g, 109, "Ch 00000010, errorString CTX SWITCH TIMEOUT, Info "
              "0x3c009")
    c.end_watchdog() if v != "xid79" or c.rng.random() < 0.6 else c.end_crash()
    if v in ("xid79", "nvrm_off_bus", "xid74", "xid62", "xid46", "xid109") \
            and c.inc.end_mode == "crash":
        _cuda_error(c, h, g, "CUDA error: unspecified launch failure")


def hbm3(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    v = c.rng.choice(["dbe_fb", "dbe_fb_171", "remap_fail", "contained_dram",
                      "ecc_escape_dram"])
    c.inc.variant = v
    addr = f"0x{c.rng.randrange(16**8):08x}"
    if v in ("dbe_fb", "dbe_fb_171", "contained_dram"):
        c.xid(0, h, g, 48, "An uncorrectable double bit error (DBE) has been detected on "
              f"GPU in the framebuffer at physAddr {addr} partition "
              f"{c.rng.randrange(24)}, subpartition {c.rng.randrange(4)}.")
        if v == "dbe_fb_171":
            c.xid(0.001, h, g, 171, "Uncorrectable DRAM error", role="corroborating")
        c.xid(0.02, h, g, 63, f"Row Remapper: New row (0x00000000{addr[2:]}) marked for "
              "remapping, reset gpu to activate.", role="corroborating")
        code, body = ((94, "Contained: SM (0x1). RST: No, D-RST: No")
                      if v != "dbe_fb" or c.rng.random() < 0.5 else
                      (95, "Uncontained: FBHUB. RST: Yes, D-RST: No"))
        c.xid(0.03, h, g, code, body, role="corroborating")
    elif v == "remap_fail":
        c.xid(0, h, g, 64, f"Row Remapper Error: (0x00000000{addr[2:]}) - All reserved "
              "rows for bank are remapped")
        c.xid154(0.01, h, g, "0x1 (GPU Reset Required)")
    else:
        c.xid(0, h, g, 140, "An uncorrectable ECC error detected (possible firmware "
              "handling failure) DRAM:1, LTC:0, MMU:0, PCIE:0")
    _cuda_error(c, h, g, "CUDA error: uncorrectable ECC error encountered")
    c.end_crash() if c.rng.random() < 0.5 else c.end_watchdog()


def sram(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    v = c.rng.choice(["dbe_gsp_172", "ecc_escape_ltc", "uncontained_ltc"])
    c.inc.variant = v
    if v == "dbe_gsp_172":
        c.xid(0, h, g, 48, "An uncorrectable ECC error has been detected on GPU in "
              "GSP-RISCV")
        c.xid(0.001, h, g, 172, "GSP-RISCV, Uncorrectable SRAM error",
              role="corroborating")
    elif v == "ecc_escape_ltc":
        c.xid(0, h, g, 140, "An uncorrectable ECC error detected (possible firmware "
              "handling failure) DRAM:0, LTC:1, MMU:0, PCIE:0")
    else:
        c.xid(0, h, g, 95, "Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No")
    c.xid154(0.02, h, g, "0x1 (GPU Reset Required)")
    _cuda_error(c, h, g, "CUDA error: uncorrectable ECC error encountered")
    c.end_crash() if c.rng.random() < 0.5 else c.end_watchdog()


def gsp(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    v = c.rng.choice(["rpc_timeout", "rpc_timeout", "gsp_error"])
    c.inc.variant = v
    if v == "rpc_timeout":
        fn = c.rng.choice(["76 (GSP_RM_CONTROL) (0x20803032 0x58c)",
                           "103 (GSP_RM_ALLOC) (0x2081 0x4)"])
        c.xid(0, h, g, 119, f"Timeout after 6s of waiting for RPC response from GPU{g} "
              f"GSP! Expected function {fn}.", pid=_pid(c.rng))
    else:
        c.xid(0, h, g, 120, "GSP task exception: load access fault", pid=_pid(c.rng))
    c.xid154(0.5, h, g, "0x1 (GPU Reset Required)")
    c.end_watchdog()


def thermal(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    c.inc.variant = c.rng.choice(["sel_gpu_temp", "sel_gpu_temp_straggler"])
    c.add(-c.rng.uniform(60, 600), "sel", f"Temperature GPU{g}_Temp | Upper Critical "
          f"going high | Asserted | Reading {c.rng.randrange(92, 99)} > Threshold 90 "
          "degrees C", h.name, "root", "sel_thermal")
    c.inc.straggler_rank = c.inc.culprit_rank
    c.end_watchdog()


def sdc(c: Ctx) -> None:
    h = c.pick_host()
    g = c.pick_gpu(h)
    r = c.inc.culprit_rank
    c.inc.variant = c.rng.choice(["nan_grad_norm", "replica_checksum"])
    if c.inc.variant == "nan_grad_norm":
        text = (f"AssertionError: Rank {r}: found NaN in local grad norm in backward pass "
                f"before data-parallel communication collective. Device: {g}, node: "
                f"{h.name}")
        c.add(0, "trainer", f"ERROR {text}", None, "root", "nonfinite_loss")
    else:
        c.add(0, "trainer", f"ERROR parameter checksum mismatch between data-parallel "
              f"replicas: rank {r} (node {h.name}, device {g}) differs from its replicas",
              None, "root", "checksum_mismatch")
    c.end_crash()


# --- network and host devices ----------------------------------------------------------

def _peer_errors(c: Ctx, culprit: Host, n: int = 4) -> None:
    others = [x for x in c.attempt.hosts if x != culprit.name]
    c.inc.peer_error_hosts = tuple(c.rng.sample(others, min(n, len(others))))


def network(c: Ctx) -> None:
    v = c.rng.choice(["cable_module", "link_down", "link_down", "leaf_switch"])
    c.inc.variant = v
    nic_i = c.rng.randrange(8)
    if v == "leaf_switch":
        # A leaf switch fails: every host below it loses the same port at once.
        leaf = c.cluster.host(c.rng.choice(c.attempt.hosts)).leaf
        below = [x for x in c.attempt.hosts if c.cluster.host(x).leaf == leaf]
        for i, name in enumerate(below):
            h = c.cluster.host(name)
            _dev, pci, ifn = h.nic(nic_i)
            c.add(0.001 * i, "kernel", f"mlx5_core {pci} {ifn}: Link down", name,
                  "root" if i == 0 else "corroborating", "ib_link_down")
        c.inc.extra_hosts = tuple(below[1:])
        c.inc.culprit_host = None
        others = [x for x in c.attempt.hosts if x not in below]
        c.inc.peer_error_hosts = tuple(c.rng.sample(others, min(4, len(others))))
        c.end_watchdog()
        return
    h = c.pick_host()
    _dev, pci, ifn = h.nic(nic_i)
    if v == "cable_module":
        c.add(0, "kernel", f"mlx5_core {pci}: mlx5_port_module_event:1136:(pid 0): Port "
              f"module event[error]: module {nic_i}, Cable error, Bad or shorted "
              "cable/module", h.name, "root", "ib_module")
        c.add(0.3, "kernel", f"mlx5_core {pci} {ifn}: Link down", h.name,
              "corroborating", "ib_link_down")
    else:
        if h.shape == "dmesg_t" or c.rng.random() < 0.5:
            c.add(0, "kernel", f"mlx5_core {pci} {ifn}: Link down", h.name, "root",
                  "ib_link_down")
        else:
            c.add(0, "kernel", f"{ifn}: lost carrier", h.name, "root", "ib_link_down",
                  tag=f"systemd-networkd[{c.rng.randrange(500, 9000)}]")
    _peer_errors(c, h)
    c.end_watchdog()


def nic(c: Ctx) -> None:
    h = c.pick_host()
    nic_i = c.rng.randrange(8)
    _dev, pci, _ifn = h.nic(nic_i)
    v = c.rng.choice(["health_compromised", "fw_fatal", "cmd_timeout"])
    c.inc.variant = v
    if v == "health_compromised":
        c.add(0, "kernel", f"mlx5_core {pci}: poll_health:825:(pid 0): device's health "
              "compromised - reached miss count", h.name, "root", "nic_health")
        c.add(0.5, "job", "NCCL WARN NET/IB : Got async event : local catastrophic error",
              h.name, "corroborating", "nccl_async_error")
    elif v == "fw_fatal":
        c.add(0, "kernel", f"mlx5_core {pci}: Fatal error 1 detected", h.name, "root",
              "nic_health")
    else:
        c.add(0, "kernel", f"mlx5_core {pci}: wait_func:1204:(pid {_pid(c.rng)}): "
              "ENABLE_HCA(0x104) timeout. Will cause a leak of a command resource",
              h.name, "root", "nic_cmd_timeout")
    _peer_errors(c, h)
    c.end_watchdog()


def ssd(c: Ctx) -> None:
    h = c.pick_host()
    n = c.rng.randrange(2)
    c.inc.variant = c.rng.choice(["nvme_timeout", "nvme_down"])
    if c.inc.variant == "nvme_timeout":
        c.add(0, "kernel", f"nvme nvme{n}: I/O {c.rng.randrange(1024)} QID "
              f"{c.rng.randrange(1, 64)} timeout, aborting", h.name, "root", "nvme_timeout")
        c.add(30, "kernel", f"nvme nvme{n}: I/O {c.rng.randrange(1024)} QID 0 timeout, "
              "reset controller", h.name, "corroborating", "nvme_timeout")
    else:
        c.add(0, "kernel", f"nvme nvme{n}: controller is down; will reset: "
              "CSTS=0xffffffff, PCI_STATUS=0xffff", h.name, "root", "nvme_error")
        c.add(0.2, "kernel", f"nvme nvme{n}: Removing after probe failure status: -19",
              h.name, "corroborating", "nvme_error")
    c.add(31, "kernel", f"EXT4-fs (nvme{n}n1): Remounting filesystem read-only", h.name,
          "corroborating", "fs_error")
    c.end_crash()


def power(c: Ctx) -> None:
    h = c.pick_host()
    psu = c.rng.randrange(1, 3)
    c.inc.variant = c.rng.choice(["psu_failure", "ac_lost"])
    if c.inc.variant == "psu_failure":
        c.add(0, "sel", f"Power Supply PSU{psu}_Status | Failure detected () | Asserted",
              h.name, "root", "sel_power")
    else:
        c.add(0, "sel", f"Power Supply PSU{psu} AC Lost | Power Supply AC lost | Asserted",
              h.name, "root", "sel_power")
    c.add(1, "sel", "Power Unit Redundancy | Redundancy Lost | Asserted", h.name,
          "corroborating", "sel_power")
    _host_dies(c, h)


def chassis(c: Ctx) -> None:
    h = c.pick_host()
    c.inc.variant = c.rng.choice(["fan", "voltage"])
    if c.inc.variant == "fan":
        f = c.rng.randrange(1, 9)
        c.add(0, "sel", f"Fan FAN{f}_Tach | Lower Critical going low | Asserted | "
              "Reading 0 < Threshold 1000 RPM", h.name, "root", "sel_fan")
    else:
        c.add(0, "sel", "Voltage P12V_BB | Lower Critical going low | Asserted | "
              "Reading 10.2 < Threshold 10.8 Volts", h.name, "root", "sel_chassis")
    _host_dies(c, h)


def io_board(c: Ctx) -> None:
    h = c.pick_host()
    gs = sorted(c.rng.sample(range(8), 2))
    c.inc.variant = "pcie_switch_aer"
    bridge = f"0000:{SWITCH_BRIDGES[gs[0]]}:00.0"
    c.add(0, "kernel", f"pcieport {bridge}: AER: Uncorrected (Fatal) error received: "
          f"{bridge}", h.name, "root", "pcie_aer")
    c.add(0.001, "kernel", f"pcieport {bridge}: PCIe Bus Error: severity=Uncorrected "
          "(Fatal), type=Transaction Layer, (Receiver ID)", h.name, "corroborating",
          "pcie_aer")
    for i, g in enumerate(gs):
        c.xid(0.2 + 0.001 * i, h, g, 79, "GPU has fallen off the bus.",
              role="corroborating")
    c.add(0.21, "kernel", "nvme nvme0: controller is down; will reset: CSTS=0xffffffff, "
          "PCI_STATUS=0xffff", h.name, "corroborating", "nvme_error")
    c.inc.culprit_gpu = None
    c.end_watchdog()


def cpu(c: Ctx) -> None:
    h = c.pick_host()
    core, bank = c.rng.randrange(96), c.rng.randrange(4)
    c.inc.variant = "mce_panic"
    c.add(0, "kernel", f"mce: [Hardware Error]: CPU {core}: Machine Check Exception: 5 "
          f"Bank {bank}: b200000000000185", h.name, "root", "mce")
    c.add(0.001, "kernel", "mce: [Hardware Error]: Machine check: Processor context "
          "corrupt", h.name, "corroborating", "mce")
    c.add(0.002, "kernel", "Kernel panic - not syncing: Fatal machine check", h.name,
          "corroborating", "kernel_panic")
    _host_dies(c, h, dt=0.003)


def system_memory(c: Ctx) -> None:
    h = c.pick_host()
    mc, ch = c.rng.randrange(4), c.rng.randrange(8)
    c.inc.variant = c.rng.choice(["edac_ue_sigbus", "edac_ue_sel"])
    c.add(0, "kernel", f"EDAC MC{mc}: 1 UE memory read error on CPU_SrcID#0_MC#{mc}_"
          f"Chan#{ch}_DIMM#0 (channel:{ch} slot:0 page:0x7e025e offset:0x400 grain:32 -  "
          "err_code:0x00a0:0x0090)", h.name, "root", "edac_ue")
    c.add(0.01, "kernel", f"Memory failure: 0x7e025e: Sending SIGBUS to python3:"
          f"{_pid(c.rng)} due to hardware memory corruption", h.name, "corroborating",
          "memory_failure")
    if c.inc.variant == "edac_ue_sel":
        c.add(0.5, "sel", f"Memory #0x02 | Uncorrectable ECC (UnCorrectable ECC | "
              f"DIMM{'ABCDEFGH'[ch]}{mc}) | Asserted", h.name, "corroborating",
              "sel_memory")
    c.end_crash()


def host_maintenance(c: Ctx) -> None:
    h = c.pick_host()
    v = c.rng.choice(["soft_lockup_panic", "hung_task", "silent_reboot"])
    c.inc.variant = v
    if v == "soft_lockup_panic":
        c.add(0, "kernel", f"watchdog: BUG: soft lockup - CPU#{c.rng.randrange(96)} "
              f"stuck for 22s! [kworker/{c.rng.randrange(96)}:1:{_pid(c.rng)}]", h.name,
              "root", "soft_lockup")
        c.add(30, "kernel", "Kernel panic - not syncing: softlockup: hung tasks", h.name,
              "corroborating", "kernel_panic")
        _host_dies(c, h, dt=30.001)
    elif v == "hung_task":
        c.add(0, "kernel", f"INFO: task kworker/u{c.rng.randrange(200)}:3:"
              f"{_pid(c.rng)} blocked for more than 122 seconds.", h.name, "root",
              "hung_task")
        _host_dies(c, h, dt=5)
    else:
        # No kernel evidence at all: the node simply stops answering and comes back.
        c.inc.culprit_host = h.name
        _host_dies(c, h, dt=0.0, root_in_ctld=True)


def software_bug(c: Ctx) -> None:
    v = c.rng.choice(["traceback", "traceback", "nccl_segfault", "xid13_app"])
    c.inc.variant = v
    if v == "traceback":
        _traceback(c, "Software Bug")
    elif v == "nccl_segfault":
        h = c.cluster.host(c.rng.choice(c.attempt.hosts))
        pid = _pid(c.rng)
        c.add(0, "kernel", f"pt_main_thread[{pid}]: segfault at 7f797fe00000 ip "
              "00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in "
              "libnccl.so.2[7f7c7ac00000+d3d3000]", h.name, "root", "segfault")
        c.inc.extra_hosts = (h.name,)
        c.end_crash()
    else:
        h = c.cluster.host(c.rng.choice(c.attempt.hosts))
        g = c.rng.randrange(8)
        c.xid(0, h, g, 13, "Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of "
              "Range Address", pid=_pid(c.rng))
        c.xid(0.001, h, g, 13, "Graphics Exception: ESR 0x514648=0x100000a 0x514650=0x0 "
              "0x514644=0xd3eff2 0x51464c=0x17f", role="corroborating", pid=_pid(c.rng))
        c.add(0.5, "job", "RuntimeError: CUDA error: an illegal memory access was "
              "encountered", h.name, "corroborating", "cuda_error")
        c.inc.extra_hosts = (h.name,)
        c.end_crash()


def dependency(c: Ctx) -> None:
    v = c.rng.choice(["nfs_traceback", "store_traceback"])
    c.inc.variant = v
    if v == "nfs_traceback":
        server = c.rng.choice(["storage01", "nfs-ckpt-2", "10.200.0.12"])
        for name in c.attempt.hosts[: max(2, len(c.attempt.hosts) // 4)]:
            c.add(c.rng.uniform(-120, -5), "kernel", f"nfs: server {server} not "
                  "responding, still trying", name, "corroborating", "nfs_timeout")
    _traceback(c, "Dependency")


def watchdog_only(c: Ctx) -> None:
    h = c.pick_host()
    c.pick_gpu(h)
    c.inc.variant = "straggler"
    c.inc.straggler_rank = c.inc.culprit_rank
    c.end_watchdog()


def planned(c: Ctx) -> None:
    v = c.rng.choice(["fw_rollout", "driver_upgrade", "config_update"])
    c.inc.variant = v
    c.inc.end_mode = "planned"
    c.inc.t_fail = c.inc.t_fault + c.rng.uniform(0.5, 3)
    name = {"fw_rollout": "maint_nic_fw", "driver_upgrade": "maint_driver",
            "config_update": "maint_config"}[v]
    c.inc.reservation = f"{name}_{c.inc.index}"


# --- shared pieces --------------------------------------------------------------------

def _cuda_error(c: Ctx, h: Host, g: int, text: str) -> None:
    c.add(c.rng.uniform(0.5, 3), "job", f"RuntimeError: {text}", h.name, "symptom",
          "cuda_error")


def _traceback(c: Ctx, label: str) -> None:
    tpl = freetext.choose(c.rng, "traceback", label)
    slots = freetext.random_slots(c.rng, host=c.attempt.hosts[0])
    text = freetext.fill(tpl.text, slots) if tpl else "RuntimeError: failure"
    c.inc.text_family = tpl.family if tpl else None
    c.add(0, "trainer", "ERROR " + text, None, "root", "traceback")
    c.end_crash()


def _host_dies(c: Ctx, h: Host, dt: float = 1.0, root_in_ctld: bool = False) -> None:
    """The host stops: its kernel log ends, slurmctld sees it go, it reboots later."""
    c.inc.extra_hosts = ()
    c.end_node_fail()
    c.inc.t_fail = max(c.inc.t_fail, c.inc.t_fault + dt + 60)
    c.inc.variant = c.inc.variant or "host_down"
    if root_in_ctld:
        c.inc.variant = "silent_reboot"
    _peer_errors(c, h, n=3)


VARIANTS: dict[str, Callable[[Ctx], None]] = {
    "Faulty GPU": faulty_gpu,
    "GPU HBM3 Memory": hbm3,
    "Software Bug": software_bug,
    "Network Switch/Cable": network,
    "Host Maintenance": host_maintenance,
    "GPU SRAM Memory": sram,
    "GPU System Processor": gsp,
    "NIC": nic,
    "NCCL Watchdog Timeouts": watchdog_only,
    "Silent Data Corruption": sdc,
    "GPU Thermal Interface + Sensor": thermal,
    "SSD": ssd,
    "Power Supply": power,
    "Server Chassis": chassis,
    "IO Expansion Board": io_board,
    "Dependency": dependency,
    "CPU": cpu,
    "System Memory": system_memory,
    "Planned Maintenance": planned,
}

# Components whose host is taken out of service: slurmctld shows a drain reason.
DRAINED = {"Faulty GPU", "GPU HBM3 Memory", "Network Switch/Cable", "Host Maintenance",
           "GPU SRAM Memory", "GPU System Processor", "NIC",
           "GPU Thermal Interface + Sensor", "Silent Data Corruption", "SSD",
           "Power Supply", "Server Chassis", "IO Expansion Board", "CPU",
           "System Memory"}


def plan_incident(inc: Incident, attempt: Attempt, cluster: Cluster,
                  rng: random.Random) -> None:
    """Choose the incident's signature, culprit, end and free text."""
    c = Ctx(inc, attempt, cluster, rng)
    VARIANTS[inc.component](c)
    host = cluster.host(inc.culprit_host) if inc.culprit_host else None
    gpu = host.gpus[inc.culprit_gpu] if host and inc.culprit_gpu is not None else None
    slots = freetext.random_slots(
        rng, inc.component, host=inc.culprit_host, gpu=inc.culprit_gpu,
        serial=gpu.serial if gpu else None, pci=gpu.pci if gpu else None,
        xid=next((ln.xid for ln in inc.lines if ln.role == "root" and ln.xid), None))
    # Drain reasons: most hardware incidents get one; some never do (signal missing).
    if inc.component in DRAINED and inc.culprit_host and rng.random() < 0.85:
        tpl = freetext.choose(rng, "drain_reason", inc.component)
        if tpl:
            inc.drain_reason = freetext.fill(tpl.text, slots)
            inc.text_family = inc.text_family or tpl.family
    if inc.planned or rng.random() < 0.25:
        tpl = freetext.choose(rng, "admin_comment", inc.component)
        if tpl and (not inc.planned or rng.random() < 0.7):
            inc.admin_comment = freetext.fill(tpl.text, slots)
