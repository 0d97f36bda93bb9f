"""Which host a file belongs to, from its path, and how that was decided.

Corpora come in many layouts (CORPUS.md's ``hosts/<host>/``, per-host ``/var/log``
trees, central rsyslog trees like ``<host>/kern.log`` or ``<date>/<host>.log``, one
central syslog). A line that names its host (syslog, journal JSON) always wins for its
own events; the *file's* host, for lines that name none (plain dmesg, ``dmesg -T``,
SEL, inventory), is decided here, in this order, and recorded in ``files.host_from``:

``pattern``      the user's ``--host-from-path REGEX`` matched, its ``host`` group
``path_layout``  a layout that says where the host is: ``hosts/<host>/...``,
                 ``jobs/<id>/<host>.log``, ``<host>/var/log/...``
``path_known``   a path component, or a file name up to its first dot, is a known host
                 (``IngestSettings.known_hosts``: sacct node lists and hosts.csv, read
                 by :func:`known_hosts` before the parse)
``line``         (set after parsing) no host from the path, but the lines name theirs
``none``         none of these

Known hosts make the rsyslog trees work without a pattern and without guessing: a
component is taken as a host only when the job records or hosts.csv name it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from faultline.pipeline.hostlist import try_expand_hostlist


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A ``--host-from-path`` pattern; ValueError unless it compiles and has a ``host``
    group (the error says so, for the command line)."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"--host-from-path {pattern!r}: {exc}") from None
    if "host" not in rx.groupindex:
        raise ValueError(f"--host-from-path {pattern!r} needs a named group (?P<host>...)")
    return rx


def layout_host(parts: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(host, job_id) the canonical and /var/log layouts give a path's parts."""
    host = job_id = None
    if "jobs" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("jobs")
        if i + 1 < len(parts) - 1:
            job_id = parts[i + 1]
            stem = parts[-1].split(".")[0]
            if not stem.startswith("train"):
                host = stem
    elif "hosts" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("hosts")
        if i + 1 < len(parts) - 1:
            host = parts[i + 1]
    else:
        for i in range(len(parts) - 3, 0, -1):  # <host>/var/log/<file...>
            if parts[i] == "var" and parts[i + 1] == "log" and parts[i - 1] not in ("/", ""):
                host = parts[i - 1]
                break
    return host, job_id


def known_host(parts: tuple[str, ...], known: frozenset[str]) -> str | None:
    """The nearest path component (or file name up to its first dot) that is a known
    host, as the job records spell it; names compare case-insensitively, and
    ``node1.example.com`` is ``node1``."""
    if not known:
        return None
    by_lower = _by_lower(known)
    for part in reversed(parts):
        for cand in (part, part.split(".")[0]):
            found = by_lower.get(cand.lower()) if cand else None
            if found is not None:
                return found
    return None


@functools.lru_cache(maxsize=8)
def _by_lower(known: frozenset[str]) -> dict[str, str]:
    return {k.lower(): k for k in sorted(known)}


def resolve(path: str, parts: tuple[str, ...], known: frozenset[str] = frozenset(),
            pattern: str | None = None) -> tuple[str | None, str | None, str]:
    """(host, job_id, host_from) of a path (``parts``: its components)."""
    host, job_id = layout_host(parts)
    if pattern:
        m = compile_pattern(pattern).search(path)
        if m and m.group("host"):
            return m.group("host"), job_id, "pattern"
    if host is not None:
        return host, job_id, "path_layout"
    found = known_host(parts, known)
    if found is not None:
        return found, job_id, "path_known"
    return None, job_id, "none"


def known_hosts(node_lists: Iterable[str], names: Iterable[str]) -> frozenset[str]:
    """Host names from Slurm node lists (``node[01-04]``) and plain names.

    Each distinct list is expanded once: a corpus's job records and controller lines
    repeat the same few lists (llama3: 66k lists, 127 distinct, 2,048 hosts each;
    expanding every one took 28 s of the run's discovery)."""
    out: set[str] = set()
    for nl in set(node_lists):
        out.update(try_expand_hostlist(nl))
    # filtered once per distinct name (llama3: 880k names listed, 2,048 distinct)
    out = {h for h in out if h and h.lower() not in ("none", "none assigned")}
    out.update(n for n in names if n)
    return frozenset(out)
