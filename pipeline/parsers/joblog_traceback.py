"""Python tracebacks in a job log (and a trainer's): a block from its opener to the
exception it raised, stepping over other ranks' interleaved lines, and its one event.

Split from :mod:`faultline.pipeline.parsers.joblog`; :mod:`...trainer` uses it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from faultline.pipeline.parsers.joblog_lines import cap
from faultline.pipeline.records import ParsedEvent

TRACEBACK_MAX_LINES = 5000  # a traceback longer than this is cut (and flagged)
FOREIGN_RUN_LIMIT = 500  # this many lines of other streams in a row end a traceback

TRACEBACK_OPEN = "Traceback (most recent call last)"


# --- tracebacks -------------------------------------------------------------------------------

# The last line of a traceback: ``SomeError: message`` (dotted module path allowed).
EXC_LINE_RE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::[ \t]?(.*))?$")
_FRAME_RE = re.compile(r'^\s+File "([^"]*)", line (\d+)(?:, in (.+))?')
_CHAIN_OPENERS = (
    "During handling of the above exception",
    "The above exception was the direct cause",
    TRACEBACK_OPEN,
)


@dataclass(slots=True)
class TracebackBlock:
    """A Python traceback found from its opener: where it ends and what it raised."""

    start: int  # 0-based index of the ``Traceback`` line
    end: int  # 0-based index of its last line (the exception line when found)
    own: list[int]  # 0-based indices of the block's own lines (interleaved ones excluded)
    exc_lines: list[int]  # 0-based indices of its exception lines (chained ones too)
    exc_type: str | None
    exc_message: str | None
    chain: list[tuple[str, str | None]]  # earlier exceptions of a chained traceback
    last_frame: str | None
    truncated: bool
    text: str


def _is_body(content: str) -> bool:
    return not content.strip() or content[0] in " \t" or content.startswith(_CHAIN_OPENERS)


def collect_traceback(
    lines: list[str],
    start: int,
    split: Callable[[str], tuple[str | None, str]],
    max_lines: int = TRACEBACK_MAX_LINES,
) -> TracebackBlock:
    """Follow a traceback from its opener at ``lines[start]`` to its exception line.

    ``split(line)`` gives ``(stream_key, content)``: lines of another stream (another
    rank's ``[rankN]:`` prefix) interleaved with this one are stepped over; lines of the
    same stream are the traceback's own. Chained tracebacks (``During handling of the
    above exception ...``) stay one block; the last exception is the block's. A block
    that stops before its exception line (cut log, foreign text) is ``truncated``.
    """
    key, first = split(lines[start])
    own = [start]
    texts = [first]
    exc_lines: list[int] = []
    chain: list[tuple[str, str | None]] = []
    exc: tuple[str, str | None] | None = None
    last_frame: str | None = None
    limit = min(len(lines), start + max_lines)
    j = start + 1
    foreign = 0
    while j < limit:
        k, content = split(lines[j])
        if k != key:
            foreign += 1
            if foreign > FOREIGN_RUN_LIMIT:
                break
            j += 1
            continue
        foreign = 0
        if _is_body(content):
            if m := _FRAME_RE.match(content):
                last_frame = f"{m.group(1)}:{m.group(2)}" + (
                    f" in {m.group(3)}" if m.group(3) else "")
            own.append(j)
            texts.append(content)
            j += 1
            continue
        m = EXC_LINE_RE.match(content.rstrip())
        if m is None:
            break
        exc = (m.group(1), m.group(2))
        own.append(j)
        exc_lines.append(j)
        texts.append(content)
        nxt = _next_own(lines, j + 1, key, split, limit)
        if nxt is None or not split(lines[nxt])[1].startswith(_CHAIN_OPENERS[:2]):
            break
        chain.append(exc)
        exc = None
        j += 1
    # Blank lines at the end (a cut log) are not part of the block.
    while len(own) > 1 and not texts[-1].strip():
        own.pop()
        texts.pop()
    exc_type, exc_message = exc if exc else (None, None)
    return TracebackBlock(
        start=start, end=own[-1], own=own, exc_lines=exc_lines, exc_type=exc_type,
        exc_message=exc_message.strip() if exc_message is not None else None, chain=chain,
        last_frame=last_frame, truncated=exc is None, text="\n".join(texts),
    )


def _next_own(lines: list[str], j: int, key: str | None,
              split: Callable[[str], tuple[str | None, str]], limit: int) -> int | None:
    """Index of the next non-blank line of stream ``key`` at or after ``j``."""
    foreign = 0
    while j < limit and foreign <= FOREIGN_RUN_LIMIT:
        k, content = split(lines[j])
        if k == key:
            if content.strip():
                return j
            foreign = 0
        else:
            foreign += 1
        j += 1
    return None



def traceback_event(block: TracebackBlock, ts: int | None, quality: str, rank: int | None,
                    host: str | None, job_id: str | None) -> ParsedEvent:
    """The one ``traceback`` event of a block (lines start..end)."""
    attrs: dict = {"exc_type": block.exc_type, "exc_message": block.exc_message}
    if block.chain:
        attrs["chain"] = [{"exc_type": t, "exc_message": m} for t, m in block.chain]
    if block.last_frame:
        attrs["last_frame"] = block.last_frame
    if block.truncated:
        attrs["truncated"] = True
    return ParsedEvent(
        line_no=block.start + 1, line_end=block.end + 1, kind="traceback",
        message=cap(block.text), ts=ts, ts_quality=quality, host=host, job_id=job_id,
        rank=rank, attrs=attrs,
    )
