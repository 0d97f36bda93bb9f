"""faultline's own ingest settings: one typed, immutable, picklable object.

Beam's options travel separately (``--runner``, ``--beam-opt``) and untouched; these
are the facts every worker needs to parse a file the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class IngestSettings:
    tz: str = "UTC"  # zone of times that carry none
    year: int | None = None  # --year: the year of each syslog file's first line
    # (start, end) in epoch microseconds of the corpus, from the job records: syslog
    # lines without a year are placed inside it
    window: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        ZoneInfo(self.tz)  # fail early, on the driver, for an unknown zone
