"""The Flight Recorder tier: a verdict names the culprit of a watchdog-only stop, above
the straggler guess, and corroborates or contradicts a hardware root."""

from __future__ import annotations

from faultline.classifiers import fr_tier
from faultline.classifiers.interruptions import Candidate, Decision


def verdict(kind: str, host: str = "node0013", gpu: int | None = 4) -> fr_tier.Verdict:
    return fr_tier.Verdict(kind, [12], host, gpu, fr_tier.words(
        kind, 74, "EXPERT_MODEL_PARALLEL_GROUP", "all_to_all", 20536, [12], host, gpu), "ev-12")


def straggler_guess() -> Decision:
    return Decision("NCCL Watchdog Timeouts", "NCCL watchdog", "nccl.watchdog_only", 0.6)


def xid(host: str, n: int = 79) -> Candidate:
    return Candidate("x1", 1.0, host, "xid", n, f"NVRM: Xid (PCI:0000:3b:00): {n}, pid=1",
                     {}, 4, None, "0000:3b:00.0")


def test_words_match_the_issue() -> None:
    assert verdict("never_entered").words == (
        "PG 74 EXPERT_MODEL_PARALLEL_GROUP all_to_all #20536: ranks 12 never entered; "
        "rank 12 = node0013 GPU 4")


def test_cpu_side_hang_with_nothing_on_the_host_is_a_software_bug() -> None:
    d = straggler_guess()
    fr_tier.apply(d, verdict("never_entered"), [])
    assert (d.component, d.rule_id, d.culprit_host, d.culprit_gpu) == (
        "Software Bug", "fr.never_entered", "node0013", 4)
    assert d.evidence == {"ev-12": "root"}


def test_cpu_side_hang_with_hardware_on_the_host_stays_a_watchdog_timeout() -> None:
    d = straggler_guess()
    fr_tier.apply(d, verdict("never_entered"), [xid("node0013")])
    assert (d.component, d.culprit_host) == ("NCCL Watchdog Timeouts", "node0013")
    d = straggler_guess()
    fr_tier.apply(d, verdict("never_entered"), [xid("node0099")])
    assert d.component == "Software Bug"


def test_not_completed_names_the_culprit_of_the_watchdog_timeout() -> None:
    d = Decision("NCCL Watchdog Timeouts", "NCCL watchdog", "nccl.watchdog_straggler", 0.6,
                 culprit_host="node0001")
    fr_tier.apply(d, verdict("not_completed"), [])
    assert (d.component, d.rule_id, d.culprit_host) == (
        "NCCL Watchdog Timeouts", "fr.not_completed", "node0013")


def test_hardware_root_is_corroborated_or_contradicted() -> None:
    d = Decision("Faulty GPU", "fallen off bus", "gpu.fallen_off_bus", 0.9,
                 culprit_host="node0013")
    fr_tier.apply(d, verdict("not_completed"), [])
    assert d.evidence == {"ev-12": "corroborating"} and d.confidence > 0.9
    assert d.component == "Faulty GPU"
    d = Decision("Faulty GPU", "fallen off bus", "gpu.fallen_off_bus", 0.9,
                 culprit_host="node0002")
    fr_tier.apply(d, verdict("not_completed"), [])
    assert d.evidence == {"ev-12": "contradicting"} and d.confidence < 0.9
    assert d.culprit_host == "node0002"


def test_no_verdict_changes_nothing() -> None:
    d = straggler_guess()
    fr_tier.apply(d, None, [])
    assert d == straggler_guess()


def test_explain_shows_each_verdict_in_words() -> None:
    import duckdb

    from faultline.explain import hang_words
    from faultline.schemas.ddl import create_table_sql
    from faultline.schemas.tables import COLLECTIVE_HANGS

    con = duckdb.connect()
    con.execute(create_table_sql(COLLECTIVE_HANGS))
    con.execute("""INSERT INTO collective_hangs VALUES
        ('9', 74, '74', 'EXPERT_MODEL_PARALLEL_GROUP', false, 20536, 'all_to_all', '{}', '{}',
         [8, 12], [12], 'never_entered', [12], 'node0013', 4, '/c/nccl_trace_rank_12', 2),
        ('9', 0, '0', 'default_pg', false, 7, 'all_reduce', '{}', '{}',
         [0, 1, 2], [2], 'incomplete_dumps', [], NULL, NULL, '/c/nccl_trace_rank_0', 2)""")
    assert hang_words(con, "9") == [
        "PG 0 default_pg all_reduce #7: no dump from ranks 2, no culprit named",
        "PG 74 EXPERT_MODEL_PARALLEL_GROUP all_to_all #20536: ranks 12 never entered; "
        "rank 12 = node0013 GPU 4 (/c/nccl_trace_rank_12)"]
    assert hang_words(con, "10") == []
    con.execute("""INSERT INTO collective_hangs VALUES
        ('11', 0, '0', 'default_pg', false, 9, 'all_reduce', '{"0": [[8]], "1": [[8]],
         "2": [[4]]}', '{"0": ["Float"], "1": ["Float"], "2": ["Float"]}', [0, 1, 2],
         [0, 1, 2], 'mismatch', [2], 'node0003', 1, '/c/nccl_trace_rank_2', 3),
        ('11', 2, '7', 'PIPELINE_MODEL_PARALLEL_GROUP', true, 41, 'send 0->1', '{}', '{}',
         [1, 2], [1, 2], 'never_entered', [2], 'node0003', 1, '/c/nccl_trace_rank_2', 3),
        ('12', 0, '0', 'default_pg', false, 5, 'all_reduce', '{}', '{}', [0, 1], [0, 1],
         'not_completed', [], NULL, NULL, '/c/nccl_trace_rank_0', 2)""")
    assert hang_words(con, "11") == [
        "PG 0 default_pg all_reduce #9: ranks 2 disagree on sizes ([[4]] vs [[8]]); "
        "rank 2 = node0003 GPU 1 (/c/nccl_trace_rank_2)",
        "PG 2 PIPELINE_MODEL_PARALLEL_GROUP send 0->1 p2p #41: ranks 2 never entered; "
        "rank 2 = node0003 GPU 1 (/c/nccl_trace_rank_2)"]
    assert hang_words(con, "12") == [
        "PG 0 default_pg all_reduce #5: every member entered, none finished: no single "
        "rank stands out"]


def test_mismatch_detail_says_what_differs() -> None:
    assert fr_tier.mismatch_detail("all_reduce | broadcast", "{}", "{}", [1]) == (
        "op (all_reduce | broadcast)")
    dtypes = '{"0": ["Float"], "1": ["BFloat16"], "2": ["Float"]}'
    sizes = '{"0": [[8]], "1": [[8]], "2": [[8]]}'
    assert fr_tier.mismatch_detail("all_reduce", sizes, dtypes, [1]) == (
        'dtypes (["BFloat16"] vs ["Float"])')
    # nothing to compare (one rank recorded it, or unreadable): the generic words
    assert fr_tier.mismatch_detail("all_reduce", '{"1": [[8]]}', "not json", [1]) is None
    v = fr_tier.words("mismatch", 0, "default_pg", "all_reduce", 3, [1], None, None)
    assert v == "PG 0 default_pg all_reduce #3: ranks 1 disagree on op, sizes or dtypes"


def test_a_dump_speaks_only_for_the_attempt_it_was_recorded_in() -> None:
    v = fr_tier.Verdict("never_entered", [12], "node0013", 4, "", "ev", ts_us=5_000_000)
    hangs = {"9": v}
    assert fr_tier.for_attempt(hangs, "9", 1_000_000, 4_000_000) is v  # written after
    assert fr_tier.for_attempt(hangs, "9", 6_000_000, 9_000_000) is None  # a later attempt
    assert fr_tier.for_attempt(hangs, "9", 0, 5_000_000 - 3600 * 10**6) is None
    assert fr_tier.for_attempt(hangs, "8", 0, 10**9) is None


def hang_row(verdict: str, culprits: list[int], missing: list[int], members: list[int],
             pg: str, p2p: bool = False) -> tuple:
    """A collective_hangs row as fr_tier.load reads it."""
    return ("9", verdict, culprits, missing, members, "node0001", 1, 0, pg, "", "op", 1,
            p2p, "{}", "{}", None, None)


def test_a_hang_that_spread_speaks_where_it_began() -> None:
    # rank 6 never posted its recv from 22; 22 waits in its send; the TP peers of both
    # wait in their reduce-scatter; every other rank waits in the all_reduce
    pp = hang_row("never_entered", [6], [6, 22], [6, 22], "11", p2p=True)
    tp6 = hang_row("never_entered", [6], list(range(8)), list(range(8)), "1")
    tp22 = hang_row("never_entered", [22], list(range(16, 24)), list(range(16, 24)), "3")
    ar = hang_row("never_entered", [*range(8), *range(16, 24)], list(range(32)),
                  list(range(32)), "0")
    assert fr_tier.ranked([ar, tp6, tp22, pp]) is pp
    # rank 9's GPU never ran the TP reduce-scatter: its host never entered the all_reduce
    tp = hang_row("not_completed", [9], list(range(8, 16)), list(range(8, 16)), "2")
    ar = hang_row("never_entered", list(range(8, 16)), list(range(32)), list(range(32)),
                  "0")
    assert fr_tier.ranked([ar, tp]) is tp
    # a stall that did not spread: the one row speaks; no culprit, no verdict
    assert fr_tier.ranked([ar]) is ar
    assert fr_tier.ranked([hang_row("not_completed", [], [0, 1], [0, 1], "0")]) is None
