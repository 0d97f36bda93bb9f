"""PyTorch NCCL Flight Recorder dumps (pickle or JSON) to typed records.

A rank's dump is what ``TORCH_NCCL_DUMP_ON_TIMEOUT`` writes to
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` plus the rank (``nccl_trace_rank_12``, ``..._dump_12``).
The field names are PyTorch's, from ``torch/csrc/distributed/c10d/FlightRecorder.hpp``
(https://github.com/pytorch/pytorch/blob/00f0e2f66801e216038f15f885bcdd4f3d955233/torch/csrc/distributed/c10d/FlightRecorder.hpp,
BSD-3-Clause): the top-level dict has ``version`` (2.x), ``pg_config`` (group name ->
``name``, ``desc``, ``ranks`` as the string ``"[0, 1]"``), ``pg_status`` (``pg_id`` ->
``last_enqueued_collective``/``last_started_collective``/``last_completed_collective``),
``nccl_version`` or ``comm_lib_version``, and ``entries``, each with ``record_id``,
``pg_id``, ``process_group`` (``(name, desc)``), ``collective_seq_id``, ``p2p_seq_id``,
``op_id``, ``profiling_name`` (``nccl:all_reduce``, ``nccl:send 0->1``), ``state``
(``scheduled``/``started``/``completed``), ``time_created_ns``,
``time_discovered_started_ns``, ``time_discovered_completed_ns``, ``input_sizes``,
``input_dtypes``, ``output_sizes``, ``output_dtypes``, ``timeout_ms``, ``is_p2p``,
``retired`` and ``frames``. The JSON variant (``dump_json``) has the same keys; its
``pg_status`` values are strings and it leaves ``entries`` out when there are none.

The pickle is read by :mod:`faultline.pipeline.safepickle` only. A dump is binary, so
it is one line for the accounting (like an archive is zero: it has no text lines of its
own): that line is its one ``flight_recorder_dump`` event, or a reject with the reason
it could not be read. The event's attrs hold the part of the dump the cross-rank
analysis (:mod:`faultline.classifiers.hangs`) needs: per group its members, status and
the entries from just before the first unfinished one on (:data:`TAIL_DONE`,
:data:`TAIL_OPEN`), so a 10k-entry ring buffer becomes a few dozen entries.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.safepickle import UnsafePickle, loads

# a dump's name: the prefix PyTorch was given, then the rank
RANK_IN_NAME = re.compile(r"(?:rank|dump|trace)[_-]?(\d{1,7})(?:\.(?:pkl|pickle|json))?(?:\.gz)?$")
STATES = ("scheduled", "started", "completed")
TAIL_DONE = 4  # completed entries kept before a group's first unfinished one
TAIL_OPEN = 64  # unfinished entries kept (the first ones: the hang is at the first)
_P2P = re.compile(r"(send|recv)\s+(\d+)\s*(?:->|<-)\s*(\d+)")


class DumpError(ValueError):
    """Not a readable Flight Recorder dump (the reason says why)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One collective or p2p op as a rank's ring buffer recorded it."""

    pg_name: str
    pg_desc: str
    pg_id: int | None
    collective_seq_id: int
    p2p_seq_id: int
    is_p2p: bool
    op: str  # profiling_name without the ``nccl:`` prefix
    state: str
    input_sizes: list
    input_dtypes: list
    output_sizes: list
    output_dtypes: list
    time_created_ns: int | None
    retired: bool

    def compact(self) -> list:
        return [self.collective_seq_id, self.p2p_seq_id, self.is_p2p, self.op, self.state,
                self.input_sizes, self.input_dtypes, self.output_sizes, self.output_dtypes,
                self.time_created_ns]


@dataclass(frozen=True, slots=True)
class Group:
    """A process group as one rank's dump describes it."""

    name: str
    desc: str
    pg_id: int | None
    ranks: tuple[int, ...]
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True, slots=True)
class Dump:
    """One rank's dump."""

    rank: int | None
    version: str
    comm_version: str | None
    groups: dict[str, Group]
    entries: list[Entry]


def looks_like_dump(data: bytes) -> str | None:
    """``pickle`` or ``json`` when the bytes are a Flight Recorder dump, by content."""
    # ``entries`` is left out of a dump without collectives (JSON: when there are none);
    # ``version`` and ``pg_config`` are always written (FlightRecorder.cpp, dump/dump_json)
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:  # PROTO 2..5
        head = data[:1 << 16]
        if b"pg_config" in head and b"version" in head:
            return "pickle"
        return None
    start = data[:64].lstrip()
    if start[:1] == b"{" and b'"pg_config"' in data[:1 << 20] and b'"version"' in data[:1 << 20]:
        return "json"
    return None


def rank_from_path(path: str) -> int | None:
    m = RANK_IN_NAME.search(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def read_dump(data: bytes, path: str) -> Dump:
    """The typed dump, or :class:`DumpError`."""
    kind = looks_like_dump(data)
    if kind == "pickle":
        try:
            raw = loads(data)
        except UnsafePickle as e:
            raise DumpError(f"flight recorder pickle refused: {e}") from None
    elif kind == "json":
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError) as e:
            raise DumpError(f"flight recorder JSON unreadable: {type(e).__name__}") from None
    else:
        raise DumpError("not a flight recorder dump")
    if not isinstance(raw, dict) or not isinstance(raw.get("entries", []), list):
        raise DumpError("flight recorder dump without an entries list")
    version = str(raw.get("version", ""))
    if not version.startswith("2."):
        raise DumpError(f"flight recorder dump version {version or 'missing'} (2.x read)")
    status = raw.get("pg_status") or {}
    groups: dict[str, Group] = {}
    for key, cfg in (raw.get("pg_config") or {}).items():
        if not isinstance(cfg, dict):
            raise DumpError("pg_config entry is not a dict")
        name = str(cfg.get("name", key))
        groups[name] = Group(name, str(cfg.get("desc", "")), None, _ranks(cfg.get("ranks")),
                             None, None, None)
    entries = [_entry(e) for e in raw.get("entries") or []]
    ids = {e.pg_name: e.pg_id for e in entries}
    for name, g in list(groups.items()):
        pg_id = ids.get(name)
        if pg_id is None and name.isdigit():
            pg_id = int(name)
        st = status.get(str(pg_id)) if isinstance(status, dict) else None
        st = st if isinstance(st, dict) else {}
        groups[name] = Group(name, g.desc, pg_id, g.ranks, _int(st.get("last_enqueued_collective")),
                             _int(st.get("last_started_collective")),
                             _int(st.get("last_completed_collective")))
    return Dump(rank_from_path(path), version,
                _str(raw.get("nccl_version") or raw.get("comm_lib_version")), groups, entries)


def parse(data: bytes, ctx: ParseContext) -> FileParse:
    """A dump file as one event (or one reject): see the module docstring."""
    try:
        dump = read_dump(data, ctx.path)
    except DumpError as e:
        return FileParse(lines=1, rejects=[Reject.of(1, str(e), "")], shape="flight_recorder")
    if dump.rank is None:
        return FileParse(lines=1, rejects=[Reject.of(
            1, "flight recorder dump without a rank in its file name", "")],
            shape="flight_recorder")
    attrs = summary(dump)
    host = dump_host(ctx)
    created = [e.time_created_ns for e in dump.entries if e.time_created_ns]
    ts = max(created) // 1000 if created else None
    event = ParsedEvent(1, "flight_recorder_dump",
                        f"Flight Recorder dump of rank {dump.rank}: {len(dump.groups)} process "
                        f"groups, {len(dump.entries)} entries", ts=ts,
                        ts_quality="exact" if ts is not None else "untimed",
                        host=host, job_id=ctx.job_id, rank=dump.rank, attrs=attrs)
    return FileParse(lines=1, events=[event], shape=f"flight_recorder_{dump.version}")


def dump_host(ctx: ParseContext) -> str | None:
    """The host a dump's path gives: the layout reads ``jobs/<id>/<name>`` as a job log
    named after its host, but a dump is named after its rank; ``jobs/<id>/<host>/<name>``
    names the host by its directory."""
    stem = ctx.path.rsplit("/", 1)[-1].split(".")[0]
    if ctx.host != stem:
        return ctx.host
    parent = ctx.path.rsplit("/", 2)[-2] if ctx.path.count("/") >= 2 else ""
    return parent if parent and parent != ctx.job_id else None


def summary(dump: Dump) -> dict:
    """What the cross-rank analysis reads of one dump (the event's attrs)."""
    by_group: dict[str, list[Entry]] = {}
    for e in dump.entries:
        by_group.setdefault(e.pg_name, []).append(e)
    groups = {}
    for name in sorted(set(dump.groups) | set(by_group)):
        g = dump.groups.get(name)
        entries = by_group.get(name, [])
        coll = sorted((e for e in entries if not e.is_p2p), key=lambda e: e.collective_seq_id)
        p2p = sorted((e for e in entries if e.is_p2p), key=lambda e: e.p2p_seq_id)
        done = [e.collective_seq_id for e in coll if e.state == "completed"]
        groups[name] = {
            "pg_id": g.pg_id if g else (entries[0].pg_id if entries else None),
            "desc": g.desc if g else (entries[0].pg_desc if entries else ""),
            # as PyTorch writes it, one string: a list of ints per rank and group
            # would cost 2,048 ranks x 2,048 members Python ints in the analysis
            "ranks": json.dumps(list(g.ranks)) if g else "[]",
            "last_enqueued": _first(g and g.last_enqueued,
                                    coll[-1].collective_seq_id if coll else None),
            "last_completed": _first(g and g.last_completed, max(done) if done else None),
            "tail": [e.compact() for e in _tail(coll)],
            "p2p_tail": [e.compact() for e in _tail(p2p)],
        }
    return {"rank": dump.rank, "version": dump.version, "comm_version": dump.comm_version,
            "entries": len(dump.entries), "groups": groups}


def _tail(entries: list[Entry]) -> list[Entry]:
    first_open = next((i for i, e in enumerate(entries) if e.state != "completed"),
                      len(entries))
    return entries[max(0, first_open - TAIL_DONE):first_open + TAIL_OPEN]


def p2p_peer(op: str, rank: int) -> int | None:
    """The other end of ``send 3->5`` / ``recv 5<-3`` as seen from ``rank``."""
    m = _P2P.search(op)
    if not m:
        return None
    a, b = int(m.group(2)), int(m.group(3))
    return b if a == rank else a if b == rank else None


def _entry(e: object) -> Entry:
    if not isinstance(e, dict):
        raise DumpError("entry is not a dict")
    pg = e.get("process_group") or ("", "")
    if not isinstance(pg, (list, tuple)) or len(pg) != 2:
        raise DumpError("entry process_group is not (name, desc)")
    state = str(e.get("state", ""))
    if state not in STATES:
        raise DumpError(f"entry state {state!r}")
    seq = _int(e.get("collective_seq_id"))
    if seq is None:
        raise DumpError("entry without collective_seq_id")
    name = str(e.get("profiling_name") or "")
    return Entry(str(pg[0]), str(pg[1]), _int(e.get("pg_id")), seq,
                 _int(e.get("p2p_seq_id")) or 0, bool(e.get("is_p2p", False)),
                 name.removeprefix("nccl:"), state,
                 _plain(e.get("input_sizes")), _plain(e.get("input_dtypes")),
                 _plain(e.get("output_sizes")), _plain(e.get("output_dtypes")),
                 _int(e.get("time_created_ns")), bool(e.get("retired", False)))


def _ranks(v: object) -> tuple[int, ...]:
    """``pg_config`` ranks: PyTorch writes the string ``"[0, 1, 2]"``; a list is read too."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise DumpError(f"pg_config ranks {v[:40]!r}") from None
    if not isinstance(v, list) or not all(isinstance(r, int) for r in v):
        raise DumpError("pg_config ranks is not a list of ints")
    return tuple(v)


def _plain(v: object) -> list:
    return v if isinstance(v, list) else []


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _str(v: object) -> str | None:
    if isinstance(v, (list, tuple)):
        return ".".join(str(x) for x in v)
    return None if v is None else str(v)


def _first(a: int | None, b: int | None) -> int | None:
    return a if a is not None else b
