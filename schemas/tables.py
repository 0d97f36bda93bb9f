"""The one definition of every table and view faultline writes.

``../shared/INTERFACE.md`` fixes the tables users and scripts rely on; this module is
their single source. DuckDB DDL (:mod:`faultline.schemas.ddl`), Arrow/Parquet schemas and
polars dtypes (:meth:`Table.arrow_schema`, :meth:`Table.polars_schema`), the Python row
types Beam carries (:meth:`Table.row_type`), the schema section of the README and the
data-quality suites are all derived from the declarations below; tests fail when any of
them drifts.

Columns beyond INTERFACE.md are extensions (allowed: "more are welcome") and say so in
their docs.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from faultline.schemas.event_kinds import EVENT_KINDS
from faultline.schemas.types import ENGINE_TYPES, LogicalType

if TYPE_CHECKING:  # pyarrow / polars are imported where a schema is built, not here
    import polars as pl
    import pyarrow as pa

S, I32, I64, F64, B, TS, J, IL = (
    LogicalType.STRING,
    LogicalType.INT32,
    LogicalType.INT64,
    LogicalType.FLOAT64,
    LogicalType.BOOL,
    LogicalType.TIMESTAMP,
    LogicalType.JSON,
    LogicalType.INT_LIST,
)


@dataclass(frozen=True)
class Column:
    """One column: its logical type, nullability and the values it may take."""

    name: str
    type: LogicalType
    doc: str
    nullable: bool = False
    values: tuple[str, ...] | None = None  # closed vocabulary, checked by data quality
    values_source: str | None = None  # where a long vocabulary is documented
    minimum: float | None = None
    maximum: float | None = None
    # DuckDB's storage compression when not its own choice: "zstd" for long free text
    # unique per row (messages, JSON attrs, ids), where DuckDB's dictionary/FSST analysis
    # costs most of the write and saves little (see ddl.create_table_sql).
    compression: str | None = None

    @property
    def duckdb_type(self) -> str:
        return ENGINE_TYPES[self.type].duckdb

    @property
    def arrow_field(self) -> pa.Field:
        import pyarrow as pa

        return pa.field(self.name, ENGINE_TYPES[self.type].arrow, nullable=self.nullable)

    @property
    def python_type(self) -> type:
        base = ENGINE_TYPES[self.type].python
        return typing.Optional[base] if self.nullable else base  # noqa: UP045


@dataclass(frozen=True)
class Table:
    """A table: ordered columns, a key, and what one row stands for."""

    name: str
    row: str  # "one row per ..."
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    # DuckDB keeps an ART index per PRIMARY KEY, which costs memory and time on bulk
    # loads of millions of rows; large tables keep their key unenforced and the
    # data-quality suite checks uniqueness instead.
    enforce_key: bool = True

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate column names")
        missing = set(self.key) - set(names)
        if missing:
            raise ValueError(f"{self.name}: key columns {missing} are not columns")

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([c.arrow_field for c in self.columns])

    @cached_property
    def polars_schema(self) -> dict[str, pl.DataType]:
        return {c.name: ENGINE_TYPES[c.type].polars for c in self.columns}

    @cached_property
    def row_type(self) -> type[typing.NamedTuple]:
        """A NamedTuple class for this table's rows (Beam infers a schema from it)."""
        cls_name = "".join(part.title() for part in self.name.split("_")) + "Row"
        return typing.NamedTuple(cls_name, [(c.name, c.python_type) for c in self.columns])


@dataclass(frozen=True)
class View:
    """A view over the tables: its columns (for docs and checks) and its SQL body."""

    name: str
    row: str
    columns: tuple[Column, ...]
    sql: str
    depends_on: tuple[str, ...] = field(default=())
    # What identifies a row: the data-quality suite checks it is unique and names
    # offending rows by it (views have no enforced key to borrow).
    key: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        missing = set(self.key) - {c.name for c in self.columns}
        if missing:
            raise ValueError(f"{self.name}: key columns {missing} are not columns")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


# --- vocabularies -------------------------------------------------------------------

SOURCES = ("kernel", "sel", "inventory", "job", "trainer", "sacct", "slurmctld", "hosts",
           "slurmd", "slurm_nodes", "nvidia_smi", "nvidia_bug_report", "bundle", "unknown",
           "flight_recorder")
TS_QUALITIES = ("exact", "assumed_tz", "inferred_year", "inherited", "boot_relative",
                "untimed")
EVIDENCE_ROLES = ("root", "corroborating", "symptom", "contradicting", "history")
COMPONENT_KINDS = ("table5", "planned", "unattributed")
# files.host_from (faultline.pipeline.hostpath.HOST_FROM is the same tuple)
HOST_FROM = ("line", "path_known", "path_layout", "pattern", "none")


# --- tables ---------------------------------------------------------------------------

FILES = Table(
    name="files",
    row="input file",
    key=("path",),
    columns=(
        Column("path", S, "Absolute path of the file, as read; a member of an archive "
               "is `<archive path>!/<member path>`."),
        Column("sha256", S, "SHA-256 of the file's bytes as stored (before gunzip)."),
        Column("source", S, "Log source sniffed from the content.", values=SOURCES),
        Column("lines", I64, "Lines in the file (a last line without newline counts).",
               minimum=0),
        Column("routine_lines", I64, "Lines read and found to carry nothing relevant.",
               minimum=0),
        Column("event_lines", I64, "Lines covered by events (line_no..line_end).",
               minimum=0),
        Column("reject_lines", I64, "Lines that could not be read (see rejects).",
               minimum=0),
        Column("duplicate_of", S, "Path of an earlier file with the same bytes.",
               nullable=True),
        Column("bytes", I64, "Size on disk in bytes (extension).", minimum=0),
        Column("compressed", B, "True for gzip files (extension)."),
        Column("host", S, "Host the path names, if any (extension).", nullable=True),
        Column("host_from", S, "How the file's host was decided: path_layout "
               "(hosts/<host>/, jobs/<id>/<host>.log, <host>/var/log/), path_known (a path "
               "component names a host of sacct or hosts.csv), pattern (--host-from-path), "
               "line (no host from the path; the lines name theirs), none (extension).",
               values=HOST_FROM),
        Column("shape", S, "Line shape within the source, e.g. rfc3339, rfc3164, "
               "dmesg_t, iso, kmsg (extension).", nullable=True),
        Column("problem", S, "What went wrong reading the file as a whole, e.g. "
               "'truncated gzip' (extension).", nullable=True),
        Column("mtime", F64, "Modification time when read, epoch seconds (extension; "
               "with bytes and parsed_with it lets a re-run skip the file).", nullable=True),
        Column("parsed_with", S, "faultline version, parser code hash and settings the "
               "rows were made with (extension)."),
    ),
)

EVENTS = Table(
    name="events",
    row="relevant record",
    key=("event_id",),
    enforce_key=False,
    columns=(
        Column("event_id", S, "Deterministic id from sha256, line_no and an ordinal.",
               compression="zstd"),
        Column("ts", TS, "Event time in UTC; NULL only when ts_quality is untimed.",
               nullable=True),
        Column("ts_quality", S, "How ts was obtained.", values=TS_QUALITIES),
        Column("host", S, "Canonical host name.", nullable=True),
        Column("source", S, "Log source of the file.", values=SOURCES),
        Column("kind", S, "Event kind (xid, nccl_watchdog, node_down, ...).",
               values=tuple(EVENT_KINDS), values_source="schemas/event_kinds.py"),
        Column("xid", I32, "NVIDIA Xid code.", nullable=True, minimum=1),
        Column("gpu_index", I32, "GPU index on the host, from the inventory.",
               nullable=True, minimum=0),
        Column("gpu_serial", S, "GPU board serial, from the inventory.", nullable=True),
        Column("device", S, "Device named by the line (PCI address, mlx5_0, nvme0...).",
               nullable=True),
        Column("job_id", S, "Slurm job id (text: arrays and het jobs keep their form).",
               nullable=True),
        Column("message", S, "The message text of the line(s).", compression="zstd"),
        Column("path", S, "File the event was read from."),
        Column("line_no", I64, "First line of the event (1-based).", minimum=1),
        Column("line_end", I64, "Last line of the event (>= line_no).", minimum=1),
        Column("sha256", S, "SHA-256 of the file (extension)."),
        Column("rank", I32, "Training rank the line belongs to (extension).",
               nullable=True, minimum=0),
        Column("attrs", J, "Kind-specific fields as a JSON object (extension).",
               nullable=True, compression="zstd"),
    ),
)

REJECTS = Table(
    name="rejects",
    row="line that could not be read",
    key=("path", "line_no"),
    enforce_key=False,
    columns=(
        Column("path", S, "File the line is in."),
        Column("line_no", I64, "Line number (1-based).", minimum=1),
        Column("reason", S, "Why the line could not be read."),
        Column("raw", S, "The line, truncated and with bad bytes replaced."),
        Column("sha256", S, "SHA-256 of the file (extension)."),
    ),
)

ATTEMPTS = Table(
    name="attempts",
    row="job attempt of a run",
    key=("job_id", "started_at"),
    columns=(
        Column("run", S, "Run: jobs of one name (and user) resubmitted within 24 h."),
        Column("job_id", S, "Slurm JobID as text (a requeued job keeps it)."),
        Column("started_at", TS, "Start of the attempt (UTC)."),
        Column("ended_at", TS, "End of the attempt (UTC); NULL while running.",
               nullable=True),
        Column("state", S, "Final Slurm state (COMPLETED, FAILED, NODE_FAIL, ...)."),
        Column("nodes", I32, "Number of nodes.", minimum=0),
        Column("nodelist", S, "Slurm host list as written."),
        Column("attempt", I32, "1-based attempt number within the run (extension).",
               minimum=1),
        Column("job_name", S, "JobName (extension).", nullable=True),
        Column("user", S, "User, where sacct gives one (extension).", nullable=True),
        Column("exit_code", S, "ExitCode as written (extension).", nullable=True),
        Column("reason", S, "Reason field (extension).", nullable=True),
        Column("admin_comment", S, "AdminComment (extension).", nullable=True),
    ),
)

INTERRUPTIONS = Table(
    name="interruptions",
    row="attempt that ended while its run went on",
    key=("interruption_id",),
    columns=(
        Column("interruption_id", S, "Deterministic id of the interruption."),
        Column("run", S, "Run the attempt belongs to."),
        Column("job_id", S, "Slurm JobID of the attempt."),
        Column("failed_at", TS, "When the attempt failed (UTC)."),
        Column("planned", B, "True for planned maintenance."),
        Column("component", S, "Table 5 component, Planned Maintenance or Unattributed."),
        Column("category", S, "Table 5 category of the component."),
        Column("signal_family", S, "Family of the deciding signal (NVLink, row remap, "
               "GSP, IB link...).", nullable=True),
        Column("culprit_host", S, "Host the root cause is on: the hardware suspect, set "
               "for hardware components only (GPU, Host, Network categories).",
               nullable=True),
        Column("culprit_gpu", I32, "GPU index on the culprit host.", nullable=True,
               minimum=0),
        Column("culprit_gpu_serial", S, "Serial of the culprit GPU, from the host's "
               "inventory in force at the failure.", nullable=True),
        Column("root_event_id", S, "The event named as root cause.", nullable=True),
        Column("rule_id", S, "Rule or model that decided."),
        Column("confidence", F64, "Confidence of the decision, 0..1.", minimum=0.0,
               maximum=1.0),
        Column("lost_seconds", F64, "Work redone since the last checkpoint.",
               nullable=True, minimum=0.0),
        Column("downtime_seconds", F64, "Until the next attempt's first step.",
               nullable=True, minimum=0.0),
        Column("taxonomy_version", S, "Version of the taxonomy used."),
        Column("culprit_gpu_uuid", S, "UUID of the culprit GPU, from the same inventory "
               "(extension).", nullable=True),
        Column("surfaced_host", S, "Host whose lines named the root, whatever the "
               "component (for a software fault: where it surfaced, no suspect) "
               "(extension).", nullable=True),
        Column("surfaced_gpu", I32, "GPU index on the surfaced host (extension).",
               nullable=True, minimum=0),
        Column("surfaced_gpu_serial", S, "Serial of that GPU, from the inventory in "
               "force at the failure (a straggler's GPU, by serial) (extension).",
               nullable=True),
    ),
)

INTERRUPTION_EVIDENCE = Table(
    name="interruption_evidence",
    row="event that took part in an interruption",
    key=("interruption_id", "event_id"),
    enforce_key=False,
    columns=(
        Column("interruption_id", S, "The interruption."),
        # a cascade's symptoms are most of the rows (llama3: 9.2 M of 9.3 M), their ids
        # unique: zstd took their insert and commit from 4.9 to 2.4 s there
        Column("event_id", S, "The event.", compression="zstd"),
        Column("role", S, "Part the event played.", values=EVIDENCE_ROLES),
    ),
)

COMPONENTS = Table(
    name="components",
    row="component of the taxonomy (loaded from schemas/taxonomy)",
    key=("component",),
    columns=(
        Column("component", S, "Component name as spelled in Table 5."),
        Column("category", S, "Table 5 category."),
        Column("kind", S, "table5, planned or unattributed.", values=COMPONENT_KINDS),
        Column("published_interruptions", I32, "Count in the published Table 5.",
               nullable=True, minimum=0),
        Column("published_percent", F64, "Percent as printed in Table 5.", nullable=True),
        Column("sort_order", I32, "Row order of the published table.", minimum=0),
        Column("taxonomy_version", S, "Version of the taxonomy."),
    ),
)

XID_CATALOG = Table(
    name="xid_catalog",
    row="NVIDIA Xid code (loaded from schemas/taxonomy)",
    key=("xid",),
    columns=(
        Column("xid", I32, "Xid code.", minimum=1),
        Column("name", S, "NVIDIA mnemonic."),
        Column("description", S, "NVIDIA's description.", nullable=True),
        Column("resolution", S, "NVIDIA's immediate resolution bucket.", nullable=True),
        Column("investigatory", S, "NVIDIA's investigatory bucket.", nullable=True),
        Column("role", S, "root, app, follow_on, informational or unused.",
               values=("root", "app", "follow_on", "informational", "unused")),
        Column("component", S, "Component it points to (root/app roles).",
               nullable=True),
        Column("signal_family", S, "Signal family label used in reports.",
               nullable=True),
        Column("follows", S, "Xids a follow-on row follows (';'-separated, '*' any).",
               nullable=True),
        Column("applies_to", S, "GPU families (';'-separated).", nullable=True),
        Column("confidence", S, "high, medium or low.",
               values=("high", "medium", "low")),
        Column("source", S, "Where the row was verified."),
        Column("notes", S, "Notes for operators and classifiers.", nullable=True),
        Column("taxonomy_version", S, "Version of the taxonomy."),
    ),
)

TEXT_PREDICTIONS = Table(
    name="text_predictions",
    row="free text (drain reason, admin comment, traceback) the text models labelled",
    key=("model", "text_sha256"),
    columns=(
        Column("model", S, "Id of the model: task, kind and a hash of its training data."),
        Column("text_sha256", S, "SHA-256 of the text as given to the model."),
        Column("label", S, "Predicted component (or Planned Maintenance)."),
        Column("confidence", F64, "How far to trust the label.", minimum=0, maximum=1),
    ),
)

OVERRIDES = Table(
    name="overrides",
    row="operator's correction of a root cause",
    key=("interruption_id",),
    columns=(
        Column("interruption_id", S, "The interruption corrected (kept even while no "
               "interruption has this id: a later ingest may bring it back)."),
        Column("component", S, "Component the operator says caused it (a Table 5 name, "
               "Planned Maintenance or Unattributed)."),
        Column("note", S, "Why, in the operator's words (may be empty)."),
        Column("created_at", TS, "When the override was added or last changed (UTC)."),
        Column("created_by", S, "Who added it: the login name (extension)."),
        Column("origin", S, "Where it came from: 'cli' or the overrides file's path "
               "(extension)."),
    ),
)

HANG_VERDICTS = ("never_entered", "not_completed", "mismatch", "incomplete_dumps")

COLLECTIVE_HANGS = Table(
    name="collective_hangs",
    row="first unfinished collective (or p2p op) of a process group, from Flight Recorder dumps",
    key=("job_id", "pg_name", "is_p2p"),
    columns=(
        Column("job_id", S, "Slurm JobID of the dumps (from their path)."),
        Column("pg_id", I32, "Process group id as the dumps give it.", nullable=True),
        Column("pg_name", S, "Process group name (pg_config key; extension)."),
        Column("pg_desc", S, "Process group description (default_pg, "
               "EXPERT_MODEL_PARALLEL_GROUP, ...)."),
        Column("is_p2p", B, "Aligned by p2p_seq_id (send/recv) rather than "
               "collective_seq_id (extension)."),
        Column("collective_seq_id", I64, "Sequence id of the first op not every member "
               "rank completed (the p2p_seq_id when is_p2p)."),
        Column("op", S, "Operation (all_reduce, all_to_all, send 3->5, ...); ops joined "
               "by ' | ' when ranks disagree.", nullable=True),
        Column("sizes", J, "Input sizes per rank that recorded the op (JSON: rank -> "
               "sizes).", nullable=True),
        Column("dtypes", J, "Input dtypes per rank (JSON: rank -> dtypes).", nullable=True),
        Column("ranks", IL, "The group's member ranks (list)."),
        Column("missing_ranks", IL, "Members that did not complete it: no entry, never "
               "started or never completed; for incomplete_dumps the members without "
               "a dump (list)."),
        Column("verdict", S, "never_entered: a member never enqueued it (CPU side); "
               "not_completed: every member enqueued it, some never started or finished "
               "it (GPU, NVLink or network side); mismatch: op, sizes or dtypes differ "
               "across ranks (software bug); incomplete_dumps: members' dumps missing.",
               values=HANG_VERDICTS),
        Column("culprit_ranks", IL, "Ranks the verdict blames (JSON list; empty when it "
               "cannot tell)."),
        Column("culprit_host", S, "Host of the first culprit rank (NCCL init lines).",
               nullable=True),
        Column("culprit_gpu", I32, "GPU index of the first culprit rank (its busId and "
               "the inventory, else its cudaDev).", nullable=True),
        Column("evidence_path", S, "Dump file of the first culprit rank (or of the first "
               "rank read).", nullable=True),
        Column("dumps", I32, "Member ranks with a dump (extension).", minimum=0),
    ),
)

FILE_OFFSETS = Table(
    name="file_offsets",
    row="plain log file a re-run may read on from where this one stopped",
    key=("path",),
    columns=(
        Column("path", S, "The file (a plain, uncompressed kernel or job log; not an "
               "archive member)."),
        Column("read_to", I64, "Byte offset just after the file's last complete line "
               "(a trailing line without newline is read but not passed: the next run "
               "reads it again).", minimum=0),
        Column("prefix_sha256", S, "SHA-256 of bytes [0, read_to): a re-run that finds "
               "the file grown and this prefix unchanged parses only what follows "
               "(docs/reruns.md)."),
    ),
)

INGEST_STATE = Table(
    name="ingest_state",
    row="what the last ingest read and decided (one row)",
    key=("inputs",),
    columns=(
        Column("inputs", S, "Digest of the last run's options and of the paths it found: "
               "a re-run with the same, every file unchanged (size, mtime), skips the "
               "zone inference and job-record pre-pass (docs/reruns.md)."),
        Column("parsed_with", S, "The parse settings' fingerprint that run decided "
               "(files.parsed_with of what it read)."),
        Column("zone_note", S, "Which zone zone-less times were read in, and why."),
        Column("zone_warning", S, "A --tz given against the corpus's evidence.",
               nullable=True),
        Column("rebuild", S, "Code, options, overrides and parse settings the last "
               "root-cause rebuild ran with: a re-run that parses nothing and finds the "
               "same skips the rebuild (docs/reruns.md)."),
    ),
)

SEALED_DIRS = Table(
    name="sealed_dirs",
    row="directory of a finished job whose files a re-run with nothing new does not stat",
    key=("path",),
    columns=(
        Column("path", S, "A jobs/<id>/ directory of a job that ended (sacct) more than "
               "a day before the newest job record (docs/reruns.md)."),
        Column("mtime", F64, "The directory's modification time when its files were last "
               "checked: while it is the same (no file added, removed or renamed in it), "
               "a re-run with the same inputs takes its files as unchanged."),
    ),
)

SKEWED_CLOCKS = Table(
    name="skewed_clocks",
    row="host whose clock the last root-cause rebuild found off the cluster's (the "
        "hosts ingest warns about)",
    key=("host",),
    columns=(
        Column("host", S, "Host: a row of host_clock_offsets whose skew and jobs pass "
               "ingest's warning thresholds (pipeline/ingest_state.py: SKEW_WARN_S, "
               "SKEW_MIN_JOBS)."),
        Column("skew_seconds", F64, "host_clock_offsets.skew_seconds then."),
        Column("jobs", I64, "host_clock_offsets.jobs then.", minimum=1),
    ),
)

TABLES: tuple[Table, ...] = (
    FILES, EVENTS, REJECTS, ATTEMPTS, INTERRUPTIONS, INTERRUPTION_EVIDENCE, COMPONENTS,
    XID_CATALOG, TEXT_PREDICTIONS, OVERRIDES, COLLECTIVE_HANGS, FILE_OFFSETS,
    INGEST_STATE, SEALED_DIRS, SKEWED_CLOCKS,
)


# --- views ----------------------------------------------------------------------------

BREAKDOWN = View(
    name="breakdown",
    key=("run", "component"),
    row="Table 5 row (and Planned Maintenance, Unattributed) per run",
    depends_on=("interruptions", "components"),
    columns=(
        Column("run", S, "Run."),
        Column("component", S, "Component."),
        Column("category", S, "Category."),
        Column("interruptions", I64, "Interruptions of the run with that component.",
               minimum=0),
        Column("percent", F64, "Unrounded percent of the run's unexpected "
               "interruptions; NULL for Planned Maintenance.", nullable=True,
               minimum=0.0, maximum=100.0),
        Column("sort_order", I32, "Row order of the published table (extension).",
               minimum=0),
    ),
    # Every taxonomy row appears for every run (zero counts included) so the table
    # lines up with the published one; percent is over unexpected interruptions only.
    sql="""
WITH runs AS (SELECT DISTINCT run FROM interruptions),
counts AS (
    SELECT run, component, count(*) AS n FROM interruptions GROUP BY run, component
),
unexpected AS (
    SELECT run, count(*) FILTER (WHERE NOT planned) AS n FROM interruptions GROUP BY run
)
SELECT r.run, c.component, c.category,
       coalesce(k.n, 0) AS interruptions,
       CASE WHEN c.kind = 'planned' THEN NULL
            ELSE 100.0 * coalesce(k.n, 0) / nullif(u.n, 0) END AS percent,
       c.sort_order
FROM runs r
CROSS JOIN components c
LEFT JOIN counts k ON k.run = r.run AND k.component = c.component
LEFT JOIN unexpected u ON u.run = r.run
""",
)

FAILURES_PER_DAY = View(
    name="failures_per_day",
    key=("run", "day"),
    row="run and UTC day with at least one interruption",
    depends_on=("interruptions",),
    columns=(
        Column("run", S, "Run."),
        Column("day", S, "UTC date (YYYY-MM-DD)."),
        Column("unexpected", I64, "Unexpected interruptions that day.", minimum=0),
        Column("planned", I64, "Planned interruptions that day.", minimum=0),
    ),
    sql="""
SELECT run, strftime(failed_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS day,
       count(*) FILTER (WHERE NOT planned) AS unexpected,
       count(*) FILTER (WHERE planned) AS planned
FROM interruptions GROUP BY 1, 2
""",
)

EFFECTIVE_TRAINING_TIME = View(
    name="effective_training_time",
    key=("run",),
    row="run",
    depends_on=("interruptions", "attempts", "events"),
    columns=(
        Column("run", S, "Run."),
        Column("first_step", TS, "First training step of the run.", nullable=True),
        Column("last_step", TS, "Last training step of the run.", nullable=True),
        Column("wall_seconds", F64, "First to last step.", nullable=True),
        Column("downtime_seconds", F64, "Sum over interruptions.", nullable=True),
        Column("lost_seconds", F64, "Sum over interruptions.", nullable=True),
        Column("effective", F64, "(wall - downtime - lost) / wall.", nullable=True,
               minimum=0.0, maximum=1.0),
        Column("days", F64, "Wall time in days.", nullable=True),
        Column("unexpected", I64, "Unexpected interruptions.", minimum=0),
        Column("failures_per_day", F64, "Unexpected interruptions per day of wall time.",
               nullable=True),
    ),
    # The run's steps are its attempts' jobs' train_step events within each attempt.
    sql="""
WITH steps AS (
    SELECT a.run, min(e.ts) AS first_step, max(e.ts) AS last_step
    FROM attempts a JOIN events e
      ON e.kind = 'train_step' AND e.job_id = a.job_id
     AND e.ts BETWEEN a.started_at AND coalesce(a.ended_at, e.ts)
    GROUP BY a.run
),
losses AS (
    SELECT run, sum(downtime_seconds) AS down, sum(lost_seconds) AS lost,
           count(*) FILTER (WHERE NOT planned) AS unexpected
    FROM interruptions GROUP BY run
)
SELECT s.run, s.first_step, s.last_step,
       epoch(s.last_step) - epoch(s.first_step) AS wall_seconds,
       coalesce(l.down, 0) AS downtime_seconds, coalesce(l.lost, 0) AS lost_seconds,
       (epoch(s.last_step) - epoch(s.first_step) - coalesce(l.down, 0)
        - coalesce(l.lost, 0)) / nullif(epoch(s.last_step) - epoch(s.first_step), 0)
        AS effective,
       (epoch(s.last_step) - epoch(s.first_step)) / 86400.0 AS days,
       coalesce(l.unexpected, 0) AS unexpected,
       coalesce(l.unexpected, 0) / nullif((epoch(s.last_step) - epoch(s.first_step))
                                          / 86400.0, 0) AS failures_per_day
FROM steps s LEFT JOIN losses l USING (run)
""",
)

MTBF = View(
    name="mtbf_by_component",
    key=("run", "component"),
    row="run and component with at least one interruption",
    depends_on=("interruptions", "effective_training_time"),
    columns=(
        Column("run", S, "Run."),
        Column("component", S, "Component."),
        Column("interruptions", I64, "Interruptions.", minimum=1),
        Column("mtbf_hours", F64, "Wall hours of the run per interruption.",
               nullable=True, minimum=0.0),
    ),
    sql="""
SELECT i.run, i.component, count(*) AS interruptions,
       max(t.wall_seconds) / 3600.0 / count(*) AS mtbf_hours
FROM interruptions i LEFT JOIN effective_training_time t USING (run)
GROUP BY 1, 2
""",
)

# The exact (Garwood) Poisson interval of k failures: the mean mu whose P(X >= k) is
# 2.5% (low) and whose P(X <= k) is 2.5% (high). DuckDB has no gamma quantile, so the
# view bisects the Poisson CDF (summed from lgamma) 60 times from [0, k + 10 sqrt(k) +
# 10]; faultline.projection computes the same bounds from chi-square quantiles and the
# tests hold both to scipy.

FAILURE_RATES = View(
    name="failure_rates",
    key=("run", "component"),
    row="run (every run with attempts) and component other than Planned Maintenance, "
        "zero counts included",
    depends_on=("attempts", "interruptions", "components", "events",
                "effective_training_time"),
    columns=(
        Column("run", S, "Run."),
        Column("component", S, "Component (Table 5 row or Unattributed)."),
        Column("category", S, "Table 5 category."),
        Column("failures", I64, "Unexpected interruptions of the run with that component.",
               minimum=0),
        Column("unit", S, "What the rate counts per: gpu_days for GPU components, "
               "host_days for the rest.", values=("gpu_days", "host_days")),
        Column("rate_per_1000", F64, "Failures per 1,000 GPU-days or host-days (unit).",
               nullable=True, minimum=0.0),
        Column("rate_low", F64, "Lower end of the exact Poisson 95% interval of "
               "rate_per_1000 (0 for no failures).", nullable=True, minimum=0.0),
        Column("rate_high", F64, "Upper end of the exact Poisson 95% interval: finite "
               "even for no failures (3.69 failures' worth of exposure).", nullable=True,
               minimum=0.0),
        Column("rate_per_1000_gpu_days", F64, "Failures per 1,000 GPU-days, for every "
               "component (host components over their hosts' GPUs), so rows add up.",
               nullable=True, minimum=0.0),
        Column("attempt_days", F64, "Days the run's attempts ran (start to end of each, "
               "clipped to the run's first to last training step, summed).",
               minimum=0.0),
        Column("host_days", F64, "Exposure: nodes of each attempt times its days "
               "(clipped as in attempt_days), summed.", minimum=0.0),
        Column("gpu_days", F64, "Exposure: host_days times gpus_per_host.", minimum=0.0),
        Column("gpus_per_host", F64, "Median GPUs per host in the inventory files; 8 "
               "when no inventory was read (see gpus_per_host_from).", minimum=0.0),
        Column("gpus_per_host_from", S, "inventory or assumed (8, when no inventory "
               "was read).", values=("inventory", "assumed")),
    ),
    sql="""
WITH RECURSIVE inventory AS (
    SELECT host, count(DISTINCT attrs->>'index') AS gpus FROM events
    WHERE kind = 'gpu_inventory' AND host IS NOT NULL GROUP BY host
),
gph AS (
    SELECT coalesce(median(gpus), 8) AS gpus_per_host,
           CASE WHEN count(*) > 0 THEN 'inventory' ELSE 'assumed' END AS gpus_per_host_from
    FROM inventory
),
last_seen AS (SELECT max(ts) AS ts FROM events),
-- Each attempt clipped to the run's calendar: the span report divides by (first to
-- last training step), so rates and the report's per-day figure share one calendar.
clipped AS (
    SELECT a.run, a.nodes,
           greatest(epoch(a.started_at), coalesce(epoch(t.first_step), -1e18)) AS lo,
           least(epoch(coalesce(a.ended_at, l.ts, a.started_at)),
                 coalesce(epoch(t.last_step), 1e18)) AS hi
    FROM attempts a CROSS JOIN last_seen l
    LEFT JOIN effective_training_time t ON t.run = a.run
),
exposure AS (
    SELECT run, sum(greatest(hi - lo, 0)) / 86400.0 AS attempt_days,
           sum(nodes * greatest(hi - lo, 0)) / 86400.0 AS host_days
    FROM clipped GROUP BY run
),
counts AS (
    SELECT run, component, count(*) AS n FROM interruptions WHERE NOT planned
    GROUP BY run, component
),
base AS (
    SELECT e.run, c.component, c.category, c.sort_order, coalesce(k.n, 0) AS failures,
           e.attempt_days, e.host_days, e.host_days * g.gpus_per_host AS gpu_days,
           g.gpus_per_host, g.gpus_per_host_from,
           coalesce(k.n, 0) + 10 * sqrt(coalesce(k.n, 0)) + 10 AS top
    FROM exposure e CROSS JOIN components c CROSS JOIN gph g
    LEFT JOIN counts k ON k.run = e.run AND k.component = c.component
    WHERE c.kind <> 'planned'
),
bisect AS (
    SELECT run, component, failures, 0 AS it, 0.0::DOUBLE AS lo_a, top AS hi_a,
           0.0::DOUBLE AS lo_b, top AS hi_b
    FROM base
    UNION ALL
    SELECT run, component, failures, it + 1,
           CASE WHEN cdf_a > 0.975 THEN mid_a ELSE lo_a END,
           CASE WHEN cdf_a > 0.975 THEN hi_a ELSE mid_a END,
           CASE WHEN cdf_b > 0.025 THEN mid_b ELSE lo_b END,
           CASE WHEN cdf_b > 0.025 THEN hi_b ELSE mid_b END
    FROM (
        SELECT *,
               -- P(X <= k - 1 | mid_a) and P(X <= k | mid_b)
               coalesce(list_sum(list_transform(range(0, failures), lambda i:
                   exp(-mid_a + i * ln(mid_a) - lgamma(i + 1)))), 0) AS cdf_a,
               coalesce(list_sum(list_transform(range(0, failures + 1), lambda i:
                   exp(-mid_b + i * ln(mid_b) - lgamma(i + 1)))), 0) AS cdf_b
        FROM (SELECT *, (lo_a + hi_a) / 2 AS mid_a, (lo_b + hi_b) / 2 AS mid_b
              FROM bisect WHERE it < 60))
),
bounds AS (
    SELECT run, component, CASE WHEN failures = 0 THEN 0.0 ELSE (lo_a + hi_a) / 2 END
           AS mu_low, (lo_b + hi_b) / 2 AS mu_high
    FROM bisect WHERE it = 60
),
scaled AS (
    SELECT b.*, CASE WHEN b.category = 'GPU' THEN 'gpu_days' ELSE 'host_days' END AS unit,
           CASE WHEN b.category = 'GPU' THEN b.gpu_days ELSE b.host_days END AS per,
           m.mu_low, m.mu_high
    FROM base b JOIN bounds m USING (run, component)
)
SELECT run, component, category, failures, unit,
       1000.0 * failures / nullif(per, 0) AS rate_per_1000,
       1000.0 * mu_low / nullif(per, 0) AS rate_low,
       1000.0 * mu_high / nullif(per, 0) AS rate_high,
       1000.0 * failures / nullif(gpu_days, 0) AS rate_per_1000_gpu_days,
       attempt_days, host_days, gpu_days, gpus_per_host, gpus_per_host_from
FROM scaled
ORDER BY run, sort_order
""",
)

RECURRING_CULPRITS = View(
    name="recurring_culprits",
    key=("scope", "culprit_host", "culprit_gpu_serial"),
    row="host, or GPU (by serial), named as hardware suspect more than once",
    depends_on=("interruptions",),
    columns=(
        Column("scope", S, "host or gpu.", values=("host", "gpu")),
        Column("culprit_host", S, "Host."),
        Column("culprit_gpu_serial", S, "GPU serial (gpu scope).", nullable=True),
        Column("culprit_gpu", I32, "Last GPU index seen (gpu scope).", nullable=True),
        Column("interruptions", I64, "Times named as culprit.", minimum=2),
        Column("components", S, "Components it was blamed for."),
    ),
    sql="""
SELECT 'host' AS scope, culprit_host, NULL AS culprit_gpu_serial, NULL AS culprit_gpu,
       count(*) AS interruptions, string_agg(DISTINCT component, ', ') AS components
FROM interruptions WHERE culprit_host IS NOT NULL AND category IN ('GPU', 'Host', 'Network')
GROUP BY culprit_host
HAVING count(*) > 1
UNION ALL
SELECT 'gpu', max(culprit_host), culprit_gpu_serial, max(culprit_gpu), count(*),
       string_agg(DISTINCT component, ', ')
FROM interruptions
WHERE culprit_gpu_serial IS NOT NULL AND category IN ('GPU', 'Host', 'Network')
GROUP BY culprit_gpu_serial
HAVING count(*) > 1
""",
)

HOST_CLOCKS = View(
    name="host_clock_offsets",
    key=("host",),
    row="host whose job logs can be set against Slurm's start times",
    depends_on=("events", "attempts"),
    columns=(
        Column("host", S, "Host."),
        Column("jobs", I64, "Jobs compared: the host's first job-log line against the "
               "job's first start in sacct.", minimum=1),
        Column("offset_seconds", F64, "Median of (first line on the host - Slurm's start "
               "time): start-up time on a host whose clock agrees with the controller."),
        Column("skew_seconds", F64, "offset_seconds minus the median of all hosts': how "
               "far this host's clock runs ahead (positive) or behind the cluster's."),
    ),
    # The host's clock stamps its job-log lines; the controller's clock stamps sacct's
    # Start. Every host of a job starts within seconds, so a host whose lines begin
    # hours after (or before) the others' has a clock, or a zone, of its own.
    sql="""
WITH first_line AS (
    SELECT host, job_id, min(ts) AS first_ts FROM events
    WHERE source IN ('job', 'trainer') AND ts_quality IN ('exact', 'assumed_tz')
      AND host IS NOT NULL AND job_id IS NOT NULL
    GROUP BY host, job_id),
job_start AS (SELECT job_id, min(started_at) AS started_at FROM attempts GROUP BY job_id),
per_host AS (
    SELECT f.host, count(*) AS jobs,
           median(epoch(f.first_ts) - epoch(j.started_at)) AS offset_seconds
    FROM first_line f JOIN job_start j USING (job_id)
    GROUP BY f.host)
SELECT host, jobs, offset_seconds,
       offset_seconds - median(offset_seconds) OVER () AS skew_seconds
FROM per_host
""",
)

VIEWS: tuple[View, ...] = (BREAKDOWN, FAILURES_PER_DAY, EFFECTIVE_TRAINING_TIME, MTBF,
                           RECURRING_CULPRITS, HOST_CLOCKS, FAILURE_RATES)


def table(name: str) -> Table:
    """Look a table up by name."""
    for t in TABLES:
        if t.name == name:
            return t
    raise KeyError(f"no table {name!r}")
