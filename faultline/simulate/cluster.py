"""The simulated cluster: hosts of 8 H100s in the HGX PCI layout, NICs, BMCs, names.

PCI bus numbers follow an HGX H100 8-GPU baseboard as nvidia-smi reports it on DGX
H100 systems (18, 2a, 3a, 5d, 9a, ab, ba, db), each GPU behind its own PCIe switch
port; NICs are ConnectX-7 (mlx5) devices, one per GPU.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from faultline.simulate.config import Preset

GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
SWITCH_BRIDGES = ("17", "29", "39", "5c", "99", "aa", "b9", "da")  # upstream ports
NIC_BUSES = ("0c", "1f", "3f", "4f", "8c", "9f", "bf", "cf")
NVME_BUSES = ("e1", "e2")


@dataclass(frozen=True)
class Gpu:
    index: int
    pci: str  # kernel form 0000:18:00.0
    serial: str
    uuid: str

    @property
    def xid_pci(self) -> str:
        """How the NVIDIA driver writes it in Xid lines: PCI:0000:18:00."""
        return "PCI:" + self.pci[:-2]

    @property
    def smi_pci(self) -> str:
        """How nvidia-smi writes it: 00000000:18:00.0."""
        return "0000" + self.pci.upper()


@dataclass(frozen=True)
class Host:
    index: int
    name: str
    fqdn: str
    bmc: str
    ip: str
    gpus: tuple[Gpu, ...]
    shape: str  # kernel log shape: rfc3339 | rfc3164 | dmesg_t
    leaf: str  # the leaf switch its NICs hang off

    def nic(self, i: int) -> tuple[str, str, str]:
        """(mlx5 device, PCI address, netdev) of NIC ``i``."""
        return f"mlx5_{i}", f"0000:{NIC_BUSES[i]}:00.0", f"ib{i}"


@dataclass(frozen=True)
class Cluster:
    hosts: tuple[Host, ...]
    run_hosts: tuple[str, ...]  # hosts of the training run's first attempt
    spares: tuple[str, ...]  # swapped into the run when one of its hosts breaks
    others: tuple[str, ...]  # where other users' jobs run

    def host(self, name: str) -> Host:
        return self._by_name[name]

    @property
    def _by_name(self) -> dict[str, Host]:
        cache = self.__dict__.get("_cache")
        if cache is None:
            cache = {h.name: h for h in self.hosts}
            object.__setattr__(self, "_cache", cache)
        return cache


def _shape_for(rng: random.Random, shapes: dict[str, float]) -> str:
    names = sorted(shapes)
    return rng.choices(names, weights=[shapes[n] for n in names])[0]


def build_cluster(p: Preset, seed: int) -> Cluster:
    """Deterministic per (preset, seed)."""
    rng = random.Random(f"{seed}:cluster:{p.name}")
    hosts = []
    for i in range(p.all_hosts):
        name = p.host_name(i)
        gpus = tuple(
            Gpu(
                index=g,
                pci=f"0000:{GPU_BUSES[g]}:00.0",
                serial=str(1650120000000 + rng.randrange(10**9)),
                uuid="GPU-" + str(uuid.UUID(int=rng.getrandbits(128))),
            )
            for g in range(8)
        )
        hosts.append(
            Host(
                index=i,
                name=name,
                fqdn=name + p.fqdn_suffix,
                bmc=f"{name}-bmc",
                ip=f"10.{1 + (i + 10) // 65536}.{((i + 10) // 256) % 256}.{(i + 10) % 256}",
                gpus=gpus,
                shape=_shape_for(rng, p.kernel_shapes),
                leaf=f"leaf-{i // 32:03d}",
            )
        )
    names = tuple(h.name for h in hosts)
    pool = names[p.hosts:]
    half = max(1, len(pool) // 2)
    return Cluster(hosts=tuple(hosts), run_hosts=names[: p.hosts], spares=pool[:half],
                   others=pool[half:] or pool)
