"""The vocabulary of ``events.kind``: every kind a parser may emit, with its meaning.

Data, not logic: parsers emit these names, classifiers match on them and the
data-quality suite checks ``events.kind`` against this list. Add a kind here first.
"""

from __future__ import annotations

EVENT_KINDS: dict[str, str] = {
    # --- GPU (kernel) ---
    "xid": "NVIDIA Xid line (xid column holds the code)",
    "gpu_fallen_off_bus": "NVRM line saying a GPU fell off the bus, without an Xid",
    "gpu_lost": "NVRM GPU-lost / RmInitAdapter / device-handle failure without an Xid",
    "gsp_timeout": "NVRM GSP RPC timeout line without an Xid",
    "sxid": "NVSwitch SXid line",
    "nvidia_driver_load": "NVRM driver module load (version in attrs)",
    "gpu_serial": "NVRM line naming a GPU's board serial or UUID",
    "gpu_row_remap_failure": "nvidia-smi -q: a row remapping failed (HBM out of spare rows)",
    "gpu_row_remap_pending": "nvidia-smi -q: row remappings pending until a GPU reset",
    "gpu_ecc_uncorrectable": "nvidia-smi -q: volatile uncorrectable DRAM/SRAM ECC errors",
    "gpu_retired_pages": "nvidia-smi -q: double-bit retired pages or page retirement pending",
    # --- network (kernel) ---
    "ib_link_down": "InfiniBand/RoCE/Ethernet port link down or lost carrier",
    "ib_link_up": "InfiniBand/RoCE/Ethernet port link up or gained carrier",
    "ib_module": "mlx5 port module (cable/transceiver) event",
    "nic_health": "mlx5 firmware health / fatal error / health compromised",
    "nic_cmd_timeout": "mlx5 firmware command timeout",
    "pcie_power": "device reports insufficient PCIe slot power",
    # --- host hardware (kernel) ---
    "pcie_aer": "PCIe AER error report",
    "pcie_dpc": "PCIe downstream port containment event",
    "pcie_link_down": "PCIe hotplug slot link down",
    "edac_ce": "EDAC corrected memory error",
    "edac_ue": "EDAC uncorrected memory error",
    "mce": "machine-check / APEI hardware error",
    "memory_failure": "kernel memory-failure handling (poisoned page)",
    "nvme_timeout": "NVMe I/O or admin command timeout",
    "nvme_error": "NVMe controller down / removed / reset failure",
    "io_error": "block-layer I/O error",
    "fs_error": "filesystem error (ext4, xfs) or read-only remount",
    "nfs_timeout": "NFS server not responding",
    "thermal": "CPU/GPU/device temperature or throttling event",
    "hung_task": "task blocked for more than N seconds",
    "soft_lockup": "soft/hard lockup watchdog",
    "kernel_panic": "kernel panic / Oops / BUG",
    "oom_kill": "out-of-memory kill",
    "segfault": "user-space segfault reported by the kernel",
    "peermem_error": "nvidia-peermem error",
    "boot": "kernel boot marker (Linux version / command line)",
    "reboot": "orderly reboot / power-off marker",
    # --- BMC ---
    "sel_power": "BMC power supply / power unit event",
    "sel_fan": "BMC fan event",
    "sel_thermal": "BMC temperature sensor event",
    "sel_memory": "BMC memory ECC event",
    "sel_processor": "BMC processor event",
    "sel_chassis": "BMC chassis / voltage / baseboard / management controller event",
    "sel_other": "any other asserted BMC event",
    # --- job logs (NCCL / PyTorch / torchrun) ---
    "nccl_bootstrap": "NCCL bring-up line tying a host to an address",
    "nccl_warn": "NCCL WARN line",
    "nccl_ib_error": "NCCL IB completion error from a peer (status, vendor err)",
    "nccl_async_error": "NCCL IB async event (port error, catastrophic error)",
    "nccl_error": "NCCL error result (ncclRemoteError, unhandled system error, ...)",
    "nccl_watchdog": "PyTorch ProcessGroupNCCL watchdog collective timeout",
    "nccl_watchdog_progress": "watchdog: last enqueued / completed NCCL work",
    "nccl_heartbeat": "ProcessGroupNCCL heartbeat monitor timeout",
    "cuda_error": "CUDA runtime error in the application",
    "traceback": "Python traceback (joined; exception type in attrs)",
    "process_exit": "torchrun/elastic worker failure (exit code, signal)",
    "job_cancelled": "slurmstepd/srun: job or step cancelled or node failure",
    # --- trainer ---
    "train_step": "trainer step line (step, loss)",
    "checkpoint": "checkpoint saved (step in attrs)",
    "nonfinite_loss": "NaN/Inf loss or gradient norm",
    "checksum_mismatch": "cross-replica checksum / parameter mismatch",
    "train_error": "other ERROR line of the trainer",
    # --- Slurm ---
    "job_record": "sacct job (steps folded in)",
    "node_not_responding": "slurmctld: node not responding / set DOWN",
    "node_down": "node state set DOWN (reason in attrs)",
    "node_drain": "node drain / reason set (reason in attrs)",
    "node_reboot": "node rebooted (unexpectedly, or reboot requested/complete)",
    "node_resume": "node returned to service / now responding",
    "job_killed": "slurmctld killed a job on a failed node",
    "job_requeue": "slurmctld requeued a job",
    "operator_kill": "job kill requested by an operator (uid in attrs)",
    "reservation": "maintenance reservation created/updated",
    # --- hosts ---
    "host_alias": "hosts.csv row: a host's aliases and addresses",
    "gpu_inventory": "inventory row: GPU index, PCI address, UUID, serial",
}
