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
from zoneinfo import ZoneInfo

from faultline import __version__


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

    def __post_init__(self) -> None:
        ZoneInfo(self.tz)  # fail early, on the driver, for an unknown zone

    @property
    def fingerprint(self) -> str:
        """What a file's rows depend on besides its bytes: the zone, the year, and the
        parsing code itself. Stored per file (``files.parsed_with``): a re-run skips a
        file only when its size, mtime and this fingerprint are unchanged, so changing
        ``--tz`` or upgrading faultline re-parses instead of keeping stale rows. A zone
        faultline inferred or assumed says so (``tz=America/Los_Angeles (inferred)``). The
        year-inference window is left out on purpose: new sacct dumps move it on every
        incremental run, and a file already placed keeps its year."""
        how = "" if self.tz_how == "given" else f" ({self.tz_how})"
        return (f"faultline {__version__}+{_code_hash()}; tz={self.tz}{how}; "
                f"year={self.year or '-'}")


@functools.cache
def _code_hash() -> str:
    """A short hash of the pipeline package's sources (parsers, sniffing, decoding)."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]
