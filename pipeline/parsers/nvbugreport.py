"""``nvidia-bug-report.log(.gz)``: what NVIDIA's collection script gathers from a node.

The script (``nvidia-bug-report.sh``, shipped with every driver) writes one file of
sections, each opened by a line of 44 underscores and a blank line, then a header that
says what follows: ``*** /var/log/messages`` (a file copied whole), ``dmesg:``,
``Scanning kernel log files for NVIDIA kernel messages:`` (grepped lines under
``  /var/log/messages:`` / ``  journalctl -b -0:`` sub-headers), ``journalctl -b -0 ...``,
or a command line such as ``/usr/bin/nvidia-smi --query``. Its prologue has
``uname: Linux <host> ...``, which names the host when the path does not. Read from the
script's own source (``append``, ``append_command``, ``search_string_in_logs``).

Kernel sections go through the kernel parser and ``nvidia-smi -q`` sections through
:mod:`faultline.pipeline.parsers.nvsmi`, with their line numbers in the whole file; the
rest of the report (lspci dumps, X configs, module lists) is routine. A kernel line
seen twice (in the copied ``/var/log/messages`` and again in the grep summary) gives
one event per line read, as the two copies are two lines of the file.
"""

from __future__ import annotations

import dataclasses
import re

from faultline.pipeline.parsers import kernel, nvsmi
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines

SEPARATOR = "_" * 44
START = "Start of NVIDIA bug report log file"
_UNAME = re.compile(r"^uname: \S+ (\S+) ")
_KERNEL_FILE = re.compile(r"^\*\*\* (/var/log/(?:kern|messages|syslog|kernel|dmesg|"
                          r"journal)[^ ]*)")
_KERNEL_CMD = re.compile(r"^(?:dmesg|journalctl\b[^:]*|Scanning kernel log files for NVIDIA "
                         r"kernel messages):?\s*$")
_SUBHEADER = re.compile(r"^  (?:/var/log/\S+|journalctl -b -?\d+):$|^No (?:suitable log|"
                        r"NVIDIA kernel messages)")


def looks_like_bug_report(lines: list[str]) -> bool:
    return any(START in ln for ln in lines[:8])


def _sections(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) 0-based line indexes of each section's body, after its separator."""
    starts = [i + 1 for i, ln in enumerate(lines) if ln.strip() == SEPARATOR]
    bounds = [0, *starts]
    return [(a, (bounds[k + 1] - 2) if k + 1 < len(bounds) else len(lines) - 1)
            for k, a in enumerate(bounds)]


def _header(lines: list[str], lo: int, hi: int) -> int | None:
    """Index of a section's first non-blank line (its header), if any."""
    for i in range(lo, hi + 1):
        if lines[i].strip():
            return i
    return None


def parse(text: str, ctx: ParseContext) -> FileParse:
    lines = split_lines(text)
    host = ctx.host
    for ln in lines[:40]:
        m = _UNAME.match(ln)
        if m and host is None:
            host = m.group(1)
            break
    ctx = dataclasses.replace(ctx, host=host)
    events: list[ParsedEvent] = []
    rejects: list[Reject] = []
    for lo, hi in _sections(lines):
        head = _header(lines, lo, hi)
        if head is None:
            continue
        title = lines[head]
        body = lines[head + 1:hi + 1]
        if nvsmi.MARKER in (ln.strip() for ln in body[:4]):
            fp = nvsmi.parse("\n".join(body), ctx, first_line=head + 2)
            events += fp.events
        elif _KERNEL_FILE.match(title) or _KERNEL_CMD.match(title):
            # sub-headers and the script's own notes are not kernel lines: blank them so
            # the kernel parser counts them as routine and line numbers stay put
            kept = ["" if _SUBHEADER.match(ln) else ln.strip() if title.startswith(
                "Scanning") else ln for ln in body]
            fp = kernel.parse("\n".join(kept), ctx)
            shift = head + 1
            for e in fp.events:
                e.line_no += shift
                e.line_end = (e.line_end or 0) + shift
            events += fp.events
            rejects += [Reject(r.line_no + shift, r.reason, r.raw) for r in fp.rejects
                        if not _KERNEL_CMD.match(title) or kernel_shaped(r.raw)]
    return FileParse(len(lines), events=events, rejects=rejects, shape="nvidia-bug-report")


def kernel_shaped(raw: str) -> bool:
    """A line of a command's output that looks like a log line but could not be read
    (worth a reject); the rest of a command's output is routine."""
    return bool(re.match(r"^\s*\[\s*\d+\.\d+\]|^\w{3} +\d+ \d\d:\d\d:\d\d |^\d{4}-\d\d-\d\dT",
                         raw))
