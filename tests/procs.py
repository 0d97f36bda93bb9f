"""Processes seen through ``/proc``, for the tests that check what a run leaves behind
(the fork server, its pipeline process and workers)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def gone(pid: int) -> bool:
    """No such process, or a zombie (an orphan the container's init does not reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pids: list[int], timeout: float = 30) -> bool:
    """Whether all of ``pids`` are gone within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not all(gone(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def children(pid: int) -> list[int]:
    """The children of ``pid`` (none once it has gone)."""
    try:
        return [int(c) for t in os.listdir(f"/proc/{pid}/task")
                for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    except OSError:
        return []
