"""faultline's own ingest settings: one typed, immutable, picklable object.

Beam's options travel separately (``--runner``, ``--beam-opt``) and untouched; these
are the facts every worker needs to parse a file the same way.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from faultline import __version__
from faultline.pipeline.hostpath import compile_pattern

JSON_FIELD_KEYS = ("message", "time", "host", "program")


def parse_json_fields(spec: str | None) -> tuple[tuple[str, str], ...]:
    """``message=log,time=ts,host=node`` (``--json-fields``) as sorted pairs;
    ValueError for an item without ``=`` or an unknown key."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in (spec or "").split(","))):
        key, eq, name = item.partition("=")
        if not eq or not name.strip():
            raise ValueError(f"--json-fields: {item!r} is not KEY=FIELD")
        if key.strip() not in JSON_FIELD_KEYS:
            raise ValueError(f"--json-fields: unknown key {key.strip()!r}; known: "
                             f"{', '.join(JSON_FIELD_KEYS)}")
        out[key.strip()] = name.strip()
    return tuple(sorted(out.items()))


@dataclass(frozen=True)
class IngestSettings:
    tz: str = "UTC"  # zone of times that carry none
    year: int | None = None  # --year: the year of each syslog file's first line
    # (start, end) in epoch microseconds of the corpus, from the job records: syslog
    # lines without a year are placed inside it
    window: tuple[int, int] | None = None
    # job id -> (start, end) in epoch microseconds, from sacct: the year of a job log's
    # stamps that carry none, and the time of its lines before the first stamp. Left
    # out of the fingerprint like ``window``.
    job_windows: Mapping[str, tuple[int, int]] | None = field(default=None, hash=False)
    tz_how: str = "given"  # "given" (--tz), "inferred" from the corpus, "assumed" UTC
    # --rules FILE (repeatable): a site's kernel rules, tried before the built-in ones
    rules: tuple[str, ...] = ()
    # (name, text) of each rules file, read and validated once, on the driver
    rule_texts: tuple[tuple[str, str], ...] = field(default=(), init=False, repr=False)
    # host names the job records and hosts.csv know: a path component
    # naming one of them gives a file its host (see faultline.pipeline.hostpath)
    known_hosts: frozenset[str] = frozenset()
    host_from_path: str | None = None  # --host-from-path REGEX with a (?P<host>...) group
    # --json-fields: user names for a JSON log's fields, e.g. (("message", "log"),)
    json_fields: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        ZoneInfo(self.tz)  # fail early, on the driver, for an unknown zone
        if self.rules:  # fail early too: RuleError names the file and the entry
            from faultline.pipeline.parsers.kernel_rules import read_rule_files

            object.__setattr__(self, "rule_texts", read_rule_files(self.rules))
        if self.host_from_path:
            compile_pattern(self.host_from_path)  # ValueError for a bad pattern
        for key, _name in self.json_fields:
            if key not in JSON_FIELD_KEYS:
                raise ValueError(f"--json-fields: unknown key {key!r}; known: "
                                 f"{', '.join(JSON_FIELD_KEYS)}")

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON values: how they reach the process that runs the
        pipeline for the driver (:mod:`faultline.pipeline.beamrun`), a JSON object
        rather than a pickle. ``rule_texts`` go with them, so the rules are the ones
        the driver read and validated, not read again."""
        return {"tz": self.tz, "year": self.year,
                "window": None if self.window is None else list(self.window),
                "job_windows": None if self.job_windows is None
                else {job: list(span) for job, span in self.job_windows.items()},
                "tz_how": self.tz_how, "rules": list(self.rules),
                "rule_texts": [list(pair) for pair in self.rule_texts],
                "known_hosts": sorted(self.known_hosts),
                "host_from_path": self.host_from_path,
                "json_fields": [list(pair) for pair in self.json_fields]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IngestSettings:
        """The settings :meth:`to_json` gave (equal to them: tuples again where the
        fields hold tuples)."""
        window = data["window"]
        jobs = data["job_windows"]
        settings = cls(
            tz=data["tz"], year=data["year"],
            window=None if window is None else (window[0], window[1]),
            job_windows=None if jobs is None
            else {job: (span[0], span[1]) for job, span in jobs.items()},
            tz_how=data["tz_how"], known_hosts=frozenset(data["known_hosts"]),
            host_from_path=data["host_from_path"],
            json_fields=tuple((k, v) for k, v in data["json_fields"]))
        # the driver's rules, as it read them (__post_init__ skipped reading: rules=())
        object.__setattr__(settings, "rules", tuple(data["rules"]))
        object.__setattr__(settings, "rule_texts",
                           tuple((name, text) for name, text in data["rule_texts"]))
        return settings

    @property
    def fingerprint(self) -> str:
        """What a file's rows depend on besides its bytes: the zone, the year, and the
        parsing code itself. Stored per file (``files.parsed_with``): a re-run skips a
        file only when its size, mtime and this fingerprint are unchanged, so changing
        ``--tz``, a site rules file (its content) or upgrading faultline re-parses
        instead of keeping stale rows. A zone faultline inferred or assumed says so
        (``tz=America/Los_Angeles (inferred)``). The year-inference window and the known
        hosts are left out on purpose: new sacct dumps change them on every incremental
        run, and a file already placed keeps its year and host."""
        how = "" if self.tz_how == "given" else f" ({self.tz_how})"
        base = (f"faultline {__version__}+{_code_hash()}; tz={self.tz}{how}; "
                f"year={self.year or '-'}")
        if self.host_from_path:
            base += f"; host_from_path={self.host_from_path}"
        if self.json_fields:
            base += "; json_fields=" + ",".join(f"{k}={v}" for k, v in self.json_fields)
        if not self.rule_texts:
            return base
        h = hashlib.sha256()
        for _name, text in self.rule_texts:  # the rules' content, not where they live
            h.update(text.encode())
            h.update(b"\0")
        return f"{base}; rules={h.hexdigest()[:12]}"


@functools.cache
def _code_hash() -> str:
    """A short hash of the pipeline package's sources (parsers, sniffing, decoding)
    and of its built-in rule files."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.toml")]):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]
