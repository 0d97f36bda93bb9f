"""Cause or consequence (docs/root_causes.md, section 2a), hardware suspect vs where a
fault surfaced, the culprit GPU's serial from the inventory, and drain state changes.

Unit tests build small event sets for :func:`decide`; the end-to-end test ingests a
handmade corpus through the CLI (test_cause_consequence_ingest.py). Real wordings
used below:

* ``NVRM: Xid (PCI:0000:38:00): 43, pid=2924364, name=pt_main_thread, Ch 00000008``:
  leptonai/gpud (Apache-2.0), components/memory/testdata/dmesg.decode.iso.log at
  4a8de33a3f02e207f39e9023d67125592d599731 (../shared/peer-data/gpud); here with other
  PCI addresses and pids, one per host.
* ``error: Nodes <host> not responding, setting DOWN``, ``Killing JobId=<id> on failed
  node <host>``, ``update_node: node <host> state set to DRAINING``: SchedMD/slurm
  (GPL-2.0) ping_nodes.c / job_mgr.c / node_mgr.c, as quoted in
  ../shared/reference/log_signatures.md section 4.18.
* ``Temperature GPU3_Temp | Upper Critical going high | Asserted | Reading 95 >
  Threshold 90 degrees C``: ipmitool ``sel elist`` shape (log_signatures.md, BMC SEL).
"""

from __future__ import annotations

import duckdb
import pytest

from faultline.classifiers import causes, culprits
from faultline.classifiers.interruptions import Candidate, decide, drain_reason
from faultline.pipeline.parsers import slurmctld
from faultline.pipeline.parsers.hosts import HostResolver

FAILED = 1_735_000_000.0
HOSTS = [f"n{i}" for i in range(1, 9)]
ATTEMPT = ("run", "100", FAILED - 3600, FAILED, "FAILED", "n[1-8]", None, 1)
_ids = iter(range(10**6))


def ev(dt: float, host: str | None, kind: str, xid: int | None = None, message: str = "",
       attrs: dict | None = None, gpu: int | None = None, device: str | None = None
       ) -> Candidate:
    """An event ``dt`` seconds after the attempt's end (negative: before it)."""
    return Candidate(f"e{next(_ids):06d}", FAILED + dt, host, kind, xid, message,
                     attrs or {}, gpu, None, device)


def xid43(dt: float, host: str, gpu: int = 0) -> Candidate:
    return ev(dt, host, "xid", 43, f"NVRM: Xid (PCI:0000:{0x18 + gpu:02x}:00): 43, "
              "pid=2924364, name=pt_main_thread, Ch 00000008", gpu=gpu,
              device=f"0000:{0x18 + gpu:02x}:00.0")


def not_responding(dt: float, host: str) -> Candidate:
    return ev(dt, host, "node_not_responding",
              message=f"error: Nodes {host} not responding, setting DOWN")


def run(cands: list[Candidate], watchdog: dict | None = None, hosts: list[str] = HOSTS,
        texts: dict | None = None):
    return decide(cands, watchdog or {}, hosts, FAILED, ATTEMPT, texts or {},
                  HostResolver())


# --- time order and the attempt's end -------------------------------------------------

def test_teardown_xid_after_the_end_is_a_consequence_of_the_node_that_stopped():
    nr = not_responding(-1, "n3")
    late = xid43(4, "n1")
    d = run([nr, late])
    assert (d.component, d.root, d.rule_id) == ("Host Maintenance", nr,
                                                "sched.not_responding")
    assert d.evidence[late.event_id] == "symptom"
    assert d.surfaced_host == "n3"


def test_an_app_xid_before_the_end_on_one_host_still_names_the_cause():
    """Time order, not the kind, decides: the same Xid written before the stop is a
    cause (tier 3 outranks a node that stopped answering)."""
    early = xid43(-10, "n1")
    d = run([early, not_responding(-1, "n3")])
    assert (d.component, d.root) == ("Software Bug", early)


def test_after_the_end_is_the_cause_when_nothing_before_explains_the_stop():
    late = xid43(4, "n1")
    d = run([late])
    assert (d.component, d.root, d.rule_id) == ("Software Bug", late, "xid.43")


@pytest.mark.parametrize(("dt", "consequence"), [
    (0.0, False), (causes.END_GRACE_S, False), (causes.END_GRACE_S + 0.01, True),
    (30.0, True),
])
def test_the_attempts_end_with_sacct_resolution(dt, consequence):
    late = xid43(dt, "n1")
    d = run([late, not_responding(-1, "n3")])
    assert (d.root is not late) == consequence


def test_watchdog_timeouts_before_the_end_explain_a_hang():
    late = xid43(5, "n2")
    ranks = {h: set(range(i * 8, i * 8 + 8)) for i, h in enumerate(HOSTS)}
    ranks["n4"] = ranks["n4"] - {27}  # rank 27 (n4 GPU 3) never reported
    d = run([late], watchdog=ranks)
    assert (d.component, d.rule_id) == ("NCCL Watchdog Timeouts",
                                        "nccl.watchdog_straggler")
    assert (d.surfaced_host, d.surfaced_gpu) == ("n4", 3)
    assert d.evidence[late.event_id] == "symptom"


def test_a_vanished_peer_before_the_end_explains_more_than_a_teardown_xid():
    # NCCL <= 2.17 wording (log_signatures.md, section 4: NCCL transport)
    peer = ev(-8, "n1", "nccl_ib_error", message="NET/IB : Got completion from peer "
              "10.1.0.13<47120> with error 12, opcode 0, len 0, vendor err 129")
    late = xid43(3, "n2")
    d = run([peer, late])
    assert (d.component, d.root) == ("Network Switch/Cable", peer)
    assert d.evidence[late.event_id] == "symptom"


def test_hardware_after_the_end_keeps_the_clock_allowance():
    """A PSU does not fail because a job was killed, and BMC clocks drift: a hardware
    or host signal within the skew allowance is still the cause."""
    psu = ev(60, "n5", "sel_power", message="Power Supply PSU1_Status | Failure "
             "detected () | Asserted")
    d = run([not_responding(-1, "n5"), psu])
    assert (d.component, d.root) == ("Power Supply", psu)


def test_sram_error_before_the_end_wins_over_teardown_xids():
    sram = ev(-20, "n2", "xid", 95, "NVRM: Xid (PCI:0000:2a:00): 95, pid=<unknown>, "
              "name=<unknown>, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No", gpu=1,
              device="0000:2a:00.0")
    late = [xid43(3 + 0.2 * i, h) for i, h in enumerate(HOSTS)]
    d = run([sram, *late])
    assert (d.component, d.root) == ("GPU SRAM Memory", sram)
    assert all(d.evidence[x.event_id] == "symptom" for x in late)


def test_a_drain_reason_explains_the_stop_over_a_teardown_xid():
    """A health check's reason for the node (SRAM ECC) is an account of the stop: the
    teardown Xid after the end is no cause beside it."""
    late = xid43(6, "n2")
    drain = ev(600, "n2", "node_drain", message="update_node: node n2 reason set to: "
               "gpu 1 uncorrectable SRAM ECC", attrs={"reason": "gpu 1 uncorrectable SRAM "
                                                      "ECC"})
    texts = {drain.event_id: ("GPU SRAM Memory", 0.9, "m")}
    d = run([late, drain], texts=texts)
    assert (d.component, d.root, d.culprit_gpu) == ("GPU SRAM Memory", drain, 1)
    assert d.evidence[late.event_id] == "symptom"
    assert run([late]).root is late  # without it, the Xid is all there is


# --- host spread ----------------------------------------------------------------------

@pytest.mark.parametrize(("job_hosts", "need"), [
    (0, 3), (1, 2), (2, 2), (3, 2), (4, 2), (5, 3), (8, 3), (2048, 3),
])
def test_spread_threshold(job_hosts, need):
    assert causes.spread_threshold(job_hosts) == need


def test_app_xids_on_many_hosts_at_once_are_the_job_dying_even_before_the_end():
    dying = [xid43(-2 + 0.1 * i, h) for i, h in enumerate(HOSTS[:4])]
    nr = not_responding(-1, "n7")
    d = run([*dying, nr])
    assert (d.component, d.root) == ("Host Maintenance", nr)
    assert {d.evidence[x.event_id] for x in dying} == {"symptom"}


def test_app_xids_spread_over_minutes_are_no_burst():
    apart = [xid43(-300 + 60 * i, h) for i, h in enumerate(HOSTS[:3])]
    assert causes.job_dying(apart, len(HOSTS)) == set()
    d = run([*apart, not_responding(-1, "n7")])
    assert (d.component, d.root) == ("Software Bug", apart[0])


def test_the_catalogs_application_xids_count_for_the_spread():
    assert {13, 31, 43, 45} <= causes.app_xids()
    assert causes.app_xids().isdisjoint({48, 79, 74, 94, 95, 119, 140})  # hardware
    mixed = [ev(-1, "n1", "xid", 13, gpu=0), ev(-0.9, "n2", "xid", 31, gpu=0),
             ev(-0.8, "n3", "xid", 43, gpu=0)]
    assert causes.job_dying(mixed, 8) == {m.event_id for m in mixed}
    hw = [ev(-1 + 0.1 * i, h, "xid", 79, gpu=0) for i, h in enumerate(HOSTS[:3])]
    assert causes.job_dying(hw, 8) == set()


def test_the_host_whose_kernels_faulted_first_leads_the_burst():
    """An Xid 13 on n1 three seconds before the others' teardown is where the crash
    began: the cause, not part of the job dying; the peers' NCCL errors do not win."""
    lead = ev(-8, "n1", "xid", 13, "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', "
              "name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of "
              "Range Address", gpu=4)
    rest = [xid43(-5 + 0.1 * i, h) for i, h in enumerate(HOSTS[1:])]
    peer = ev(-4, "n5", "nccl_ib_error", message="NET/IB : Got completion from peer "
              "10.1.0.11<47120> with error 12, opcode 0, len 0, vendor err 129")
    d = run([lead, *rest, peer])
    assert (d.component, d.root, d.surfaced_host, d.surfaced_gpu) == (
        "Software Bug", lead, "n1", 4)
    assert {d.evidence[x.event_id] for x in rest} == {"symptom"}


@pytest.mark.parametrize(("code", "lead_dt", "leads"), [
    (13, -8, True), (31, -8, True),
    (43, -8, False),  # a channel stopping first is still teardown
    (13, -5.5, False),  # within a second of the others: no leader
    (13, 0.5, True), (13, 2, False),  # after the end it leads nothing
])
def test_who_leads_a_burst(code, lead_dt, leads):
    lead = ev(lead_dt, "n1", "xid", code, gpu=0)
    rest = [ev(-5 + 0.1 * i if lead_dt < 0 else 3 + 0.1 * i, h, "xid", 43, gpu=0)
            for i, h in enumerate(HOSTS[1:4])]
    dying = causes.job_dying([lead, *rest], len(HOSTS), FAILED)
    assert dying >= {r.event_id for r in rest}
    assert (lead.event_id not in dying) == leads


def test_two_hosts_of_a_two_host_job_are_the_whole_job():
    pair = [xid43(-1, "n1"), xid43(-0.5, "n2")]
    assert causes.job_dying(pair, 2) == {p.event_id for p in pair}
    assert causes.job_dying(pair, 8) == set()


def test_only_the_job_dying_is_a_software_bug_with_no_place():
    dying = [xid43(2 + 0.1 * i, h) for i, h in enumerate(HOSTS)]
    d = run(dying)
    assert (d.component, d.rule_id, d.root) == ("Software Bug", "xid.43.job_wide",
                                                dying[0])
    assert d.confidence < 0.85 * 0.8
    where = culprits.placement(d.component, d.culprit_host, d.culprit_gpu,
                               d.culprit_serial, d.surfaced_host, d.surfaced_gpu,
                               culprits.Inventory(), FAILED)
    assert where["culprit_host"] is None


# --- drain state changes --------------------------------------------------------------

def test_a_state_change_carries_no_reason():
    line = ("[2024-07-01T12:01:10.552] update_node: node node0042 state set to DRAINING")
    (e,) = slurmctld.parse_line(line)
    assert "reason" not in e.attrs
    c = Candidate("x", 0.0, e.host, e.kind, None, e.message, e.attrs, None, None, None)
    assert drain_reason(c) is None
    reason = slurmctld.parse_line("[2024-07-01T12:01:10.551] update_node: node node0042 "
                                  "reason set to: xid 79 gpu 3")[0]
    assert drain_reason(Candidate("y", 0.0, reason.host, reason.kind, None,
                                  reason.message, reason.attrs, None, None,
                                  None)) == "xid 79 gpu 3"
    for empty in ("", "  ", "none", "(null)"):
        assert drain_reason(Candidate("z", 0.0, "n1", "node_drain", None, "m",
                                      {"reason": empty}, None, None, None)) is None


def test_a_draining_line_is_a_symptom_not_contradicting_evidence():
    nr = not_responding(-1, "n3")
    state = ev(120, "n3", "node_drain", message="update_node: node n3 state set to "
               "DRAINING", attrs={"state": "DRAINING", "rule": "ctld.state_set"})
    d = run([nr, state])  # no text for it: _classify_texts never sees it
    assert d.evidence[state.event_id] == "symptom"
    assert d.confidence == pytest.approx(0.55)


# --- hardware suspect, where it surfaced, serial ---------------------------------------

@pytest.mark.parametrize(("component", "hardware"), [
    ("Faulty GPU", True), ("GPU Thermal Interface + Sensor", True), ("NIC", True),
    ("Network Switch/Cable", True), ("Silent Data Corruption", True),
    ("Software Bug", False), ("NCCL Watchdog Timeouts", False), ("Dependency", False),
    ("Host Maintenance", False), ("Planned Maintenance", False), ("Unattributed", False),
])
def test_which_components_have_a_hardware_suspect(component, hardware):
    assert culprits.is_hardware(component) is hardware


def _inventory() -> culprits.Inventory:
    inv = culprits.Inventory()
    for g in range(8):
        inv.add("n4", g, None, f"16500000000{g:02d}", f"GPU-0000000{g}")
    return inv


def test_bmc_thermal_culprit_gets_the_inventorys_serial():
    sel = ev(-300, "n4", "sel_thermal", message="Temperature GPU3_Temp | Upper Critical "
             "going high | Asserted | Reading 95 > Threshold 90 degrees C")
    d = run([sel])
    assert (d.component, d.culprit_host, d.culprit_gpu) == (
        "GPU Thermal Interface + Sensor", "n4", 3)
    where = culprits.placement(d.component, d.culprit_host, d.culprit_gpu,
                               d.culprit_serial, d.surfaced_host, d.surfaced_gpu,
                               _inventory(), FAILED)
    assert where == {"culprit_host": "n4", "culprit_gpu": 3,
                     "culprit_gpu_serial": "1650000000003", "culprit_gpu_uuid": "GPU-00000003",
                     "surfaced_host": "n4", "surfaced_gpu": 3,
                     "surfaced_gpu_serial": "1650000000003"}


def test_sdc_culprit_named_by_the_trainer_gets_the_serial():
    sdc = ev(-5, None, "checksum_mismatch", message="ERROR parameter checksum mismatch "
             "between data-parallel replicas: rank 29 (node n4, device 5) differs from "
             "its replicas")
    d = run([sdc])
    where = culprits.placement(d.component, d.culprit_host, d.culprit_gpu,
                               d.culprit_serial, d.surfaced_host, d.surfaced_gpu,
                               _inventory(), FAILED)
    assert (where["culprit_host"], where["culprit_gpu"], where["culprit_gpu_serial"]) == (
        "n4", 5, "1650000000005")


def test_straggler_is_where_a_hang_surfaced_not_a_suspect():
    ranks = {h: set(range(i * 8, i * 8 + 8)) for i, h in enumerate(HOSTS)}
    ranks["n4"] = ranks["n4"] - {26}
    d = run([], watchdog=ranks)
    where = culprits.placement(d.component, d.culprit_host, d.culprit_gpu,
                               d.culprit_serial, d.surfaced_host, d.surfaced_gpu,
                               _inventory(), FAILED)
    assert (where["surfaced_host"], where["surfaced_gpu"],
            where["surfaced_gpu_serial"]) == ("n4", 2, "1650000000002")
    assert where["culprit_host"] is None and where["culprit_gpu_serial"] is None


def test_software_bug_surfaces_without_a_suspect():
    seg = ev(-3, "n6", "segfault", message="pt_main_thread[2231]: segfault at 7f797fe00000 "
             "ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000"
             "+d3d3000]")
    d = run([seg])
    where = culprits.placement(d.component, d.culprit_host, d.culprit_gpu,
                               d.culprit_serial, d.surfaced_host, d.surfaced_gpu,
                               _inventory(), FAILED)
    assert d.component == "Software Bug"
    assert where["surfaced_host"] == "n6" and where["culprit_host"] is None


def test_the_inventory_in_force_at_the_failure():
    inv = culprits.Inventory()
    inv.add("n1", 2, FAILED - 86400, "OLD", "GPU-old")
    inv.add("n1", 2, FAILED + 3600, "NEW", "GPU-new")  # swapped after the failure
    assert inv.lookup("n1", 2, FAILED) == ("OLD", "GPU-old")
    assert inv.lookup("n1", 2, FAILED + 7200) == ("NEW", "GPU-new")
    assert inv.lookup("n1", 2, FAILED - 2 * 86400) == ("OLD", "GPU-old")  # first known
    inv.add("n1", 3, None, "UNTIMED", None)
    assert inv.lookup("n1", 3, FAILED) == ("UNTIMED", None)
    assert inv.lookup("n1", 4, FAILED) == (None, None)
    assert inv.lookup(None, 2, FAILED) == (None, None)


def test_recurring_culprits_lists_hardware_suspects_only(tmp_path):
    from faultline.db import connect

    con = connect(tmp_path / "v.duckdb")
    base = {"run": "r", "planned": False, "signal_family": None, "root_event_id": None,
            "rule_id": "x", "confidence": 1.0, "lost_seconds": None,
            "downtime_seconds": None, "taxonomy_version": "t", "culprit_gpu_uuid": None,
            "surfaced_gpu": 0, "surfaced_gpu_serial": None}
    rows = []
    for i, (comp, cat) in enumerate([("Software Bug", "Dependency")] * 3
                                    + [("NCCL Watchdog Timeouts", "Unknown")] * 2
                                    + [("Faulty GPU", "GPU")] * 2):
        rows.append({**base, "interruption_id": f"i{i}", "job_id": str(i),
                     "failed_at": FAILED + i, "component": comp, "category": cat,
                     "culprit_host": "sw-host" if cat != "GPU" else "hw-host",
                     "culprit_gpu": 0, "culprit_gpu_serial": "S-sw" if cat != "GPU"
                     else "S-hw", "surfaced_host": "x"})
    cols = [c[0] for c in con.execute("DESCRIBE interruptions").fetchall()]
    con.executemany(f"INSERT INTO interruptions VALUES ({', '.join(['?'] * len(cols))})",
                    [[r[c] if c != "failed_at" else
                      duckdb.execute("SELECT to_timestamp(?)", [r[c]]).fetchone()[0]
                      for c in cols] for r in rows])
    got = con.execute("SELECT scope, culprit_host, culprit_gpu_serial, interruptions "
                      "FROM recurring_culprits ORDER BY 1").fetchall()
    assert got == [("gpu", "hw-host", "S-hw", 2), ("host", "hw-host", None, 2)]
    assert set(culprits.HARDWARE_CATEGORIES) == {"GPU", "Host", "Network"}
    from faultline.html_report import data  # the report's lists suggest replacement too

    assert {r["host"] for r in data._culprit_hosts(con, "r")} == {"hw-host"}
    assert [(r["host"], r["serial"], r["interruptions"])
            for r in data._culprit_gpus(con, "r")] == [("hw-host", "S-hw", 2)]


def test_gsp_timeout_after_a_gpu_fell_off_the_bus_without_an_xid_is_its_consequence():
    """The R5xx three-line report of a GPU gone from the bus carries no Xid number but
    means 79 (docs/rules.md); the GSP RPC timeout (Xid 119) the driver writes for that
    GPU seconds later is a consequence, whichever of the two shapes the 79 took."""
    dev = "0000:3b:00.0"
    gone = ev(-30, "n2", "gpu_fallen_off_bus", 79,
              "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", device=dev)
    gsp = ev(-25, "n2", "xid", 119, "NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=python, "
             "Timeout after 6s of waiting for RPC response from GPU0 GSP!", device=dev)
    d = run([gone, gsp])  # in time order, as the window gives them
    assert (d.component, d.root) == ("Faulty GPU", gone)
    assert d.evidence.get(gsp.event_id) != "contradicting"  # it does not argue for GSP
    assert d.confidence == run([gone]).confidence
