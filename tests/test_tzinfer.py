"""Zone inference: synthetic observations (DST changes, southern hemisphere, half-hour
zones, noise), the text that yields observations, the decision on small corpora, and
``--tz`` spelling. The lines below are constructed in the shapes of ``docs/corpus.md``
(rsyslog RFC 3339, a collector's ``...Z`` stamp in front of glog / NCCL / Python
logging stamps); they are not copied from any log."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.tzevidence import (
    decide_zone,
    first_collector_stamp,
    gather,
    job_starts,
    offsets_in,
    paired_in,
)
from faultline.pipeline.tzinfer import (
    HOUR_US,
    Observation,
    UnknownZone,
    agreement,
    canonical,
    infer_zone,
    normalize_zone,
    offset_at,
    rounded,
)

US = 1_000_000


def utc_us(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()) * US


def observed(zone: str, start: str, hours: int, kind: str = "offset", lag_s: float = 0,
             every_h: int = 1) -> list[Observation]:
    """What a corpus in ``zone`` shows: one observation every ``every_h`` hours; a
    positive ``lag_s`` is a job log that starts that long after sacct's Start."""
    t0 = utc_us(start)
    return [Observation(t, offset_at(zone, t) - lag_s, kind)
            for t in range(t0, t0 + hours * HOUR_US, every_h * HOUR_US)]


# --- rounding and canonical names -------------------------------------------------------

@pytest.mark.parametrize(("measured", "kind", "zone_offset"), [
    (-25200, "offset", -25200), (20700, "offset", 20700),  # Asia/Kathmandu +05:45
    (-25200 + 30, "line", -25200), (-25200 + 240, "line", None),
    (-25200 - 29, "job start", -25200), (-25200 - 290, "job start", -25200),  # lag
    (-25200 - 600, "job start", None),  # a job log 10 minutes late says nothing
    (-25200 + 120, "job start", None),  # nor one that began minutes before its start
    (3600 * 20, "offset", None),  # no zone is 20 h off
])
def test_measured_offsets_round_to_a_zone_offset_or_none(measured, kind, zone_offset):
    assert rounded(measured, kind) == zone_offset


def test_canonical_prefers_the_name_people_use():
    assert canonical(["US/Pacific", "America/Los_Angeles", "PST8PDT"]) == \
        "America/Los_Angeles"
    assert canonical(["Etc/GMT-1", "Africa/Lagos", "CET"]) == "Africa/Lagos"
    assert canonical(["Etc/UTC", "UTC", "Europe/London"]) == "UTC"


# --- inference ------------------------------------------------------------------------

def test_us_pacific_across_the_november_change_is_los_angeles():
    obs = observed("America/Los_Angeles", "2024-10-30T08:00:00", 8 * 24)
    fit = infer_zone(obs)
    assert fit.status == "inferred" and fit.zone == "America/Los_Angeles"
    assert {"US/Pacific", "America/Vancouver"} <= set(fit.candidates)
    assert "America/Phoenix" not in fit.candidates  # -07:00 without the change
    assert fit.offsets == (-28800, -25200) and fit.mismatched == 0


def test_southern_hemisphere_summer_time_ends_in_april():
    # Sydney goes from +11 to +10 on 2024-04-07 (16:00 UTC); Brisbane stays at +10.
    obs = observed("Australia/Sydney", "2024-04-02T00:00:00", 10 * 24, every_h=3)
    fit = infer_zone(obs)
    assert fit.status == "inferred" and fit.zone == "Australia/Sydney"
    assert "Australia/Brisbane" not in fit.candidates
    assert fit.offsets == (36000, 39600)


def test_a_half_hour_zone_with_its_own_dst_rule():
    # Adelaide (+10:30 -> +09:30 on the same April day as Sydney) is no whole-hour zone.
    fit = infer_zone(observed("Australia/Adelaide", "2024-04-05T00:00:00", 5 * 24))
    assert fit.status == "inferred" and fit.zone == "Australia/Adelaide"


def test_job_starts_with_start_up_lag_still_name_the_zone():
    obs = observed("Europe/Berlin", "2024-03-28T00:00:00", 6 * 24, kind="job start",
                   lag_s=25, every_h=2)
    fit = infer_zone(obs)  # the change to +02:00 is on 2024-03-31
    assert fit.status == "inferred" and fit.offsets == (3600, 7200)
    assert "Europe/Berlin" in fit.candidates and "Africa/Lagos" not in fit.candidates
    assert fit.evidence == {"job start": len(obs)}


def test_evidence_before_a_change_only_is_ambiguous_over_the_job_window():
    # Offsets of -07:00 for two days: Los Angeles (PDT) and Phoenix (MST) both fit,
    # but the job records run past 2024-11-03, where the two part.
    obs = observed("America/Los_Angeles", "2024-10-30T08:00:00", 48)
    window = (utc_us("2024-10-30T08:00:00"), utc_us("2024-11-07T08:00:00"))
    fit = infer_zone(obs, window)
    assert fit.status == "ambiguous" and fit.zone is None
    assert {"America/Los_Angeles", "America/Phoenix"} <= set(fit.readings)
    # Without the later job records nothing tells them apart: either reads it alike.
    assert infer_zone(obs).status == "inferred"


def test_one_odd_bucket_in_a_hundred_is_noise():
    obs = observed("Asia/Tokyo", "2024-06-01T00:00:00", 100, kind="job start")
    obs.append(Observation(obs[10].at_us + 60 * US, 3600 * 5, "offset"))
    fit = infer_zone(obs)
    assert fit.status == "inferred" and fit.zone == "Asia/Tokyo" and fit.mismatched == 1


def test_the_hosts_of_a_job_outvote_one_whose_clock_is_off():
    # Per job: two hosts start 20 s after sacct's Start; the third's collector clock
    # runs 2 h ahead, so its first line lands two hours later (another hour bucket).
    obs = []
    for j in range(30):
        t = utc_us("2024-06-01T00:00:00") + j * 6 * HOUR_US
        obs += [Observation(t + 20 * US, -20, "job start", str(j)),
                Observation(t + 21 * US, -21, "job start", str(j)),
                Observation(t + 2 * HOUR_US + 20 * US, -7220, "job start", str(j))]
    fit = infer_zone(obs)
    assert fit.status == "inferred" and fit.zone == "UTC" and fit.mismatched == 0
    # Voting by hour instead, the skewed host's starts would stand alone and win.
    by_hour = [Observation(o.at_us, o.offset_s, o.kind) for o in obs]
    assert infer_zone(by_hour).status == "no fit"


def test_hosts_in_two_zones_fit_no_zone():
    obs = observed("Europe/Berlin", "2024-06-01T00:00:00", 48)
    obs += observed("America/New_York", "2024-06-01T00:00:00", 48, kind="job start")
    fit = infer_zone(obs)
    assert fit.status == "no fit" and fit.offsets == (-14400, 7200)


def test_no_observations_is_no_evidence():
    assert infer_zone([]).status == "none"
    # a job log that began 10 minutes after its start is no observation either
    assert infer_zone(observed("UTC", "2024-06-01T00:00:00", 5, "job start", 600)
                      ).status == "none"


def test_agreement_counts_the_hours_a_given_zone_contradicts():
    obs = observed("America/Los_Angeles", "2024-10-30T08:00:00", 8 * 24)
    assert agreement(obs, "America/Los_Angeles") == (0, 8 * 24)
    bad, total = agreement(obs, "America/Phoenix")  # right until 2024-11-03 09:00 UTC
    assert total == 8 * 24 and bad == 8 * 24 - (4 * 24 + 1)


# --- observations from text -------------------------------------------------------------

def test_rfc3339_offsets_are_direct_evidence():
    lines = ["2024-11-04T07:13:25.661407-08:00 gpu-002 kernel: EXT4-fs (md0): mounted",
             "2024-07-01T12:00:00+0530 host kernel: x",
             "[2024-07-01T12:00:00.000+02:00] sched: Allocate JobId=1",
             "2024-07-01T12:00:00Z host kernel: a collector's Z says nothing",
             "Nov  4 07:07:56 gpu-000 sshd[83285]: Accepted publickey"]
    got = offsets_in(lines)
    assert [o.offset_s for o in got] == [-28800, 19800, 7200]
    assert got[0].at_us == utc_us("2024-11-04T15:13:25") + 661407


def test_lines_stamped_in_utc_and_local_time_pair_an_instant():
    lines = [
        "2024-11-01T16:22:35.716505Z W1101 09:22:35.716505 205839 torch/distributed/"
        "run.py:793] Setting OMP_NUM_THREADS environment variable",
        "2024-11-01T16:40:00.000001Z [rank3]:[E1101 09:40:00.000 ProcessGroupNCCL.cpp:632]"
        " [Rank 3] Watchdog caught collective operation timeout",
        "2024-11-01T16:41:00.5Z [2024-11-01 09:41:00] gpu-001:2:3 [0] transport/net_ib.cc:"
        "1696 NCCL WARN NET/IB : Got completion from peer",
        "2024-11-01T16:42:00.004Z 2024-11-01 09:42:00,004 INFO step=3",
        "2024-11-01T16:43:00Z gpu-001:2:3 [0] NCCL INFO Bootstrap : Using eth0",
    ]
    got = paired_in(lines)
    assert [rounded(o.offset_s) for o in got] == [-25200] * 4
    assert all(o.kind == "line" for o in got)


def test_a_glog_stamp_without_a_year_takes_the_nearest_year():
    # 05:00 UTC on New Year's Day is still 31 December in Los Angeles.
    got = paired_in(["2025-01-01T05:00:00Z I1231 21:00:00.000000 1 run.py:1] x"])
    assert [o.offset_s for o in got] == [-28800]


def test_job_starts_and_first_collector_stamps():
    sacct_text = ("JobID|JobName|State|Start|End|NodeList\n"
                  "7|train|FAILED|2024-11-01T09:22:10|2024-11-01T10:00:00|gpu-001\n"
                  "7.batch|batch|FAILED|2024-11-01T09:22:10|2024-11-01T10:00:00|gpu-001\n"
                  "8|train|PENDING|Unknown|Unknown|None\n")
    assert job_starts(sacct_text, "sacct.txt") == (
        {"7": utc_us("2024-11-01T09:22:10")},
        [utc_us("2024-11-01T09:22:10"), utc_us("2024-11-01T10:00:00")])
    lines = ["[rank0]: no stamp", "2024-11-01T16:22:35.5Z W1101 09:22:35 1 x] y"]
    assert first_collector_stamp(lines) == utc_us("2024-11-01T16:22:35") + 500_000


# --- the decision on small corpora ------------------------------------------------------

def _corpus(root: Path, zone: str, days: int, start: str = "2024-10-30T08:00:00",
            kernel_offsets: bool = True, log_days: int | None = None) -> list[str]:
    """Jobs every 6 hours (sacct in local time, job logs stamped by a UTC collector
    for the first ``log_days``) and a kernel log (RFC 3339 with offsets, or RFC 3164)."""
    z = dt.UTC
    rows = ["JobID|JobName|State|Start|End|NodeList"]
    t0 = dt.datetime.fromisoformat(start).replace(tzinfo=z)
    for i in range(days * 4):
        t = t0 + dt.timedelta(hours=6 * i)
        local = t.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        rows.append(f"{100 + i}|train|COMPLETED|{local:%Y-%m-%dT%H:%M:%S}|"
                    f"{local + dt.timedelta(hours=5):%Y-%m-%dT%H:%M:%S}|gpu-001")
        if log_days is not None and i >= log_days * 4:
            continue
        job = root / "jobs" / str(100 + i) / "gpu-001.log"
        job.parent.mkdir(parents=True)
        job.write_text(f"{t + dt.timedelta(seconds=12):%Y-%m-%dT%H:%M:%S.%fZ} gpu-001:2:3 "
                       "[0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    (root / "slurm").mkdir()
    (root / "slurm" / "sacct.txt").write_text("\n".join(rows) + "\n")
    host = root / "hosts" / "gpu-001"
    host.mkdir(parents=True)
    lines = []
    for h in range(0, days * 24, 3):
        t = (t0 + dt.timedelta(hours=h)).astimezone(ZoneInfo(zone))
        lines.append(f"{t.isoformat(timespec='microseconds')} gpu-001 kernel: x"
                     if kernel_offsets else f"{t:%b %e %H:%M:%S} gpu-001 kernel: x")
    (host / "kern.log").write_text("\n".join(lines) + "\n")
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def test_a_local_time_corpus_names_its_zone(tmp_path):
    paths = _corpus(tmp_path, "America/Los_Angeles", 8)
    ev = gather(paths)
    assert ev.zoneless and ev.window is not None
    d = decide_zone(paths, None)
    assert (d.zone, d.how, d.error) == ("America/Los_Angeles", "inferred", None)
    assert d.note.startswith("zone America/Los_Angeles inferred from ")
    assert "32 job starts" in d.note


def test_job_starts_alone_before_the_change_stop_with_the_candidates(tmp_path):
    # Jobs over three days before 2024-11-03 and a syslog without zones: -07:00 is
    # Los Angeles or Phoenix, and the corpus's kernel lines would read differently.
    paths = _corpus(tmp_path, "America/Los_Angeles", 3, kernel_offsets=False)
    d = decide_zone(paths, None, window=(utc_us("2024-10-30T08:00:00"),
                                         utc_us("2024-11-08T00:00:00")))
    assert d.error and "America/Los_Angeles" in d.error and "America/Phoenix" in d.error
    assert "pass --tz" in d.error


def test_cli_stops_before_writing_and_names_the_zones(tmp_path):
    # Job logs for the first three days only, sacct through the DST change: -07:00
    # is Los Angeles or Phoenix, and sacct's later times read differently in each.
    corpus = tmp_path / "c"
    _corpus(corpus, "America/Los_Angeles", 8, kernel_offsets=False, log_days=3)
    db = tmp_path / "x.duckdb"
    r = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert r.exit_code == 2, r.output
    assert "America/Los_Angeles" in r.output and "America/Phoenix" in r.output
    assert "--tz" in r.output and not db.exists()


def test_hosts_on_utc_and_a_controller_in_local_time_name_each_zone(tmp_path):
    paths = _corpus(tmp_path, "Asia/Tokyo", 2, kernel_offsets=False)
    kern = tmp_path / "hosts" / "gpu-002" / "kern.log"
    kern.parent.mkdir(parents=True)
    kern.write_text("".join(f"2024-10-3{d}T{h:02d}:00:00+00:00 gpu-002 kernel: x\n"
                            for d in (0, 1) for h in range(24)))
    d = decide_zone([*paths, str(kern)], None)
    assert d.error and "no single zone fits" in d.error
    assert "job starts alone point to Asia/Tokyo" in d.error
    assert "RFC 3339 offsets alone point to UTC" in d.error


def test_a_job_that_ends_after_the_change_makes_the_evidence_ambiguous(tmp_path):
    paths = _corpus(tmp_path, "America/Los_Angeles", 3, kernel_offsets=False)
    assert decide_zone(paths, None).zone == "America/Los_Angeles"  # all before the change
    sacct_file = tmp_path / "slurm" / "sacct.txt"
    with sacct_file.open("a") as f:
        f.write("999|train|COMPLETED|2024-11-01T10:00:00|2024-11-06T10:00:00|gpu-001\n")
    d = decide_zone(paths, None)
    assert d.error and "America/Phoenix" in d.error


def test_a_given_zone_wins_but_is_warned_about(tmp_path):
    paths = _corpus(tmp_path, "Asia/Tokyo", 2)
    d = decide_zone(paths, "utc")
    assert (d.zone, d.how) == ("UTC", "given")
    assert d.warning and "Asia/Tokyo" in d.warning
    assert decide_zone(paths, "Asia/Tokyo").warning is None


def test_no_zone_carrying_time_is_assumed_utc(tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "sacct.txt").write_text(
        "JobID|State|Start|End\n1|COMPLETED|2024-01-01T00:00:00|2024-01-01T01:00:00\n")
    d = decide_zone([str(tmp_path / "slurm" / "sacct.txt")], None)
    assert (d.zone, d.how, d.error) == ("UTC", "assumed", None)
    assert "assumed" in d.note


# --- --tz spelling ----------------------------------------------------------------------

@pytest.mark.parametrize(("given", "zone"), [
    ("utc", "UTC"), ("Z", "UTC"), ("z", "UTC"), (" UTC ", "UTC"),
    ("america/los_angeles", "America/Los_Angeles"), ("Europe/Berlin", "Europe/Berlin"),
])
def test_zone_spellings_accepted(given, zone):
    assert normalize_zone(given) == zone


@pytest.mark.parametrize(("given", "suggested"), [
    ("America/Los_Angles", "America/Los_Angeles"), ("Europe/Berln", "Europe/Berlin"),
    ("tokyo", "Asia/Tokyo"), ("US/Pacfic", "US/Pacific"),
])
def test_misspelt_zones_suggest_close_matches(given, suggested):
    with pytest.raises(UnknownZone, match=suggested):
        normalize_zone(given)


def test_cli_rejects_a_misspelt_zone_with_suggestions(tmp_path):
    r = CliRunner().invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "x.db"),
                                 "--tz", "Europe/Berln"])
    assert r.exit_code == 2 and "Europe/Berlin" in r.output
    assert not (tmp_path / "x.db").exists()


def test_rotated_gzip_kernel_logs_are_read_too(tmp_path):
    import gzip

    log = tmp_path / "hosts" / "h1" / "kern.log.2.gz"
    log.parent.mkdir(parents=True)
    lines = [f"2024-03-09T{h:02d}:00:00.000000-05:00 h1 kernel: x" for h in range(24)]
    log.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    ev = gather([str(log)])
    assert len(ev.observations) == 24 and not ev.zoneless
    assert {o.offset_s for o in ev.observations} == {-18000}


def test_the_fingerprint_says_how_the_zone_was_chosen():
    from faultline.pipeline.settings import IngestSettings

    given = IngestSettings(tz="America/Los_Angeles").fingerprint
    inferred = IngestSettings(tz="America/Los_Angeles", tz_how="inferred").fingerprint
    assert "tz=America/Los_Angeles;" in given
    assert "tz=America/Los_Angeles (inferred);" in inferred
    assert "tz=UTC (assumed);" in IngestSettings(tz_how="assumed").fingerprint


def test_cli_accepts_utc_in_any_case_and_warns_against_the_evidence(tmp_path):
    corpus = tmp_path / "c"
    _corpus(corpus, "Asia/Tokyo", 2)
    r = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(tmp_path / "x.duckdb"),
                                 "--tz", "utc"])
    assert r.exit_code == 0, r.output
    assert "zone UTC (--tz)" in r.output
    assert "warning: --tz UTC disagrees" in r.output and "Asia/Tokyo" in r.output


def test_real_dmesg_iso_lines_are_offsets(shared_dir):
    """``dmesg --decode --time-format iso`` from leptonai/gpud (Apache-2.0, commit
    4a8de33a, components/memory/testdata/dmesg.decode.iso.log; see
    ../shared/peer-data/SOURCES.md): every stamped line says +00:00."""
    path = (shared_dir / "peer-data" / "gpud" / "components" / "memory" / "testdata"
            / "dmesg.decode.iso.log")
    lines = path.read_text(encoding="utf-8").splitlines()
    got = offsets_in(lines)
    stamped = [ln for ln in lines if ": 20" in ln[:20]]
    assert got and len(got) == len(stamped) and {o.offset_s for o in got} == {0}
    assert got[0].at_us == utc_us("2025-01-21T04:41:44") + 283302


def _offsets_by_datetime(lines: list[str]) -> list[tuple[int, int]]:
    """The reading offsets_in used to do: the stamp with its offset through parse_iso's
    datetime path (the reference its arithmetic must equal)."""
    from faultline.pipeline.timeutil import in_range, parse_iso
    from faultline.pipeline.tzstamps import OFFSET_STAMP

    out = []
    for line in lines:
        m = OFFSET_STAMP.match(line)
        got = m and parse_iso(m.group(1) + m.group(2), ZoneInfo("UTC"))
        if got and in_range(got[0]):
            digits = m.group(2)[1:].replace(":", "")
            sign = -1 if m.group(2)[0] == "-" else 1
            out.append((got[0], sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)))
    return out


def test_offset_arithmetic_equals_the_datetime_reading():
    stamps = ["2024-11-04T07:13:25.661407-08:00", "2024-07-01T12:00:00+0530",
              "2024-07-01 12:00:00,5+02:00", "2024-03-10T02:30:00.123456789-07:00",
              "2024-12-31T23:59:59.999999+14:00", "2024-01-01T00:00:00.000001-12:00",
              "2024-06-30T12:00:00+23:59", "2024-06-30T12:00:00-23:59",
              "2024-06-30T12:00:00+24:00", "2024-06-30T12:00:00+23:75",  # >= 24 h: none
              "2024-06-30T12:00:00+10:75", "2024-02-30T12:00:00+01:00",  # no such date
              "2024-06-31T12:00:00+01:00", "2024-06-30T24:00:00+01:00",
              "2024-06-30T12:60:00+01:00", "2024-06-30T12:00:60+01:00",
              "2023-02-29T00:00:00+00:00", "2024-02-29T00:00:00-00:00",
              "1969-12-31T23:59:59+01:00", "2150-01-01T00:00:00+01:00",  # out of range
              "0000-01-01T00:00:00+01:00"]
    lines = [f"{s} host kernel: x" for s in stamps] + [f"[{s}] sched: y" for s in stamps]
    got = [(o.at_us, o.offset_s) for o in offsets_in(lines)]
    assert got == _offsets_by_datetime(lines)
    assert len(got) == 2 * 10  # the valid ones (the first 8, 10:75, 02-29), not the others


def test_gzip_heads_are_what_gunzip_gives(tmp_path):
    """The zone sample inflates only a gzip file's head; it equals gunzip's."""
    import gzip
    import random
    import zlib

    from faultline.pipeline.inflate import gunzip
    from faultline.pipeline.tzevidence import CHUNK, _gunzip_head

    rng = random.Random(7)
    text = "".join(f"2024-11-04T07:13:{i % 60:02d}.{rng.randrange(10**6):06d}-08:00 "
                   f"gpu-{rng.randrange(99):03d} kernel: NVRM: Xid {rng.randrange(150)}\n"
                   for i in range(20_000)).encode()
    big = gzip.compress(text, mtime=0)
    small = gzip.compress(text[:1000], mtime=0)
    members = gzip.compress(text[:5000], mtime=0) + gzip.compress(text[5000:90_000], mtime=0)
    corrupt = big[:30] + bytes(b ^ 0x55 for b in big[30:200]) + big[200:]
    cases = {"big": big, "head of big": big[:CHUNK * 8], "small": small,
             "members": members, "cut": big[:2000], "corrupt": corrupt, "empty member": b""
             + gzip.compress(b"", mtime=0) + small}
    for name, data in cases.items():
        assert _gunzip_head(data, CHUNK) == gunzip(data, CHUNK)[0], name
    assert len(_gunzip_head(big, CHUNK)) == CHUNK
    with pytest.raises(zlib.error):  # the corrupt case is one gunzip had to decide
        zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(corrupt, CHUNK)
