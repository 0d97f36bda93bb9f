"""Per-host kernel logs: routine bulk, boots, noise and incident lines, in one shape.

Routine lines are most of any real kernel log; they are generated a day at a time with
numpy (times, template choice) and merged with the few interesting lines by time.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

import numpy as np

from faultline.simulate import timefmt
from faultline.simulate.cluster import Host
from faultline.simulate.model import Line
from faultline.simulate.output import NO_FINAL_NEWLINE, Marked

# (syslog tag or None for the kernel, message). Only kernel lines reach dmesg.
ROUTINE: tuple[tuple[str | None, str], ...] = (
    (None, "audit: type=1400 audit({a}.{b}:{n}): apparmor=\"DENIED\" operation=\"open\" "
           "profile=\"snap.lxd.daemon\" name=\"/proc/{n}/mounts\" pid={n} comm=\"lxd\""),
    (None, "perf: interrupt took too long (2504 > 2500), lowering "
           "kernel.perf_event_max_sample_rate to 79750"),
    (None, "nvidia-nvswitch{s}: open (major=510)"),
    (None, "kauditd_printk_skb: {s} callbacks suppressed"),
    (None, "EXT4-fs (md0): mounted filesystem with ordered data mode. Opts: (null). "
           "Quota mode: none."),
    (None, "docker0: port 1(veth{h}) entered blocking state"),
    (None, "docker0: port 1(veth{h}) entered forwarding state"),
    (None, "IPVS: rr: TCP 10.96.0.1:443 - no destination available"),
    (None, "TCP: request_sock_TCP: Possible SYN flooding on port 8080. Sending cookies. "
           " Check SNMP counters."),
    (None, "nvme nvme0: 64/0/0 default/read/poll queues"),
    (None, "infiniband mlx5_{s}: mlx5_ib_add:4265:(pid {n}): counters are not supported"),
    (None, "IPv4: martian source 10.0.{s}.255 from 10.0.{s}.7, on dev eth0"),
    ("systemd[1]", "Started Session {n} of User root."),
    ("systemd[1]", "session-{n}.scope: Deactivated successfully."),
    ("systemd[1]", "Starting Cleanup of Temporary Directories..."),
    ("systemd[1]", "logrotate.service: Deactivated successfully."),
    ("CRON[{n}]", "(root) CMD (/usr/lib/sa/sa1 1 1)"),
    ("sshd[{n}]", "Accepted publickey for root from 10.0.{s}.{b} port {n} ssh2: ED25519 "
                  "SHA256:q1w2e3r4t5y6u7i8o9p0"),
    ("sshd[{n}]", "pam_unix(sshd:session): session opened for user root(uid=0) by (uid=0)"),
    ("nvidia-persistenced[{n}]", "device 0000:18:00.0 - persistence mode enabled."),
    ("slurmd[{n}]", "launch task StepId={n}.0 request from UID:1000 GID:1000 HOST:10.0.{s}.1"
                    " PORT:{n}"),
    ("dcgm-exporter[{n}]", "Collecting metrics for GPUs 0-7"),
    ("kubelet[{n}]", "I0701 operation_generator.go:721] MountVolume.SetUp succeeded"),
    ("rsyslogd[{n}]", "imjournal: {s} messages lost due to rate-limiting (20000 allowed "
                      "within 600 seconds)"),
)
RAW = "__raw__"  # tag of bytes written as they are (dirt)
KERNEL_ONLY = tuple(i for i, (tag, _) in enumerate(ROUTINE) if tag is None)
KERNEL_VERSION = ("Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu "
                  "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
                  "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024")


@dataclass
class HostKernelPlan:
    """What the host's kernel log must contain besides routine lines."""

    host: Host
    boots: list[tuple[float, str, bool]] = field(default_factory=list)  # t, driver, orderly
    downs: list[tuple[float, float]] = field(default_factory=list)  # host dead [a, b)
    lines: list[tuple[Line, int | None]] = field(default_factory=list)  # line, incident
    nul_at_crash: bool = False
    bad_utf8: bool = False
    truncate_end: bool = False


def _boot_lines(t: float, driver: str, host: Host) -> list[tuple[float, str, str]]:
    nic_pci = host.nic(0)[1]
    return [
        (t, "kernel", KERNEL_VERSION),
        (t + 0.0001, "kernel", "Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic "
                               "root=UUID=3e4f0c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b ro quiet"),
        (t + 9.1, "kernel", "nvidia: loading out-of-tree module taints kernel."),
        (t + 9.2, "kernel", f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  "
                            "Fri May 31 09:35:42 UTC 2024"),
        (t + 11.5, "kernel", f"mlx5_core {nic_pci}: firmware version: 28.39.1002"),
    ]


# Shapes that carry kernel lines only (no syslog tags), like dmesg's ring buffer.
KERNEL_RING = frozenset({"dmesg_t", "dmesg"})
# RFC 3164 without the host field (``Jul  1 12:00:00 kernel: [secs] msg``): journalctl
# --no-hostname, rsyslog templates that leave the host to the file's path
NO_HOST = "rfc3164_nohost"


def render_prefix(shape: str, ts: np.ndarray, zone: ZoneInfo,
                  uptimes: np.ndarray | None = None) -> list[str]:
    if shape == "rfc3339":
        return timefmt.rfc3339(ts, zone)
    if shape in ("rfc3164", NO_HOST):
        return timefmt.rfc3164(ts, zone)
    if shape in ("dmesg", "journal_json"):  # seconds since boot (journal: its monotonic)
        up = uptimes if uptimes is not None else np.zeros(len(ts))
        return [f"[{max(u, 0.0):12.6f}]" for u in up.tolist()]
    return timefmt.dmesg_t(ts, zone)


def _boot_id(host: Host, boot_t: float) -> str:
    return hashlib.sha256(f"{host.name}:{boot_t:.6f}".encode()).hexdigest()[:32]


def journal_json(t: float, up: float, boot: str, name: str, tag: str,
                 text: str | bytes) -> str:
    """One ``journalctl -o json`` entry. MESSAGE is a byte array when it is not UTF-8,
    as journald writes it (systemd's JOURNAL_EXPORT_FORMATS: "JSON")."""
    try:
        msg: object = text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError:
        msg = list(text)
    ident, _, pid = tag.partition("[")
    entry: dict[str, object] = {
        "__REALTIME_TIMESTAMP": str(round(t * 1e6)),
        "__MONOTONIC_TIMESTAMP": str(round(max(up, 0.0) * 1e6)),
        "_BOOT_ID": boot,
        "PRIORITY": "4" if ident == "kernel" else "6",
        "_TRANSPORT": "kernel" if ident == "kernel" else "syslog",
        "SYSLOG_IDENTIFIER": ident,
        "_HOSTNAME": name,
        "MESSAGE": msg,
    }
    if pid:
        entry["_PID"] = pid.rstrip("]")
    return json.dumps(entry, separators=(",", ":"))


def kernel_stream(plan: HostKernelPlan, t0: float, t1: float, per_day: int, zone: ZoneInfo,
                  seed: int, fqdn: bool, last_file: bool,
                  shape: str | None = None) -> Iterator[object]:
    """Every line of the host's kernel log between t0 and t1, in time order, in the
    host's shape (or ``shape``: what the corpus layout writes instead)."""
    host = plan.host
    shape = shape or host.shape
    name = host.fqdn if fqdn else host.name
    rng = np.random.default_rng([seed, host.index, int(t0)])
    py = random.Random(f"{seed}:{host.index}:{t0}")
    boot_times = np.array(sorted(b[0] for b in plan.boots) or [t0 - 86400 * 3])

    # interesting lines: (t, order, tag, text, marker)
    special: list[tuple[float, int, str, str | bytes, object]] = []
    for i, (ln, inc) in enumerate(plan.lines):
        if t0 <= ln.t < t1 and not (shape in KERNEL_RING and ln.tag != "kernel"):
            special.append((ln.t, i, ln.tag, ln.text, (ln, inc)))
    for b_t, driver, orderly in plan.boots:
        if orderly and t0 <= b_t - 40 < t1:
            special.append((b_t - 40, -2, "kernel", "reboot: Restarting system", None))
        for j, (t, tag, text) in enumerate(_boot_lines(b_t, driver, host)):
            if t0 <= t < t1:
                special.append((t, -1 - j, tag, text, None))
    if plan.nul_at_crash:
        # A hard crash leaves a run of NUL bytes where the page cache was never flushed.
        for a, _b in plan.downs:
            if t0 <= a < t1:
                special.append((a, 10**9, RAW, b"\x00" * 64, None))
    special.sort(key=lambda s: (s[0], s[1]))

    def routine() -> Iterator[tuple[float, int, str, str | bytes, object]]:
        day = t0
        while day < t1:
            end = min(day + 86400, t1)
            n = rng.poisson(per_day * (end - day) / 86400)
            ts = np.sort(rng.uniform(day, end, n))
            for a, b in plan.downs:
                ts = ts[(ts < a) | (ts >= b)]
            pool = KERNEL_ONLY if shape in KERNEL_RING else range(len(ROUTINE))
            pool = np.array(list(pool))
            picks = pool[rng.integers(0, len(pool), len(ts))]
            nums = rng.integers(100, 99999, len(ts))
            for t, k, num in zip(ts.tolist(), picks.tolist(), nums.tolist(), strict=True):
                tag, tpl = ROUTINE[k]
                text = tpl.format(n=num, s=num % 8, h=f"{num:x}", a=int(t), b=num % 250 + 1)
                yield (t, 0, (tag or "kernel").format(n=num), text, None)
            day = end

    merged = heapq.merge(routine(), iter(special), key=lambda s: (s[0], s[1]))
    block: list[tuple[float, int, str, str | bytes, object]] = []

    def flush() -> Iterator[object]:
        if not block:
            return
        ts = np.array([b[0] for b in block])
        boot_at = boot_times[np.clip(np.searchsorted(boot_times, ts, "right") - 1, 0, None)]
        uptimes = ts - boot_at
        prefixes = render_prefix(shape, ts, zone, uptimes)
        for (t, _o, tag, text, marker), pre, up, b_t in zip(
                block, prefixes, uptimes.tolist(), boot_at.tolist(), strict=True):
            if tag == RAW:
                if shape != "journal_json":  # the journal has no torn pages
                    yield text
                continue
            if shape == "journal_json":
                line = journal_json(t, up, _boot_id(host, b_t), name, tag, text)
            elif shape in KERNEL_RING:
                line = f"{pre} {text}"
            elif tag == "kernel":
                stamp = f"[{max(up, 0.0):12.6f}] " if shape in ("rfc3164", NO_HOST) else ""
                who = "" if shape == NO_HOST else f" {name}"
                line = f"{pre}{who} kernel: {stamp}{text}"
            else:
                line = f"{pre}{'' if shape == NO_HOST else ' ' + name} {tag}: {text}"
            if marker is None:
                yield line
            else:
                ln, inc = marker
                yield Marked(line, ln, inc)
        block.clear()

    dirt_done = False
    for item in merged:
        block.append(item)
        if len(block) >= 8192:
            yield from flush()
        if plan.bad_utf8 and not dirt_done and item[4] is None and py.random() < 0.01:
            yield from flush()
            # a device string with bytes that are not UTF-8, as USB descriptors can be
            yield _one_line(shape, item[0], boot_times, zone, host, name,
                            b"usb 1-1: Product: \xff\xfeBMC Keyboard")
            dirt_done = True
    yield from flush()
    if last_file and plan.truncate_end:
        line = _one_line(shape, t1 - 1.0, boot_times, zone, host, name,
                         b"mlx5_core 0000:0c:00.0: mlx5_cmd_out_err:8")
        yield line[:-12] if shape == "journal_json" else line  # a torn last entry
        yield NO_FINAL_NEWLINE


def _one_line(shape: str, t: float, boot_times: np.ndarray, zone: ZoneInfo, host: Host,
              name: str, text: bytes) -> bytes:
    """A single kernel line written outside the vectorized blocks (dirt)."""
    b_t = float(boot_times[max(int(np.searchsorted(boot_times, t, "right")) - 1, 0)])
    if shape == "journal_json":
        return journal_json(t, t - b_t, _boot_id(host, b_t), name, "kernel", text).encode()
    pre = render_prefix(shape, np.array([t]), zone, np.array([t - b_t]))[0]
    who = ("" if shape in KERNEL_RING else " kernel:" if shape == NO_HOST
           else f" {name} kernel:")
    return f"{pre}{who} ".encode() + text
