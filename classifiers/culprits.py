"""Where a root cause is: the hardware suspect, where it surfaced, and which GPU.

Two questions that look alike have different answers. *Where did it surface?* is the
host (and GPU) whose lines named the root: for a Software Bug, the host whose rank
crashed first; for NCCL watchdog timeouts, the straggler. *What should be replaced?*
has an answer only when the component is hardware (Table 5's GPU, Host and Network
categories): a healthy host where a software fault happened to surface is no candidate
for replacement. So every interruption gets ``surfaced_host`` / ``surfaced_gpu``, and
only a hardware component gets ``culprit_host`` / ``culprit_gpu`` and the GPU's serial
and UUID, read from the host's inventory in force at the failure (a swapped GPU keeps
its slot's index but not its serial), so "which GPUs failed more than once" is
answered by serial whatever kind of event named the GPU.

When only NCCL watchdog timeouts explain a stop, the straggler (the host whose ranks
never reported, :func:`straggler`) is where the hang surfaced; :class:`Watchdog` reads
the timeouts lazily.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator, Mapping

import duckdb

from faultline.schemas.taxonomy import load_taxonomy

# Table 5 categories whose components are parts that can be replaced
HARDWARE_CATEGORIES = frozenset({"GPU", "Host", "Network"})


def is_hardware(component: str) -> bool:
    """Whether ``component`` is a replaceable part (its Table 5 category is GPU, Host
    or Network), rather than software, maintenance, a dependency or unknown."""
    tax = load_taxonomy()
    if component not in tax.component_names:
        return False
    return tax.category_of(component) in HARDWARE_CATEGORIES


GpuId = tuple[str | None, str | None]  # serial, uuid


class Inventory:
    """GPU index -> (serial, UUID) per host, as the inventories say, by time.

    An inventory row with a time (an ``nvidia-smi -q`` dump stamps one) is in force from
    then on; rows without a time (``gpus.csv``) are in force whenever no timed row is.
    For a failure before any inventory, the first one taken after it is the best
    knowledge there is."""

    def __init__(self) -> None:
        self._timed: dict[tuple[str, int], list[tuple[float, GpuId]]] = defaultdict(list)
        self._untimed: dict[tuple[str, int], GpuId] = {}

    def add(self, host: str, index: int, ts: float | None, serial: str | None,
            uuid: str | None) -> None:
        """One inventory row; a later untimed row for the same slot wins (a re-run of
        nvidia-smi after a swap is written after the first)."""
        if ts is None:
            self._untimed[(host, index)] = (serial, uuid)
        else:
            self._timed[(host, index)].append((ts, (serial, uuid)))
            self._timed[(host, index)].sort(key=lambda r: r[0])

    def lookup(self, host: str | None, index: int | None, at: float) -> GpuId:
        """The (serial, uuid) of GPU ``index`` on ``host`` at time ``at`` (epoch s)."""
        if host is None or index is None:
            return None, None
        timed = self._timed.get((host, index), [])
        pos = bisect_right([t for t, _ in timed], at)
        if pos:
            return timed[pos - 1][1]
        if (host, index) in self._untimed:
            return self._untimed[(host, index)]
        return timed[0][1] if timed else (None, None)

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> Inventory:
        """Every ``gpu_inventory`` event with a host and an index."""
        inv = cls()
        for host, ts, attrs in con.execute("""
                SELECT host, epoch_us(ts), attrs FROM events
                WHERE kind = 'gpu_inventory' AND host IS NOT NULL
                ORDER BY ts NULLS FIRST, path, line_no""").fetchall():
            a = json.loads(attrs) if attrs else {}
            if a.get("index") is None:
                continue
            inv.add(host, int(a["index"]), ts / 1e6 if ts is not None else None,
                    a.get("serial"), a.get("uuid"))
        return inv


def placement(component: str, culprit_host: str | None, culprit_gpu: int | None,
              culprit_serial: str | None, surfaced_host: str | None,
              surfaced_gpu: int | None, inventory: Inventory, failed: float) -> dict:
    """The interruption's location columns: where it surfaced (host, GPU, serial)
    always; the hardware suspect (host, GPU index, serial, UUID) only for a hardware
    component. Serial and UUID come from the inventory in force at ``failed`` (the
    root event's own serial when the inventory does not list the GPU)."""
    if surfaced_host is None:
        surfaced_host, surfaced_gpu = culprit_host, culprit_gpu
    out = {"surfaced_host": surfaced_host, "surfaced_gpu": surfaced_gpu,
           "surfaced_gpu_serial": inventory.lookup(surfaced_host, surfaced_gpu, failed)[0],
           "culprit_host": None, "culprit_gpu": None, "culprit_gpu_serial": None,
           "culprit_gpu_uuid": None}
    if not is_hardware(component):
        return out
    serial, uuid = inventory.lookup(culprit_host, culprit_gpu, failed)
    out.update(culprit_host=culprit_host, culprit_gpu=culprit_gpu,
               culprit_gpu_serial=serial or (culprit_serial if culprit_gpu is not None
                                             else None),
               culprit_gpu_uuid=uuid)
    return out


# NCCL watchdog timeouts of an interruption's own job, from its start to 5 min after
WATCHDOG_JOIN = """
    FROM w JOIN events e
      ON e.job_id = w.job_id AND epoch_us(e.ts) BETWEEN w.started AND w.failed + 300e6
    WHERE e.kind = 'nccl_watchdog'"""


class Watchdog(Mapping[str, set[int]]):
    """Host -> ranks whose NCCL watchdog fired in one interruption, read from the
    database only when the decision needs them (when nothing else explains the
    failure). Every rank of a large job writes one: holding them all for every
    interruption would make memory grow with the size of the cluster times the number
    of interruptions."""

    def __init__(self, con: duckdb.DuckDBPyConnection, iid: str, hosts: int) -> None:
        self._con, self._iid, self._hosts = con, iid, hosts
        self._ranks: dict[str, set[int]] | None = None

    def _load(self) -> dict[str, set[int]]:
        if self._ranks is None:
            self._ranks = defaultdict(set)
            for host, rank in self._con.execute(
                    f"SELECT e.host, e.rank {WATCHDOG_JOIN} AND w.iid = ?",
                    [self._iid]).fetchall():
                self._ranks[host].add(rank)
        return self._ranks

    def __len__(self) -> int:
        return self._hosts

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __getitem__(self, host: str) -> set[int]:
        return self._load()[host]


def straggler(watchdog: Mapping[str, set[int]], hosts: list[str]
              ) -> tuple[str, str | None, int | None]:
    """Only watchdog timeouts: the ranks that never reported point at the straggler.
    Returns (rule id, host, GPU index); host and GPU are None when no single host
    stands out."""
    reporting = {h: len(r) for h, r in watchdog.items() if h}
    full = max(reporting.values(), default=0)
    short = sorted((n, h) for h, n in reporting.items() if n < full)
    silent = [h for h in hosts if h not in reporting]
    if len(short) == 1 and not silent:
        _n, host = short[0]
        base = min(watchdog[host]) // 8 * 8
        missing = sorted(set(range(base, base + full)) - watchdog[host])
        return "nccl.watchdog_straggler", host, missing[0] % 8 if missing else None
    if len(silent) == 1 and not short:
        return "nccl.watchdog_straggler", silent[0], None
    return "nccl.watchdog_only", None, None
