"""Attempts that ended while their run went on -> interruptions with a root cause.

For each interruption the events of its window (on the attempt's hosts, or of its job)
are ranked: the earliest event of the most specific tier is the root cause
(``classifiers.signals``); free text (drain reasons, tracebacks) goes to the learned
models; NCCL peer addresses lead back to the host that vanished; when only watchdog
timeouts exist, the host whose ranks never reported is the straggler. Everything else
in the window is kept as evidence with its role.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import duckdb

from faultline.classifiers import causes, fr_tier, memo, signals
from faultline.classifiers.culprits import WATCHDOG_JOIN, Inventory, Watchdog, placement, straggler
from faultline.classifiers.signals import Rule
from faultline.db import transaction
from faultline.pipeline.hostlist import try_expand_hostlist
from faultline.pipeline.parsers.hosts import HostResolver, normalize_name
from faultline.schemas import arrowrows
from faultline.schemas.tables import INTERRUPTION_EVIDENCE, INTERRUPTIONS
from faultline.schemas.taxonomy import PLANNED, UNATTRIBUTED, load_taxonomy
from faultline.schemas.types import LogicalType

BEFORE_S = 2400  # how far before the failure a root cause may lie
AFTER_S = 120  # clock skew allowance after the failure
DRAIN_AFTER_S = 7200  # drain reasons written after the failure still explain it
FLAP_S = 60  # a link down followed by link up this soon recovered (NCCL retries cover it)
NOT_EVIDENCE = ("train_step", "checkpoint", "nccl_bootstrap", "gpu_inventory",
                "host_alias", "job_record", "boot", "nvidia_driver_load", "gpu_serial")
# Kinds :func:`decide` never looks at: no rule names them (``signals``), and neither
# the planned check, the text models nor the Flight Recorder tier reads them. Half of
# llama3's window events are orderly ``reboot`` markers (91k of 191k), so they are left
# in the database rather than read into Python.
NOT_READ = ("reboot",)
SYMPTOMS = ("nccl_watchdog", "nccl_watchdog_progress", "nccl_heartbeat", "nccl_warn",
            "nccl_error", "nccl_ib_error", "job_cancelled", "process_exit", "cuda_error",
            "node_not_responding", "node_down", "job_killed", "job_requeue", "traceback",
            "train_error")


@dataclass(slots=True)  # 100k of them on llama3: no per-instance __dict__
class Candidate:
    """One event of an interruption's window. ``raw_attrs`` is the event's ``attrs``
    as stored (JSON text) or already a dict; :attr:`attrs` parses the text on first
    use: few candidates are ever asked (drains, kills, Xids, the root), and the
    parsed dicts of all of them were llama3's largest Python structure (99 MB)."""

    event_id: str
    ts: float
    host: str | None
    kind: str
    xid: int | None
    message: str
    raw_attrs: dict | str | None
    gpu_index: int | None
    gpu_serial: str | None
    device: str | None
    rule: Rule | None = None

    @property
    def attrs(self) -> dict:
        if not isinstance(self.raw_attrs, dict):
            self.raw_attrs = json.loads(self.raw_attrs) if self.raw_attrs else {}
        return self.raw_attrs


@dataclass
class Decision:
    component: str
    family: str | None
    rule_id: str
    confidence: float
    root: Candidate | None = None
    culprit_host: str | None = None
    culprit_gpu: int | None = None
    culprit_serial: str | None = None
    surfaced_host: str | None = None  # where the root was logged (any component)
    surfaced_gpu: int | None = None
    evidence: dict[str, str] = field(default_factory=dict)  # event_id -> role


def interruption_id(run: str, job_id: str, started_us: int) -> str:
    return "i-" + hashlib.sha256(f"{run}|{job_id}|{started_us}".encode()).hexdigest()[:12]


def build(con: duckdb.DuckDBPyConnection, run: str | None = None,
          overrides: Path | None = None) -> int:
    """Rebuild ``interruptions`` and ``interruption_evidence`` in one transaction."""
    with transaction(con):
        return rebuild(con, run, overrides)


def rebuild(con: duckdb.DuckDBPyConnection, run: str | None = None,
            overrides: Path | None = None) -> int:
    """Replace ``interruptions`` and ``interruption_evidence`` from the events, inside
    the caller's transaction (ingest loads the shards and rebuilds in one, so a killed
    run never leaves new events beside old interruptions).

    ``run`` (stored name, or job name when unambiguous) replaces that run's rows only;
    a name that fits no run raises :class:`faultline.runs.RunError` and the caller's
    transaction rolls back. Stored overrides (the ``overrides`` file's rows imported
    first) win over the classifiers. Returns the number of interruptions built."""
    from faultline.classifiers import overrides as ov
    from faultline.runs import resolve

    if overrides is not None:
        ov.put(con, ov.read_csv(overrides))
    if run is not None:
        run = resolve(con, run)
    attempts = con.execute("""
        SELECT run, job_id, epoch_us(started_at), epoch_us(ended_at), state, nodelist,
               admin_comment, attempt
        FROM attempts ORDER BY run, started_at, job_id
    """).fetchall()
    by_run: dict[str, list[tuple]] = defaultdict(list)
    for a in attempts:
        by_run[a[0]].append(a)
    windows = []
    for name, rows in by_run.items():
        if run is not None and name != run:
            continue
        for cur, nxt in pairwise(rows):
            if cur[3] is None:
                continue
            windows.append((interruption_id(name, cur[1], cur[2]), cur, nxt))
    resolver = _resolver(con)
    if run is None:
        con.execute("DELETE FROM interruption_evidence")
        con.execute("DELETE FROM interruptions")
    else:  # this run's rows only: naming a run never costs another run its rows
        con.execute("DELETE FROM interruption_evidence WHERE interruption_id IN "
                    "(SELECT interruption_id FROM interruptions WHERE run = ?)", [run])
        con.execute("DELETE FROM interruptions WHERE run = ?", [run])
    if windows:
        # one run's rebuild keeps the other runs' stored text answers
        _build(con, windows, resolver, ov.by_id(con), retain=run is None)
    return len(windows)


def _resolver(con: duckdb.DuckDBPyConnection) -> HostResolver:
    """Addresses (from NCCL bring-up lines and hosts.csv) -> host."""
    r = HostResolver()
    # One bring-up line per rank and attempt: only the distinct (host, address) pairs
    # are read, so memory does not grow with the number of attempts. They are made
    # distinct before the address is wrapped as JSON (medium: a million lines, a
    # thousand pairs; the wrapping is one-to-one), which is then only the sort key.
    for host, attrs in con.execute("""
            SELECT host, json_object('address', address) FROM (
                SELECT DISTINCT host, attrs->>'address' AS address FROM events
                WHERE kind = 'nccl_bootstrap' AND host IS NOT NULL)
            UNION ALL
            SELECT DISTINCT host, attrs FROM events
            WHERE kind = 'host_alias' AND host IS NOT NULL
            ORDER BY 1, 2""").fetchall():
        a = json.loads(attrs) if attrs else {}
        for addr in (a.get("address"), *a.get("addresses", ()), *a.get("aliases", ())):
            if addr:
                r.add(addr, a.get("host") or host)
    return r


def _build(con, windows, resolver: HostResolver, overrides, retain: bool = True) -> None:
    tax = load_taxonomy()
    # a job's node list is the same in each of its attempts (a 2,048-host job fails
    # hundreds of times): expanded once per distinct list, each window given its copy
    expanded: dict[str, list[str]] = {}
    for _iid, cur, _nxt in windows:
        if (cur[5] or "") not in expanded:
            expanded[cur[5] or ""] = try_expand_hostlist(cur[5] or "")
    con.execute("CREATE OR REPLACE TEMP TABLE wh (iid VARCHAR, host VARCHAR)")
    # each attempt's hosts, one window at a time: all of them at once were a million
    # (window, host) tuples on llama3 (60 MB) held through the whole rebuild
    for i in range(0, len(windows), 64):
        iids, names = [], []
        for iid, cur, _nxt in windows[i:i + 64]:
            hosts = expanded[cur[5] or ""]
            iids += [iid] * len(hosts)
            names += hosts
        if names:
            con.register("wh_rows", arrowrows.table({"iid": (iids, LogicalType.STRING),
                                                     "host": (names, LogicalType.STRING)}))
            con.execute("INSERT INTO wh SELECT * FROM wh_rows")
            con.unregister("wh_rows")
    _window_table(con, windows)
    skipped = ", ".join(f"'{k}'" for k in (*NOT_EVIDENCE, *NOT_READ))
    result = con.execute(f"""
        SELECT w.iid, e.event_id, epoch_us(e.ts), e.host, e.kind, e.xid, e.message,
               e.attrs, e.gpu_index, e.gpu_serial, e.device
        FROM w JOIN events e ON epoch_us(e.ts) BETWEEN greatest(w.started, w.lo) AND w.hi
        WHERE e.kind NOT IN ({skipped})
          AND e.kind NOT IN ('nccl_watchdog', 'nccl_watchdog_progress', 'job_cancelled',
                             'process_exit', 'nccl_warn')
          AND (e.job_id = w.job_id OR EXISTS (
                SELECT 1 FROM wh WHERE wh.iid = w.iid AND wh.host = e.host)
               OR (e.source = 'slurmctld' AND (e.attrs->>'job_id' = w.job_id
                   OR e.kind IN ('reservation', 'operator_kill'))))
        ORDER BY w.iid, e.ts, e.event_id
    """)  # noqa: S608 - kinds are constants of this module
    cands: dict[str, list[Candidate]] = defaultdict(list)
    # in batches: the rows as tuples and as Candidates are never in memory together
    while batch := result.fetchmany(8192):
        for iid, eid, ts, host, kind, xid, msg, attrs, gi, gs, dev in batch:
            cands[iid].append(Candidate(eid, ts / 1e6, host, kind, xid, msg, attrs, gi, gs,
                                        dev))
    watchdog_hosts = dict(con.execute(f"""
        SELECT w.iid, count(DISTINCT coalesce(e.host, '')) {WATCHDOG_JOIN} GROUP BY w.iid
    """).fetchall())
    texts = _classify_texts(con, cands, retain)
    progress = _progress(con)
    inventory = Inventory.load(con)
    hangs = fr_tier.load(con)  # Flight Recorder verdicts: above the straggler guess
    out_rows, ev_rows = [], []
    for iid, cur, _nxt in windows:
        failed = cur[3] / 1e6
        hosts = list(expanded[cur[5] or ""])
        watchdog = Watchdog(con, iid, watchdog_hosts.get(iid, 0))
        d = decide(cands.get(iid, []), watchdog, hosts, failed, cur, texts, resolver)
        fr_tier.apply(d, fr_tier.for_attempt(hangs, cur[1], cur[2], cur[3]),
                      cands.get(iid, []))
        if iid in overrides:
            comp, _note = overrides[iid]
            d.component, d.rule_id, d.confidence = comp, "override", 1.0
        lost, down = progress.get(iid, (None, None))
        where = placement(d.component, d.culprit_host, d.culprit_gpu, d.culprit_serial,
                          d.surfaced_host, d.surfaced_gpu, inventory, failed)
        out_rows.append({
            "interruption_id": iid, "run": cur[0], "job_id": cur[1],
            "failed_at": cur[3], "planned": d.component == PLANNED,
            "component": d.component, "category": tax.category_of(d.component),
            "signal_family": d.family, **where,
            "root_event_id": d.root.event_id if d.root else None, "rule_id": d.rule_id,
            "confidence": round(d.confidence, 4), "lost_seconds": lost,
            "downtime_seconds": down, "taxonomy_version": tax.version,
        })
        ev_rows += [(iid, eid, role) for eid, role in d.evidence.items()]
    con.register("new_interruptions",
                 arrowrows.rows_table(out_rows, INTERRUPTIONS))
    con.execute("INSERT INTO interruptions SELECT * FROM new_interruptions")
    con.unregister("new_interruptions")
    # kept as the temp table ``ev`` too: what the symptoms must not repeat
    con.register("new_evidence", arrowrows.rows_table(
        [dict(zip(("interruption_id", "event_id", "role"), r, strict=True)) for r in ev_rows],
        INTERRUPTION_EVIDENCE))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE ev AS SELECT * FROM new_evidence")
    finally:
        con.unregister("new_evidence")
    con.execute("INSERT INTO interruption_evidence SELECT * FROM ev")
    _symptoms_and_history(con)


def _classify_texts(con: duckdb.DuckDBPyConnection, cands: dict[str, list[Candidate]],
                    retain: bool = True) -> dict[str, tuple[str, float, str]]:
    """Drain reasons, admin comments and tracebacks through the learned models (or
    their stored answers, :mod:`faultline.classifiers.memo`)."""
    reasons = {c.event_id: r for cs in cands.values() for c in cs
               if c.kind == "node_drain" and (r := drain_reason(c)) is not None}
    tracebacks = {c.event_id: c.message for cs in cands.values() for c in cs
                  if c.kind == "traceback"}
    out: dict[str, tuple[str, float, str]] = {}
    used = {"reason": list(reasons.values()), "traceback": list(tracebacks.values())}
    for task, texts in (("reason", reasons), ("traceback", tracebacks)):
        for eid, p in zip(texts, memo.classify(con, task, used[task]), strict=True):
            out[eid] = (p.label, p.confidence, p.model)
    if retain:
        memo.retain(con, used)
    return out


def drain_reason(c: Candidate) -> str | None:
    """The reason text a drain event carries, or None. ``state set to DRAINING`` says
    that a node is being drained, not why: a state change without a reason is a
    symptom (or nothing), never text for the models, so it can neither decide nor
    contradict a root."""
    reason = c.attrs.get("reason")
    if reason is not None:
        text = str(reason).strip()
        return text if text.lower() not in _NO_REASON else None
    if "state" in c.attrs:
        return None
    return c.message.strip() or None


_NO_REASON = frozenset({"", "none", "(null)", "n/a"})  # how Slurm writes "no reason"


_PEER = re.compile(r"from peer ([0-9a-fA-F:.]+)")


def decide(cands: list[Candidate], watchdog: Mapping[str, set[int]], hosts: list[str],
           failed: float, attempt: tuple, texts: dict, resolver: HostResolver) -> Decision:
    """The root cause of one interruption from its window's events."""
    root_limit = failed + AFTER_S
    # planned: an operator (uid 0) killed the job, or a maintenance reservation began
    kill = [c for c in cands if c.kind == "operator_kill"
            and str(c.attrs.get("uid")) in ("0", "root") and c.ts <= root_limit]
    comment = (attempt[6] or "").lower()
    if kill or comment.startswith("planned"):
        d = Decision(PLANNED, "maintenance",
                     "planned.operator_kill" if kill else "planned.admin_comment", 0.95,
                     root=kill[0] if kill else None)
        for c in cands:
            if c.kind in ("reservation", "operator_kill", "node_reboot"):
                d.evidence[c.event_id] = "corroborating"
        if kill:
            d.evidence[kill[0].event_id] = "root"
        return d
    ranked: list[tuple[int, float, Candidate, Rule]] = []
    seen_79: dict[tuple[str | None, str | None], float] = {}
    ups = [(c.host, c.device, c.ts) for c in cands if c.kind == "ib_link_up"]
    for c in cands:
        if c.kind == "ib_link_down" and any(
                h == c.host and dev == c.device and 0 <= t - c.ts <= FLAP_S
                for h, dev, t in ups):
            continue  # a link that came back within seconds is a recovered flap
        if c.ts > root_limit and c.kind != "node_drain":
            continue
        if c.kind == "node_drain":
            continue  # free text: corroboration, or the cause when nothing else is
        if c.kind == "traceback":
            label = texts.get(c.event_id)
            if label:
                rule = Rule(f"text.traceback:{label[2]}", "traceback", label[0],
                            "traceback", signals.SOFTWARE, label[1])
                ranked.append((rule.tier, c.ts, c, rule))
            continue
        rule = signals.rule_for(c.kind, c.message, c.xid, _attrs_json(c))
        if rule is None:
            continue
        if c.xid == 79 and c.kind in ("xid", "gpu_fallen_off_bus"):  # same fault
            seen_79[(c.host, c.device)] = c.ts
        if c.kind == "xid" and c.xid == 119 and any(
                h == c.host and dev == c.device and 0 <= c.ts - t <= 120
                for (h, dev), t in seen_79.items()):
            continue  # GSP cannot answer once the GPU is gone: a consequence of the 79
        ranked.append((rule.tier, c.ts, c, rule))
    # drain reasons written for this failure: on its hosts, after it began to fail
    mine = [c for c in cands if c.kind == "node_drain" and c.ts >= failed - 300
            and (c.host in hosts or not hosts)]
    drains = [c for c in mine if c.event_id in texts]
    stated = {c.event_id for c in mine if c.event_id not in texts}
    # what the job's end wrote is no cause while something before it explains the stop
    dying, late = causes.consequences([(t, ts, c) for t, ts, c, _r in ranked], failed,
                                      bool(watchdog) or bool(drains), len(hosts))
    not_roots = dying | late
    eligible = [r for r in ranked if r[2].event_id not in not_roots]
    after = _read_after(cands, hosts, root_limit, failed)
    if after and min((r[0] for r in eligible), default=signals.WATCHDOG) > signals.HOST:
        # nothing on a device or host before the stop, but the counters an operator
        # read from the job's hosts afterwards say what failed (nvidia-smi -q)
        root, rule = after[0]
        d = Decision(rule.component, rule.family, rule.rule_id + ".read_after",
                     rule.confidence * 0.9, root=root)
        _culprit(d, root, ranked, resolver)
    elif eligible:
        eligible.sort(key=lambda r: (r[0], r[1], r[2].event_id))
        tier, _ts, root, rule = eligible[0]
        d = Decision(rule.component, rule.family, rule.rule_id, rule.confidence, root=root)
        _culprit(d, root, ranked, resolver)
    elif watchdog:
        rid, host, gpu = straggler(watchdog, hosts)
        d = Decision("NCCL Watchdog Timeouts", "NCCL watchdog", rid, 0.6, culprit_host=host,
                     culprit_gpu=gpu, surfaced_host=host, surfaced_gpu=gpu)
        said = [c for c in drains if c.host == d.culprit_host]
        if said:  # a person looked at the straggler and wrote down why
            label, conf, model = texts[said[0].event_id]
            d.component, d.family = label, "drain reason"
            d.rule_id, d.confidence, d.root = f"text.reason:{model}", conf, said[0]
    elif drains:
        c = drains[0]
        label, conf, model = texts[c.event_id]
        d = Decision(label, "drain reason", f"text.reason:{model}", conf, root=c,
                     culprit_host=c.host, surfaced_host=c.host)
    elif dying:  # only the job dying on many hosts: it died of itself, where unknown
        _t, _ts, root, rule = min((r for r in ranked if r[2].event_id in dying),
                                  key=lambda r: (r[1], r[2].event_id))
        d = Decision(rule.component, rule.family, rule.rule_id + ".job_wide",
                     rule.confidence * 0.7, root=root)
    else:
        return Decision(UNATTRIBUTED, None, "none", 1.0)
    for c in cands:  # consequences, and drain state changes, are symptoms
        if c.event_id in not_roots or c.event_id in stated:
            d.evidence.setdefault(c.event_id, "symptom")
    if d.root is not None:
        d.evidence[d.root.event_id] = "root"
        if d.surfaced_host is None:
            d.surfaced_host, d.surfaced_gpu = d.root.host, d.root.gpu_index
        if d.root.kind == "node_drain" and d.culprit_gpu is None:
            d.culprit_gpu = _gpu_named_in(drain_reason(d.root) or "")
            if d.surfaced_host == d.culprit_host:
                d.surfaced_gpu = d.culprit_gpu
    d.component = _refine_memory(d, cands)
    # text and other signals either agree with the root or contradict it
    for c in drains:
        label, conf, _m = texts[c.event_id]
        if d.culprit_host and c.host != d.culprit_host:
            continue
        if label == d.component:
            d.evidence.setdefault(c.event_id, "corroborating")
            d.confidence = min(1.0, d.confidence + 0.05)
        elif conf >= 0.6:
            d.evidence.setdefault(c.event_id, "contradicting")
            d.confidence *= 0.8
    for c in cands:  # follow-on Xids of the culprit GPU (45, 154, 63...) corroborate
        if (c.kind == "xid" and d.root is not None and d.root.kind == "xid"
                and c.host == d.root.host and c.device == d.root.device
                and c.event_id not in d.evidence and c.ts <= root_limit):
            d.evidence[c.event_id] = "corroborating"
    for tier, _t, c, rule in ranked:
        if c.event_id in d.evidence:
            continue
        if rule.component == d.component:
            d.evidence[c.event_id] = "corroborating"
        elif tier <= signals.SOFTWARE and c.host == d.culprit_host:
            d.evidence[c.event_id] = "contradicting"
    return d


# GPU counters as nvidia-smi -q reports them: state that stays after the failure, so a
# report an operator collects from the broken node afterwards still tells what failed
READ_AFTER = ("gpu_row_remap_failure", "gpu_ecc_uncorrectable", "gpu_row_remap_pending",
              "gpu_retired_pages")


def _read_after(cands: list[Candidate], hosts: list[str], root_limit: float,
                failed: float) -> list[tuple[Candidate, Rule]]:
    """GPU health counters read on the attempt's hosts after its end (up to
    :data:`DRAIN_AFTER_S`), earliest first, with their rules."""
    out = []
    for c in cands:
        if c.kind in READ_AFTER and root_limit < c.ts <= failed + DRAIN_AFTER_S \
                and (c.host in hosts or not hosts):
            rule = signals.rule_for(c.kind, c.message, c.xid, _attrs_json(c) or "{}")
            if rule is not None:
                out.append((c, rule))
    return sorted(out, key=lambda cr: (cr[1].tier, cr[0].ts, cr[0].event_id))


def _attrs_json(c: Candidate) -> str | None:
    """The candidate's attrs as JSON for :func:`signals.rule_for`, None when it has none,
    without parsing (and keeping) the stored text of every event the rules look at."""
    if isinstance(c.raw_attrs, str):
        return c.raw_attrs if c.raw_attrs and c.raw_attrs != "{}" else None
    return json.dumps(c.raw_attrs) if c.raw_attrs else None


def _culprit(d: Decision, root: Candidate, ranked, resolver: HostResolver) -> None:
    """Where the root points: its host and GPU, the peer an NCCL error names, the node
    and device a trainer names. (``culprits.placement`` keeps it as the hardware
    suspect only for a hardware component.)"""
    d.culprit_host = d.surfaced_host = root.host
    d.culprit_gpu = d.surfaced_gpu = root.gpu_index
    d.culprit_serial = root.gpu_serial
    if root.kind == "nccl_ib_error":  # the peer that vanished is where the fault is
        m = _PEER.search(root.message)
        peer = root.attrs.get("peer") or (m.group(1) if m else None)
        if peer:
            host = resolver.resolve(normalize_name(str(peer)))
            d.culprit_host = host if host and host != normalize_name(str(peer)) else None
        d.culprit_gpu = d.culprit_serial = None
    if root.kind == "ib_link_down":  # a switch takes a port down on many hosts at once
        same = {c.host for _tier, t, c, _r in ranked
                if c.kind == "ib_link_down" and abs(t - root.ts) <= 2.0}
        if len(same) >= 3:
            d.culprit_host, d.family, d.rule_id = None, "leaf switch", "net.leaf_switch"
    if root.kind in ("nonfinite_loss", "checksum_mismatch"):  # the trainer names it
        node = re.search(r"\bnode[:= ]\s*([\w.-]+?)[,)\s]", root.message + " ")
        dev = re.search(r"\bdevice[:= ]\s*(\d+)", root.message)
        d.culprit_host = resolver.resolve(node.group(1)) if node else root.host
        d.culprit_gpu = int(dev.group(1)) if dev else None
        d.surfaced_host, d.surfaced_gpu = d.culprit_host, d.culprit_gpu
    if root.kind == "sel_thermal" and d.culprit_gpu is None:
        m = re.search(r"GPU\s*(\d+)", root.message)
        d.culprit_gpu = d.surfaced_gpu = int(m.group(1)) if m else None
    if d.component in ("IO Expansion Board",):
        d.culprit_gpu = d.culprit_serial = None


def _gpu_named_in(text: str) -> int | None:
    """The GPU a person's drain reason names (spaCy entity rules), if exactly one."""
    from faultline.classifiers import entities

    gpus = entities.extract(text).get("gpu", [])
    return gpus[0] if len(gpus) == 1 else None


def _refine_memory(d: Decision, cands: list[Candidate]) -> str:
    """Xid 171 / 172 on the root's GPU settle whether a 48 was DRAM or SRAM."""
    if d.root is None or d.root.kind != "xid" or d.root.xid != 48:
        return d.component
    for c in cands:
        if c.kind == "xid" and c.host == d.root.host and c.device == d.root.device:
            detail = signals.detail_xid(c.xid or 0, None)
            if detail:
                d.evidence[c.event_id] = "corroborating"
                return detail
    return d.component


# The columns of the temp table ``w``, one row per window.
_S, _I64 = LogicalType.STRING, LogicalType.INT64
_W_COLUMNS = (("iid", _S), ("job_id", _S), ("started", _I64), ("failed", _I64),
              ("lo", _I64), ("hi", _I64), ("next_job", _S), ("next_started", _I64))


def _window_table(con: duckdb.DuckDBPyConnection, windows: list[tuple]) -> None:
    """The temp table ``w`` every statement of the rebuild joins ``events`` to: one row
    per window, with the next attempt's job and start for :func:`_progress` (one table
    for both, where there were two). Sent as one Arrow table: ``executemany`` ran one
    prepared INSERT per row."""
    us = 1_000_000
    rows = [(iid, cur[1], cur[2], cur[3], cur[3] - BEFORE_S * us,
             cur[3] + DRAIN_AFTER_S * us, nxt[1], nxt[2]) for iid, cur, nxt in windows]
    con.register("w_rows", arrowrows.table({name: ([r[i] for r in rows], kind)
                                            for i, (name, kind) in enumerate(_W_COLUMNS)}))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE w AS SELECT * FROM w_rows")
    finally:
        con.unregister("w_rows")


def _progress(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[float | None, float | None]]:
    """Per interruption (the windows of ``w``): work lost since the attempt's last
    checkpoint (or first step), and the time until the next attempt's first step. One
    pass over the steps."""
    rows = con.execute("""
        WITH s AS (SELECT job_id, kind, epoch_us(ts) AS t FROM events
                   WHERE kind IN ('checkpoint', 'train_step')),
        mine AS (
            SELECT w.iid, max(s.t) FILTER (WHERE s.kind = 'checkpoint') AS ckpt,
                   min(s.t) FILTER (WHERE s.kind = 'train_step') AS first_step
            FROM w JOIN s ON s.job_id = w.job_id AND s.t BETWEEN w.started AND w.failed
            GROUP BY w.iid),
        nxt AS (
            SELECT w.iid, min(s.t) AS next_step
            FROM w JOIN s ON s.job_id = w.next_job AND s.kind = 'train_step'
                         AND s.t >= w.next_started
            GROUP BY w.iid)
        SELECT w.iid, w.failed, mine.ckpt, mine.first_step, nxt.next_step
        FROM w LEFT JOIN mine USING (iid) LEFT JOIN nxt USING (iid)
    """).fetchall()
    out = {}
    for iid, failed, ckpt, first, next_step in rows:
        base = ckpt or first
        out[iid] = ((failed - base) / 1e6 if base else None,
                    (next_step - failed) / 1e6 if next_step else None)
    return out


def _symptoms_and_history(con) -> None:
    """Everything else the cascade wrote in the window is a symptom; the same GPU's
    (or host's) hardware events outside it are history."""
    kinds = ", ".join(f"'{k}'" for k in SYMPTOMS)
    # The rows :func:`decide` gave these windows (the temp table ``ev``: every other row
    # of ``interruption_evidence`` belongs to another window) are left out by an outer
    # join, not a correlated NOT EXISTS: DuckDB decorrelates that into a DISTINCT over
    # every (window, event) pair first, which was 8.6 of llama3's 10 s of root causes
    # (9.2 M symptoms). Against ``ev`` rather than the stored table, whose row count
    # DuckDB still estimated from before the DELETE: it built its hash table from the
    # million symptoms instead of the thousands of decided rows (medium: 0.2 CPU s).
    # No DISTINCT either: a window's iid is unique (the interruptions key) and so is an
    # event's id (the load keeps one copy of a duplicated file's events), so each
    # (window, event) pair comes once; hashing 1.25 M pairs cost medium 0.13 CPU s.
    con.execute(f"""
        INSERT INTO interruption_evidence
        SELECT w.iid, e.event_id, 'symptom'
        FROM w JOIN events e ON e.job_id = w.job_id
             AND epoch_us(e.ts) BETWEEN w.failed - {BEFORE_S}e6 AND w.failed + {AFTER_S}e6
        LEFT JOIN ev x ON x.interruption_id = w.iid AND x.event_id = e.event_id
        WHERE e.kind IN ({kinds}) AND x.event_id IS NULL
    """)  # noqa: S608 - constants of this module
    con.execute("""
        INSERT INTO interruption_evidence
        SELECT DISTINCT i.interruption_id, e.event_id, 'history'
        FROM interruptions i JOIN events e
          ON e.kind = 'xid' AND e.gpu_serial = i.culprit_gpu_serial
         AND abs(epoch_us(e.ts) - epoch_us(i.failed_at)) > 3600e6
        WHERE i.culprit_gpu_serial IS NOT NULL
          AND i.interruption_id IN (SELECT iid FROM w)
    """)
