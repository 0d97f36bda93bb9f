"""Kernel rules as data: loading and its errors, `faultline rules check`, a site's
`--rules` file at parse and ingest time, the named-group default, the new kinds'
signal rules."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.classifiers import signals
from faultline.cli import app
from faultline.pipeline import fileparse
from faultline.pipeline.parsers import kernel, kernel_messages
from faultline.pipeline.parsers.kernel_rules import (
    RuleError,
    builtin_rules,
    parse_rules,
    read_rule_files,
    ruleset,
)
from faultline.pipeline.parsers.kernel_rules_check import check_files
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "site-rules.example.toml"

# a health-check line a site's own checker writes into the kernel log (one of ours)
SITE = """
[[rule]]
id = "site.gpu_health"
kind = "gpu_lost"
literal = "gpucheck: GPU "
pattern = 'gpucheck: GPU (?P<pci>[0-9a-f:.]+) failed: (?P<reason>.+)'
source = "https://wiki.example.org/gpucheck"

[[rule.example]]
line = "gpucheck: GPU 0000:3b:00.0 failed: no response"
device = "0000:3b:00.0"
attrs = { reason = "no response" }
"""
SITE_LINE = "[  100.000000] gpucheck: GPU 0000:3b:00.0 failed: no response\n"
XID_LINE = ("[  101.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, "
            "GPU has fallen off the bus.\n")


def _site(tmp_path: Path, text: str = SITE, name: str = "site.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the built-in rules and the example site file ----------------------------------------


def test_builtin_rules_and_their_examples_pass_the_check():
    report = check_files([])
    assert report.ok, report.problems
    assert report.rules == len(builtin_rules()) >= 60
    assert report.examples > report.rules


def test_classify_tries_only_rules_whose_literal_is_there_and_keeps_their_order(tmp_path):
    """RuleSet.classify skips the rules none of whose literals the message contains;
    on every real example line and routine line of the built-in rules, plus a site rule
    sharing the Xid rules' literal, it answers as trying every rule in order would."""
    # the site rule comes first and also reads every Xid line: it must win them
    site = SITE.replace('literal = "gpucheck: GPU "',
                        'literal = ["gpucheck: GPU ", "NVRM: Xid"]').replace(
        "pattern = 'gpucheck:", "pattern = 'NVRM: Xid|gpucheck:")
    rules = ruleset(read_rule_files([_site(tmp_path, site)]))
    read = [kernel.parse_line(ex.line, ParseContext(path="x"))
            for r in rules.rules for ex in r.examples]
    lines = [ex.line for r in rules.rules for ex in r.examples]
    messages = [kl.message if kl else line for kl, line in zip(read, lines, strict=True)]
    messages += [m for r in rules.rules for m in r.not_examples]
    messages.append(XID_LINE.split("] ", 1)[1].strip())

    def every_rule(message: str, program: str | None):
        return next((mm for r in rules.rules
                     if (mm := r.match(message, program)) is not None), None)

    assert len(messages) > 100
    for program in (None, "kernel", "systemd-networkd"):
        for m in messages:
            got, want = rules.classify(m, program), every_rule(m, program)
            assert (got and (got.rule_id, got.kind, got.device, got.xid, got.attrs)) == (
                want and (want.rule_id, want.kind, want.device, want.xid, want.attrs)), m


def test_rules_check_cli_on_builtin_and_the_example_site_file():
    out = CliRunner().invoke(app, ["rules", "check"])
    assert out.exit_code == 0, out.output
    assert "built-in rules" in out.output and ": ok" in out.output
    out = CliRunner().invoke(app, ["rules", "check", str(EXAMPLE)])
    assert out.exit_code == 0, out.output
    assert "2 rules, 2 examples, 1 not-examples: ok" in out.output


def test_the_example_site_xid_rule_fills_the_xid_column():
    rs = ruleset(read_rule_files([EXAMPLE]))
    mm = rs.classify("Found XID errors: 63", "nhc")
    assert (mm.rule_id, mm.kind, mm.xid) == ("site.nhc_xid", "xid", 63)
    assert rs.classify("Found XID errors: 63", "sshd") is None  # not nhc's, not the kernel's


# --- malformed files: a clear error naming the entry, exit 2 -----------------------------

_OK = SITE.split("[[rule.example]]")[0]
_EX = '[[rule.example]]\nline = "gpucheck: GPU 0000:3b:00.0 failed: no response"\n'


@pytest.mark.parametrize(("text", "needle"), [
    ("[[rule]\n", "not valid TOML"),
    ("title = 'x'\n", "unknown top-level key(s) ['title']"),
    ("note = 'nothing'\n", "no [[rule]] tables"),
    (_OK.replace('kind = "gpu_lost"', 'kind = "gpu_lsot"') + _EX,
     "rule #1 (site.gpu_health): kind 'gpu_lsot' is not an event kind of "
     "schemas/event_kinds.py (did you mean 'gpu_lost'?)"),
    (_OK.replace('kind = "gpu_lost"\n', "") + _EX,
     "rule #1 (site.gpu_health): 'kind' must be a non-empty string (missing)"),
    (_OK.replace("(?P<reason>.+)'", "(?P<reason>.+'") + _EX,
     "rule #1 (site.gpu_health): 'pattern' is not a valid regex"),
    (_OK, "rule #1 (site.gpu_health): needs at least one [[rule.example]]"),
    (_OK.replace('literal = "gpucheck: GPU "\n', "") + _EX,
     "'literal' must be a non-empty string or list of strings (missing)"),
    (_OK + 'sorce = "typo"\n' + _EX, "unknown key(s) ['sorce'] (did you mean 'source'?)"),
    (_OK + 'fields = "xdi"\n' + _EX, "no field extractor 'xdi' (did you mean 'xid'?)"),
    (_OK + "select = 'gpucheck(?=: GPU)'\n" + _EX, "'select' is not valid for the polars"),
    (_OK + "xid = 0\n" + _EX, "'xid' must be an integer from 1"),
    (_OK + 'absorb = "aer"\nmax_absorb = 0\n' + _EX, "'max_absorb' must be an integer"),
    (_OK.replace('id = "site.gpu_health"', 'id = "nvidia.xid"') + _EX,
     "rule 'nvidia.xid': id already used by a rule of rules/gpu.toml"),
    (_OK.replace('id = "site.gpu_health"', 'id = "bad id"') + _EX,
     "rule #1: 'id' must be a word"),
    (_OK + _EX.replace("line =", "lines ="), "example #1: unknown example key(s) ['lines']"),
])
def test_a_malformed_rules_file_names_the_entry_and_exits_2(tmp_path, text, needle):
    path = _site(tmp_path, text)
    with pytest.raises(RuleError) as exc:
        read_rule_files([path])
    assert needle in str(exc.value) and str(path) in str(exc.value)
    out = CliRunner().invoke(app, ["rules", "check", str(path)])
    assert out.exit_code == 2
    assert needle.split(" (")[0] in " ".join(out.output.split())


def test_unreadable_and_non_utf8_files_are_bad_usage(tmp_path):
    with pytest.raises(RuleError, match="cannot read"):
        read_rule_files([tmp_path / "missing.toml"])
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"# caf\xe9\n")
    with pytest.raises(RuleError, match="not UTF-8"):
        read_rule_files([bad])
    assert CliRunner().invoke(app, ["rules", "check", str(bad)]).exit_code == 2


def test_a_failing_example_is_a_problem_exit_1(tmp_path):
    wrong = SITE.replace('device = "0000:3b:00.0"', 'device = "0000:3c:00.0"')
    wrong += ('\n[[rule.example]]\nline = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen '
              'off the bus."\n')
    wrong = wrong.replace('source = "https://wiki.example.org/gpucheck"',
                          'source = "https://wiki.example.org/gpucheck"\n'
                          'not_example = ["gpucheck: GPU 0000:3b:00.0 failed: x"]')
    path = _site(tmp_path, wrong)
    report = check_files([path])
    assert len(report.problems) == 3, report.problems
    joined = "\n".join(report.problems)
    assert "example #1: device '0000:3b:00.0', expected '0000:3c:00.0'" in joined
    assert "example #2: rule nvidia.xid (of rules/gpu.toml) reads it first" in joined
    assert "not_example #1 is read by the rule" in joined
    out = CliRunner().invoke(app, ["rules", "check", str(path)])
    assert out.exit_code == 1 and "FAIL" in out.output and "3 problems" in out.output


def test_an_example_may_be_a_whole_log_line(tmp_path):
    text = SITE.replace('line = "gpucheck:', 'line = "Jul  9 10:42:47 n1 kernel: gpucheck:')
    assert check_files([_site(tmp_path, text)]).ok


# --- site rules at parse time ----------------------------------------------------------


def _events(text: str, settings: IngestSettings) -> list[tuple]:
    parsed = fileparse.parse_file("hosts/n1/kern.log", text.encode(), settings, None)
    return [(e["kind"], e["device"], e["xid"]) for e in parsed.events.to_pylist()]


def test_site_rules_are_read_at_parse_time_and_enter_the_fingerprint(tmp_path):
    text = SITE_LINE + XID_LINE
    plain = IngestSettings()
    site = IngestSettings(rules=(str(_site(tmp_path)),))
    assert _events(text, plain) == [("xid", "0000:3b:00.0", 79)]
    assert _events(text, site) == [("gpu_lost", "0000:3b:00.0", None),
                                   ("xid", "0000:3b:00.0", 79)]
    assert "rules=" in site.fingerprint and "rules=" not in plain.fingerprint
    # the content counts, not the path: a copy elsewhere parses the same
    copy = IngestSettings(rules=(str(_site(tmp_path, name="copy.toml")),))
    assert copy.fingerprint == site.fingerprint
    changed = IngestSettings(rules=(str(_site(tmp_path, SITE.replace("gpu_lost", "xid"),
                                              "other.toml")),))
    assert changed.fingerprint != site.fingerprint


def test_settings_with_site_rules_travel_to_workers_whole(tmp_path):
    import pickle

    site = IngestSettings(rules=(str(_site(tmp_path)),))
    (tmp_path / "site.toml").unlink()  # a worker never reads the file: the text travels
    back = pickle.loads(pickle.dumps(site))
    assert back.rule_texts == site.rule_texts and back.fingerprint == site.fingerprint
    assert _events(SITE_LINE, back) == [("gpu_lost", "0000:3b:00.0", None)]


def test_site_rules_come_before_the_builtin_ones(tmp_path):
    ours = """
[[rule]]
id = "site.xid79_is_a_lost_gpu"
kind = "gpu_lost"
literal = "NVRM: Xid"
pattern = 'NVRM: Xid \\(PCI:(?P<pci>[0-9a-f:]+)\\): (?P<xid>79),'
source = "https://wiki.example.org/our-xid-policy"

[[rule.example]]
line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python3, GPU has fallen off the bus."
xid = 79
"""
    rs = ruleset(read_rule_files([_site(tmp_path, ours)]))
    mm = rs.classify(XID_LINE.split("] ", 1)[1].strip())
    assert (mm.rule_id, mm.kind, mm.xid, mm.device) == (
        "site.xid79_is_a_lost_gpu", "gpu_lost", 79, "0000:3b:00.0")
    assert check_files([tmp_path / "site.toml"]).ok


def test_a_malformed_file_fails_settings_on_the_driver(tmp_path):
    with pytest.raises(RuleError, match=r"site\.gpu_health"):
        IngestSettings(rules=(str(_site(tmp_path, SITE.replace("gpu_lost", "nope"))),))


def test_named_groups_are_the_default_fields():
    (rule,) = parse_rules(
        "[[rule]]\nid='t'\nkind='io_error'\nliteral='x '\nsource='s'\n"
        "pattern='x (?P<pci>\\S+) (?P<xid>\\d+) (?P<n>-?\\d+) (?P<word>\\w+)(?P<opt>!)?'\n"
        "[[rule.example]]\nline='x 0000:3B:00 13 -5 abc'\n", "t.toml")
    mm = rule.match("x 0000:3B:00 13 -5 abc")
    assert (mm.device, mm.xid, mm.attrs) == ("0000:3b:00.0", 13, {"n": -5, "word": "abc"})
    mm = rule.match("x 0000:3b:00.0 0 99999999999 abc")
    assert mm.xid is None and mm.attrs["code_raw"] == "0"  # 0 is no Xid NVIDIA defines


# --- new families through the kernel parser -------------------------------------------


def _parse(text: str):
    return kernel.parse(text, ParseContext(path="hosts/n1/kern.log", host="n1"))


def test_three_line_fallen_off_the_bus_report_is_one_event_with_its_device():
    fp = _parse("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                "[ 1843.308146] NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                "[ 1843.308147] NVRM: fallen off the bus and is not responding to commands.\n"
                "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
    got = [(e.line_no, e.line_end, e.kind, e.xid, e.device) for e in fp.events]
    assert got == [(1, 3, "gpu_fallen_off_bus", 79, "0000:b3:00.0"),
                   (4, 4, "gpu_lost", None, None)]
    assert fp.events[0].attrs["pci_id"] == "10de:26b5"
    assert (fp.routine_lines, fp.event_lines, fp.reject_lines) == (0, 4, 0)


def test_the_not_supported_message_is_not_a_fallen_off_the_bus_event():
    fp = _parse("[    5.1] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1c82)\n"
                "[    5.1] NVRM: installed in this system is not supported by the\n")
    assert fp.events == [] and fp.routine_lines == 2


def test_a_recovery_ends_the_outage_as_its_own_event():
    fp = _parse("[  10.0] nfs: server fs01 not responding, still trying\n"
                "[  70.0] nfs: server fs01 OK\n")
    assert [(e.kind, e.device) for e in fp.events] == [("nfs_timeout", "fs01"),
                                                       ("nfs_recovered", "fs01")]


@pytest.mark.parametrize(("kind", "message", "component"), [
    ("nvlink_error", "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's "
     "postRxDetLinkMask failed!", "Faulty GPU"),
    ("nic_cmd_failed", "mlx5_cmd_check:795:(pid 9993): RTR2RTS_QP(0x504) op_mod(0x0) failed, "
     "status bad parameter(0x3), syndrome (0x4bb88f)", "NIC"),
    # floods healthy DGX hosts from restricted PFs (gpud): names no component
    ("nic_cmd_failed", "mlx5_cmd_out_err:838:(pid 268269): ACCESS_REG(0x805) op_mod(0x1) "
     "failed", None),
    ("nfs_error", "nfs4_reclaim_open_state: Lock reclaim failed!", "Dependency"),
    ("nfs_recovered", "nfs: server fs01 OK", None),
    ("nic_tx_timeout", "NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 0 timed out", "NIC"),
    ("os_limit", "VFS: file-max limit 1000000 reached", "Host Maintenance"),
    ("disk_full", "Failed to open system journal: No space left on device",
     "Host Maintenance"),
])
def test_new_kinds_signal_rules(kind, message, component):
    assert kernel_messages.classify(message, "systemd-journald" if "journal" in message
                                    else None).kind == kind
    rule = signals.rule_for(kind, message, None, None)
    assert (rule.component if rule else None) == component


# --- an ingest with --rules ------------------------------------------------------------


def test_ingest_cli_refuses_a_malformed_rules_file_before_reading(tmp_path):
    bad = _site(tmp_path, SITE.replace("gpu_lost", "gpu_lsot"))
    out = CliRunner().invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "d.duckdb"),
                                   "--rules", str(bad)])
    assert out.exit_code == 2
    assert "gpu_lsot" in out.output and not (tmp_path / "d.duckdb").exists()


@pytest.mark.slow
def test_ingest_with_site_rules_is_idempotent_and_a_changed_file_reparses(tmp_path):
    from faultline.pipeline.run import ingest

    corpus = tmp_path / "corpus" / "hosts" / "n1"
    corpus.mkdir(parents=True)
    (corpus / "kern.log").write_text(SITE_LINE + XID_LINE)
    db, rules = tmp_path / "t.duckdb", _site(tmp_path)

    def kinds() -> list[str]:
        with duckdb.connect(str(db), read_only=True) as con:
            rows = con.execute("SELECT kind FROM events ORDER BY line_no").fetchall()
            return [k for (k,) in rows]

    assert ingest([corpus.parent.parent], db, rules=(str(rules),)).new_files == 1
    assert kinds() == ["gpu_lost", "xid"]
    assert ingest([corpus.parent.parent], db, rules=(str(rules),)).new_files == 0
    assert ingest([corpus.parent.parent], db).new_files == 1  # without: re-parsed
    assert kinds() == ["xid"]
