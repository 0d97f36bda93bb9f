"""Which log source a file is, from its first lines (the path is only a hint).

Every source has a line signature; the sample of up to :data:`SAMPLE_LINES` non-blank
lines is scored against each, and the best-scoring source above :data:`MIN_SHARE` wins.
Header-led formats (sacct, nvidia-smi CSV, hosts.csv) are decided by their header row.
A tie or a weak score falls back to the path hint; nothing matching at all is
``unknown`` (its lines are counted as rejects, never dropped).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from itertools import islice
from pathlib import PurePosixPath

from faultline.pipeline.parsers import (
    nvbugreport,
    nvsmi,
    redfish,
    sacct,
    sacct_json,
    sel,
    slurm_nodes,
    slurmd,
    structured,
)
from faultline.pipeline.parsers.kernel_shapes import SHAPE_PATTERN

SAMPLE_LINES = 40
MIN_SHARE = 0.5

_KERNEL = re.compile(SHAPE_PATTERN)
_LINE_SIGNATURES: dict[str, re.Pattern[str]] = {
    # collector stamp, or NCCL / PyTorch / torchrun lines without one
    # (``srun --label``'s ``12: `` may open any of them)
    "job": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z |"
                      r"^(?: *\d+: )?(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?"
                      r"[\w.-]+:\d+:\d+ \[\d+\] NCCL |"
                      r"^(?: *\d+: )?(?:\[(?:rank|default)\d+\]:|[EWI]\d{4} \d\d:\d\d:\d\d)"),
    "trainer": re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
                          r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b"),
    "slurmctld": re.compile(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?"
                            r"(?:Z|[+-]\d\d:?\d\d)?\] "),
    "sel": re.compile(r"^\s*[0-9a-fA-F]+ \| (?:\d{1,2}/\d{1,2}/\d{2,4}|Pre-Init|"
                      r"\d{4}-\d\d-\d\d) *\|"),
}
# slurmd writes slurmctld's line shape: same signature, told apart by its wording
_LINE_SIGNATURES["slurmd"] = _LINE_SIGNATURES["slurmctld"]
# "time host tag: " -- a syslog line, even when its stamp looks like a collector's
_SYSLOG_TAG = re.compile(r"^\S+ \S+ (?:kernel|[\w./-]+(?:\[\d+\])?): ")
# a job line that is not a syslog one, in one match (every pattern above is anchored)
_JOB_NOT_SYSLOG = re.compile(
    f"(?!{_SYSLOG_TAG.pattern[1:]})(?:{_LINE_SIGNATURES['job'].pattern})")
_INVENTORY_HEADER = re.compile(r"\bpci\.bus_id\b|^index\s*,.*\b(?:uuid|serial)\b", re.I)
_HOSTS_HEADER = re.compile(r"^\s*(?:host|hostname|name)\s*,.*\b(?:alias|aliases|address|"
                           r"addresses|ip)\b", re.I)

# Slurm's default batch output name (``slurm-%j.out``, arrays ``slurm-%A_%a.out``): the
# job id is in the name (fileparse.context_from_path).
SLURM_OUT_RE = re.compile(r"(?:^|/)slurm-(\d+(?:_\d+)?)\.out(?:\.gz)?$")

_PATH_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:^|/)sacct[^/]*$"), "sacct"),
    (re.compile(r"(?:^|/)slurmctld[^/]*$"), "slurmctld"),
    (re.compile(r"(?:^|/)slurmd(?:[-_.][^/]*)?$"), "slurmd"),  # not slurmdbd
    (re.compile(r"(?:^|/)(?:sinfo|scontrol)[^/]*$"), "slurm_nodes"),
    (re.compile(r"(?:^|/)sel[^/]*$"), "sel"),
    (re.compile(r"(?:^|/)gpus?[^/]*\.csv(?:\.gz)?$"), "inventory"),
    (re.compile(r"(?:^|/)hosts\.csv(?:\.gz)?$"), "hosts"),
    (re.compile(r"(?:^|/)train[^/]*\.log(?:\.gz)?$"), "trainer"),
    (re.compile(r"(?:^|/)jobs/[^/]+/[^/]+$"), "job"),
    (SLURM_OUT_RE, "job"),
    (re.compile(r"(?:^|/)(?:kern|dmesg|messages|syslog|kmsg)[^/]*$"), "kernel"),
)
# A literal each hint's path contains (checked first: most paths fail it).
_HINT_NEEDLES: tuple[tuple[str, ...], ...] = (
    ("sacct",), ("slurmctld",), ("slurmd",), ("sinfo", "scontrol"), ("sel",), ("gpu",),
    ("hosts.csv",), ("train",), ("jobs/",),
    ("slurm-",),
    ("kern", "dmesg", "messages", "syslog", "kmsg"),
)


_JOB_LAYOUT = _PATH_HINTS[8][0]  # jobs/<id>/<name>: the one hint that is not the name's
assert _PATH_HINTS[8][1] == "job" and _HINT_NEEDLES[8] == ("jobs/",)
_NAME_HINTS_BEFORE = tuple((rx, src, nd) for (rx, src), nd in zip(
    _PATH_HINTS[:8], _HINT_NEEDLES[:8], strict=True))
_NAME_HINTS_AFTER = tuple((rx, src, nd) for (rx, src), nd in zip(
    _PATH_HINTS[9:], _HINT_NEEDLES[9:], strict=True))


def _as_posix(path: str) -> str:
    """``PurePosixPath(path).as_posix()``, without building the path when it would
    change nothing (no empty, ``.`` or trailing components)."""
    if path and "//" not in path and "/." not in path and not path.startswith("./") \
            and not path.endswith("/") and path != ".":
        return path
    return PurePosixPath(path).as_posix()


def path_hint(path: str) -> str | None:
    """The source a path's layout or file name suggests, or None: the first of
    :data:`_PATH_HINTS` whose pattern the path matches.

    Every hint but the job layout's is a pattern of the file name alone (``(?:^|/)``,
    then no ``/`` to the end), and a corpus repeats its file names (``kern.log``, a
    host's ``node0042.log`` in every job); the job layout (``jobs/<id>/<name>``)
    depends only on the directory when the name is not empty. Both are worked out
    once per distinct name and directory (a worker sniffs every file: llama3's 932k
    job logs, 4.8 -> 1 us a path)."""
    head, _, name = path.rpartition("/")
    before, after = _name_hints(name)
    if before is not None:
        return before
    if name:
        layout = _dir_is_job_layout(head)
    else:
        layout = "jobs/" in path and bool(_JOB_LAYOUT.search(path))
    return "job" if layout else after


@functools.lru_cache(maxsize=1 << 16)
def _name_hints(name: str) -> tuple[str | None, str | None]:
    """The first hint of a file name before the job layout's, and after it."""
    return _first_hint(name, _NAME_HINTS_BEFORE), _first_hint(name, _NAME_HINTS_AFTER)


@functools.lru_cache(maxsize=1 << 16)
def _dir_is_job_layout(head: str) -> bool:
    """Whether ``<head>/<name>`` is ``jobs/<id>/<name>`` for a name without ``/``."""
    return bool(_JOB_LAYOUT.search(head + "/x"))


def path_hints(paths: Iterable[str]) -> list[str | None]:
    """:func:`path_hint` of each path, in order: computed once on the driver and shared
    by the zone decision and the pre-pass, which each needed every path's (llama3's
    950k paths: 0.46 s, 0.97 s when every pattern ran on every path)."""
    return [path_hint(p) for p in paths]


def _first_hint(path: str, hints: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...]
                ) -> str | None:
    """The first of ``hints`` (pattern, source, needles) whose pattern ``path`` matches,
    tried only where a needle is in it, as :func:`path_hint` tries them."""
    for rx, source, needles in hints:
        if any(nd in path for nd in needles) and rx.search(path):
            return source
    return None


def sniff(lines: list[str], path: str = "") -> str:
    """The source of a file whose first lines are ``lines``."""
    sample = list(islice(filter(str.strip, lines[: SAMPLE_LINES * 4]), SAMPLE_LINES))
    hint = path_hint(_as_posix(path))
    if not sample:
        return hint or "unknown"
    first = sample[0].lstrip("\ufeff")
    head = "\n".join(sample[:12])  # one scan for the report banners instead of 20
    if nvbugreport.START in head and nvbugreport.looks_like_bug_report(sample):
        return "nvidia_bug_report"
    if (nvsmi.MARKER in head or "Attached GPUs" in head) and nvsmi.looks_like_nvsmi(sample):
        return "nvidia_smi"
    if _may_be_header(first):  # a header row: only then the header checks
        if sacct.looks_like_sacct(first):
            return "sacct"
        header = _header_source(first)
    else:
        header = None
    if first[:1] == "{" or first[:2] == "[{" or first.rstrip() == "[":
        # JSON (not a dmesg or slurmctld "[" line): decided by what its first lines hold
        head = "\n".join(lines[:400])
        if redfish.looks_like_redfish(head):
            return "sel"
        if sacct_json.looks_like_sacct_json(head):
            return "sacct"
    if header is not None:
        return header
    # journal JSON / export, JSON lines from a log store
    if (first.startswith("{") or "=" in first) and structured.looks_structured(sample):
        return "kernel"
    if hint and _confirms(hint, sample[:8]):  # the common case, decided cheaply
        return hint
    job_sig = _LINE_SIGNATURES["job"]
    scores = {name: sum(1 for ln in sample if rx.search(ln)) for name, rx in
              _LINE_SIGNATURES.items() if name != "job"}
    # A collector-stamped job line also fits the RFC 3339 kernel shape (its second
    # token reads as a host); only a syslog "host tag:" decides between the two.
    scores["job"] = sum(1 for ln in sample if _JOB_NOT_SYSLOG.match(ln))
    scores["kernel"] = sum(1 for ln in sample if _KERNEL.search(ln)
                           and (not job_sig.search(ln) or _SYSLOG_TAG.search(ln)))
    best = max(scores.values())
    if best < MIN_SHARE * len(sample):
        if hint == "job" and SLURM_OUT_RE.search(path):
            return "job"  # a batch script's output: any text, its lines are routine
        return hint if hint and scores.get(hint, 0) > 0 else "unknown"
    top = [name for name, s in scores.items() if s == best]
    if len(top) > 1 and hint in top:
        return hint
    if top[:2] == ["slurmctld", "slurmd"]:
        return "slurmd" if any(slurmd.SLURMD_MARKERS.match(ln) for ln in sample) else "slurmctld"
    return top[0]


def _may_be_header(first: str) -> bool:
    """False only for a first line that no header check (sacct's, ipmi-sel's, sinfo /
    scontrol's, the inventory's, hosts.csv's) can accept: a few substring tests, each
    implied by one check's pattern, instead of six regular expressions on every file.

    Only for ASCII text: there a case-insensitive pattern matches exactly where the
    lowered text does (outside ASCII, ``re.I`` also folds e.g. the long s to ``s``)."""
    if not first.isascii():
        return True
    low = first.lower()
    lead = low.lstrip()
    return ("|" in first or "jobid" in low or "REASON" in first or "pci.bus_id" in low
            or first.startswith("NodeName=") or low.startswith("index")
            or lead.startswith(("id", "host", "name")))


def _header_source(first: str) -> str | None:
    """The source a file's first line names as a header row (checked after sacct's
    and JSON's in :func:`sniff`), or None."""
    if sel.looks_like_freeipmi(first):
        return "sel"
    if slurm_nodes.looks_like_slurm_nodes(first):
        return "slurm_nodes"
    if _INVENTORY_HEADER.search(first):
        return "inventory"
    if _HOSTS_HEADER.search(first):
        return "hosts"
    return None


def _line_fits(source: str, line: str) -> bool:
    if source == "kernel":
        return bool(_KERNEL.search(line)) and (not _LINE_SIGNATURES["job"].search(line)
                                               or bool(_SYSLOG_TAG.search(line)))
    if source == "job":
        return _JOB_NOT_SYSLOG.match(line) is not None
    rx = _LINE_SIGNATURES.get(source)
    return bool(rx and rx.search(line))


def _confirms(source: str, lines: list[str]) -> bool:
    """The path's hint holds if most of the first lines fit that source's signature."""
    if source in ("sacct", "inventory", "hosts", "slurm_nodes"):
        return False  # header-led: decided by the header checks above
    need = MIN_SHARE * len(lines)  # more than this many lines must fit
    fits, left = 0, len(lines)
    for ln in lines:  # stop as soon as the outcome is known
        left -= 1
        if _line_fits(source, ln):
            fits += 1
            if fits > need:
                return True
        elif fits + left <= need:
            return False
    return fits > need
