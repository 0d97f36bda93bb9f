"""PCI addresses in one form: the kernel's ``dddd:bb:dd.f``, lowercase.

The same GPU is written ``PCI:0000:3b:00`` in Xid lines, ``00000000:3B:00.0`` by
nvidia-smi, ``0000:3b:00.0`` by the kernel and ``+pci:0000:3b:00.0`` in /dev/kmsg
``DEVICE=`` fields; events and the GPU inventory meet on :func:`normalize_pci`.

The domain is printed as the kernel prints it (``%04x``): nvidia-smi's 8-digit
``00000000`` becomes ``0000``, a wide domain such as VMD's ``10000`` keeps its digits.
A missing function (Xid lines name the device only) is ``.0``; a missing domain is
``0000``.
"""

from __future__ import annotations

import re

# Accepts every spelling above; group 1 domain (optional), 2 bus, 3 device, 4 function.
_PCI = re.compile(
    r"^\s*(?:\+?pci:|PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})"
    r"(?:\.([0-7]))?\s*$"
)

# A BDF as the kernel prints it inside a message (for finding, not validating).
BDF_RE = re.compile(r"\b([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")


def normalize_pci(text: str | None) -> str | None:
    """``PCI:0000:3b:00`` / ``00000000:3B:00.0`` / ``0000:3b:00.0`` -> ``0000:3b:00.0``.

    Returns None when ``text`` is not a PCI address (empty, ``N/A``, garbage).
    """
    if not text:
        return None
    m = _PCI.match(text)
    if m is None:
        return None
    domain, bus, dev, func = m.groups()
    dev_n = int(dev, 16)
    if dev_n > 0x1F:  # five bits of device number
        return None
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{dev_n:02x}.{func or '0'}"


def find_bdf(text: str) -> str | None:
    """The first kernel-style BDF (``0000:3b:00.0``) in ``text``, normalized."""
    m = BDF_RE.search(text)
    return normalize_pci(m.group(1)) if m else None
