"""The same simulated corpus in Slurm's and Redfish's own shapes: a pass over a written
canonical corpus (``OUT/corpus`` + ``OUT/truth``) that writes it again elsewhere.

- ``slurm-out``: each job's per-host logs (``jobs/<id>/<host>.log``) become the one file
  Slurm writes for a batch job, ``outputs/slurm-<id>.out``: every host's lines merged in
  time order, the collector stamps dropped, each line prefixed with its task's
  ``srun --label`` (one torchrun per node: task ``k`` is the job's ``k``-th host). The
  trainer prints to stdout too (rank 0, task 0), so its stamped lines are in the file as
  well; its own ``train.log`` stays where it is. Times must then come from what the lines
  carry (glog, NCCL and trainer stamps) and the job's sacct start.
- ``redfish``: each host's ``sel.txt`` (``ipmitool sel elist``) becomes the Redfish
  ``LogEntry`` JSON lines a collector paging ``.../LogServices/SEL/Entries`` writes
  (``sel.jsonl``, one entry per line: Created with the zone's offset, SensorType,
  Message, EntryCode Assert/Deassert). A row this cannot read is kept as it is.

The truth follows: ``files.csv`` and ``signals.csv`` name the new paths and line numbers
(a signal's ``text`` is the new line's). Everything else is copied unchanged. Input and
output are plain files; nothing here reads the pipeline. :func:`simulate_in` simulates a
preset straight into a layout.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import gzip
import heapq
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

from faultline.simulate.corpus import SimResult, simulate

LAYOUTS = {
    "slurm-out": "each job's host logs merged into outputs/slurm-<id>.out: no collector "
                 "stamps, srun --label prefixes, the trainer's stdout in it too",
    "redfish": "each host's SEL as Redfish LogEntry JSON lines (hosts/<host>/sel.jsonl)",
}
_STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) ")
_TRAIN_STAMP = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_SEL_ROW = re.compile(r"^\s*([0-9a-fA-F]+) \| (\d\d)/(\d\d)/(\d{4}) \| (\d\d):(\d\d):(\d\d) \| "
                      r"([^|]+?) \| ([^|]+?) \| (Asserted|Deasserted)(?: \| (.*))?$")
# ipmitool's sensor type names, longest first (the head of the sensor column)
_SENSOR_TYPES = sorted(("Power Supply", "Power Unit", "Fan", "Temperature", "Memory",
                        "Processor", "Voltage", "Event Logging Disabled", "System Event",
                        "Physical Security", "Critical Interrupt", "Cooling Device",
                        "Management Subsys Health", "Chassis", "Battery"), key=len, reverse=True)
_SEVERITY = {"Power Supply": "Critical", "Power Unit": "Critical", "Memory": "Critical",
             "Processor": "Critical", "Temperature": "Warning", "Fan": "Warning"}

Remap = dict[tuple[str, int], tuple[str, int, str]]  # (path, line) -> (path, line, text)


def simulate_in(preset_name: str, out: Path, layout: str, seed: int = 0,
                progress: Callable[[str, int, int], None] | None = None) -> SimResult:
    """``simulate`` a preset, written in ``layout`` under ``out`` (what
    ``faultline simulate --layout slurm-out|redfish`` runs): the canonical corpus is
    written to a scratch directory beside ``out`` first, then relaid."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".canonical-") as tmp:
        result = simulate(preset_name, Path(tmp), seed=seed, progress=progress)
        relayout(Path(tmp), out, layout)
    with (out / "truth" / "files.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return dataclasses.replace(result, out=out, files=len(rows),
                               lines=sum(int(r["lines"]) for r in rows),
                               bytes=sum(int(r["bytes"]) for r in rows))


def relayout(src: Path, dst: Path, layout: str) -> None:
    """Write the corpus simulated under ``src`` again under ``dst`` in ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    summary = json.loads((src / "truth" / "summary.json").read_text())
    zone = ZoneInfo(summary.get("tz", "UTC"))
    corpus = dst / "corpus"
    remap: Remap = {}
    gone: set[str] = set()
    new: dict[str, tuple[str, int, int]] = {}  # path -> (source, lines, bytes)
    if layout == "slurm-out":
        for job in sorted(p for p in (corpus / "jobs").iterdir() if p.is_dir()):
            _slurm_out(corpus, job, zone, remap, gone, new)
    else:
        for sel in sorted(corpus.glob("hosts/*/sel.txt")):
            _redfish(corpus, sel, zone, remap, gone, new)
    _rewrite_truth(dst / "truth", remap, gone, new)
    summary["layout"] = layout
    (dst / "truth" / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def _read(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _collector_key(stamp: bytes) -> float:
    return dt.datetime.fromisoformat(stamp.decode().replace("Z", "+00:00")).timestamp()


def _slurm_out(corpus: Path, job: Path, zone: ZoneInfo, remap: Remap, gone: set[str],
               new: dict[str, tuple[str, int, int]]) -> None:
    host_logs = sorted(p for p in job.iterdir() if p.name.split(".")[0] != "train")
    streams: list[list[tuple[float, int, int, bytes, str, int]]] = []
    for label, path in enumerate(host_logs):
        rel = path.relative_to(corpus).as_posix()
        rows, key = [], 0.0
        for i, line in enumerate(_read(path), 1):
            if m := _STAMP.match(line):
                key, line = _collector_key(m.group(1)), line[m.end():]
            rows.append((key, label, i, b"%d: %s" % (label, line), rel, i))
        streams.append(rows)
        gone.add(rel)
        path.unlink()
    train = job / "train.log"
    if train.is_file():
        rows, key = [], 0.0
        for i, line in enumerate(_read(train), 1):
            if m := _TRAIN_STAMP.match(line):
                local = dt.datetime.fromisoformat(m.group(1).decode()).replace(tzinfo=zone)
                key = local.timestamp() + int(m.group(2)) / 1000
            rows.append((key, -1, i, b"0: " + line, "", 0))
        streams.append(rows)
    rel_out = f"outputs/slurm-{job.name}.out"
    out = corpus / rel_out
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("wb") as f:
        for _key, _label, _i, text, rel, i in heapq.merge(*streams):
            n += 1
            f.write(text + b"\n")
            if rel:
                remap[(rel, i)] = (rel_out, n, text.decode("utf-8", "replace"))
    new[rel_out] = ("job", n, out.stat().st_size)
    if not any(job.iterdir()):
        job.rmdir()


def _entry(m: re.Match[str], zone: ZoneInfo) -> dict:
    rid, mon, day, year, h, mi, s, sensor, event, direction, detail = m.groups()
    local = dt.datetime(int(year), int(mon), int(day), int(h), int(mi), int(s), tzinfo=zone)
    stype = next((t for t in _SENSOR_TYPES if sensor == t or sensor.startswith(t + " ")),
                 None)
    name = sensor[len(stype):].strip() if stype else sensor
    entry: dict = {
        "@odata.id": f"/redfish/v1/Systems/system/LogServices/SEL/Entries/{int(rid, 16)}",
        "@odata.type": "#LogEntry.v1_13_0.LogEntry", "Id": str(int(rid, 16)),
        "Name": "System Event Log Entry", "EntryType": "SEL",
        "Created": local.isoformat(), "EntryCode": "Assert" if direction == "Asserted"
        else "Deassert", "Severity": _SEVERITY.get(stype or "", "OK"),
        "Message": f"{name} {event}".strip() + (f" ({detail})" if detail else ""),
    }
    if stype:
        entry["SensorType"] = stype
    return entry


def _redfish(corpus: Path, sel: Path, zone: ZoneInfo, remap: Remap, gone: set[str],
             new: dict[str, tuple[str, int, int]]) -> None:
    rel = sel.relative_to(corpus).as_posix()
    rel_out = rel[: -len("sel.txt")] + "sel.jsonl"
    lines = _read(sel)
    out: list[bytes] = []
    for i, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace").rstrip("\r")  # a CRLF dump
        m = _SEL_ROW.match(text)
        line = json.dumps(_entry(m, zone)).encode() if m else raw
        out.append(line)
        remap[(rel, i)] = (rel_out, i, line.decode("utf-8", "replace"))
    data = b"".join(x + b"\n" for x in out)
    (corpus / rel_out).write_bytes(data)
    sel.unlink()
    gone.add(rel)
    new[rel_out] = ("sel", len(out), len(data))


def _rewrite_truth(truth: Path, remap: Remap, gone: set[str],
                   new: dict[str, tuple[str, int, int]]) -> None:
    with (truth / "files.csv").open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["path"] not in gone]
    rows += [{"path": p, "source": s, "lines": n, "bytes": b, "compressed": 0}
             for p, (s, n, b) in sorted(new.items())]
    with (truth / "files.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["path", "source", "lines", "bytes", "compressed"])
        w.writeheader()
        w.writerows(rows)
    with (truth / "signals.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        signals = list(reader)
    for s in signals:
        got = remap.get((s["path"], int(s["line_no"])))
        if got is not None:
            s["path"], s["line_no"], s["text"] = got[0], got[1], got[2][:200]
    with (truth / "signals.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(signals)
