"""glibc's allocator told to keep and reuse the memory a parse frees.

An ingest allocates and frees the same large buffers over and over: each file's bytes,
its decoded text and its list of lines, polars' and Arrow's columns per batch, DuckDB's
vectors in the load. glibc serves a request above its mmap threshold (128 KiB at
start, raised as such blocks are freed, up to 32 MiB) with a fresh ``mmap`` and returns
it with ``munmap`` on free, and it gives the top of the heap back to the kernel once
more than its trim threshold (128 KiB at start) is free there. Every page of memory
obtained that way is a page fault on first touch and a page the kernel zeroes
(``clear_page``): small x4 took 255-300k minor page faults, and its processes spent
1.5-2.0 CPU s in the kernel.

:func:`keep_freed_memory` fixes the two thresholds (:data:`MMAP_THRESHOLD`,
:data:`TRIM_THRESHOLD`) with ``mallopt``, so that blocks below 32 MiB come from the
heap and up to 256 MiB freed at its top stay mapped for the next batch. On small x4,
four runs of each in turn (``GLIBC_TUNABLES`` with these values against none): 231-244k
faults against 257-302k, system CPU 1.29-1.84 s against 1.52-2.03 s (bench/RESULTS.md,
session 10). A process may keep up to the trim threshold of freed memory mapped per
arena; its peak did not grow (driver and largest worker 335-338 / 372-373 MiB against
340-348 / 375-379).

Called by the console script for the commands that parse (:mod:`faultline.launch`) and
by the fork server before its imports (:mod:`faultline.pipeline.forkloop`), whose
workers inherit the setting with the rest of the allocator's state. Nothing happens
off glibc, or when the user has set glibc's malloc tunables (``GLIBC_TUNABLES`` with a
``glibc.malloc.`` entry, or the ``MALLOC_*_`` variables): theirs win.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for its dynamic threshold (64-bit)
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX")


def user_tuned(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``environ`` sets glibc's malloc parameters itself."""
    return ("glibc.malloc." in environ.get("GLIBC_TUNABLES", "")
            or any(name in environ for name in _USER_SETTINGS))


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (module doc); True if
    they were set, False off glibc or when the user tuned malloc."""
    if not sys.platform.startswith("linux") or user_tuned():
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # musl and others: not glibc
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
