"""Reading one corpus file whole, as stored: the workers' reader, and the driver's for
the files its pre-pass looks at (sacct records, job-log heads, time-zone evidence).

It lives apart from :mod:`faultline.pipeline.transforms` (which re-exports it) because
the driver of a multi-worker run never imports Beam (:mod:`faultline.pipeline.beamrun`),
and the transforms module is Beam's DoFns; nothing here imports Beam unless a path is a
URI (:mod:`faultline.pipeline.objstore`).
"""

from __future__ import annotations

import os
import stat

from faultline.pipeline.inflate import MAX_PLAIN_BYTES
from faultline.pipeline.objstore import read_uri


def read_bytes(path: str, limit: int = MAX_PLAIN_BYTES
               ) -> tuple[bytes, float | None, str | None]:
    """A file's bytes as stored, its modification time (an object's last-modified
    time, for a URI), and what went wrong reading it whole.

    A worker holds a whole file (and its decoded text) in memory, so a file over
    ``limit`` bytes, the same bound gzip content gets, is cut at its last line end
    before the limit instead of taking the worker, and the whole ingest, down."""
    if "://" not in path:
        data, mtime = _read_local(path, limit + 1)
    else:  # an object store's "mtime" is its last-modified time (re-runs compare it)
        data, mtime = read_uri(path, limit + 1)
    if len(data) <= limit:
        return data, mtime, None
    cut = data.rfind(b"\n", 0, limit) + 1 or limit
    return data[:cut], mtime, f"file over {limit} bytes: only its first {cut} bytes read"


def _read_local(path: str, cap: int) -> tuple[bytes, float]:
    """A local file's first ``cap`` bytes and its modification time after reading.

    Through the file descriptor: ``open(path).read(cap)`` lets the buffered reader
    set up a buffer of ``cap`` bytes (the 1 GiB bound) per file, 20 us of a job log's
    25 us here; this asks for the size ``fstat`` gives (one more byte, to see a file
    that grew), and the time comes from the file read even if its path was replaced
    meanwhile."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode)
        parts: list[bytes] = []
        got = 0
        while got < cap:
            ask = min(cap - got, max(st.st_size - got + 1, 1 << 16))
            chunk = os.read(fd, ask)
            if chunk:
                parts.append(chunk)
                got += len(chunk)
            if not chunk or (regular and len(chunk) < ask):  # a short read is the end
                break
        return (parts[0] if len(parts) == 1 else b"".join(parts)), os.fstat(fd).st_mtime
    finally:
        os.close(fd)
