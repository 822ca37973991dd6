"""The chaos campaign's summary arithmetic (issue 12), on a hand-made history."""
from cellbed.experiment.chaos.report import restart_settle_s, summary_rows, text


def row(step, fault, phase, outcome, violations=(), reconciled=False, injected="SIGKILL x", rec_t=10.0, set_t=12.5):
    return {"step": step, "op": "migration", "fault": fault, "phase": phase, "injected": injected,
            "records": [{"id": f"m{step}", "outcome": outcome, "reconciled": reconciled}] if outcome else [],
            "violations": list(violations), "t0": 0.0, "injected_unix_s": 1.0, "recovered_unix_s": rec_t,
            "settled_unix_s": set_t, "settle_s": 2.5}


def test_summary_counts_attempts_outcomes_recoveries_and_violations_per_kind_and_phase():
    rows = [row(0, "kill_src_daemon", "precopy", "succeeded", reconciled=True),
            row(1, "kill_src_daemon", "precopy", "failed", reconciled=True, violations=["lost: a"]),
            row(2, "kill_incoming_qemu", "precopy", "failed", injected="no QEMU of a on h2 at this phase: nothing killed"),
            row(3, "kill_src_daemon", "switchover", "")]
    got = {(r["fault"], r["phase"]): r for r in summary_rows(rows)}
    a = got[("kill_src_daemon", "precopy")]
    assert (a["attempts"], a["injected"], a["outcomes"], a["reconciled"], a["recovered"], a["violations"]) == (
        2, 2, "failed 1, succeeded 1", 2, 1, 1)
    b = got[("kill_incoming_qemu", "precopy")]
    assert (b["attempts"], b["injected"]) == (1, 0)
    assert got[("kill_src_daemon", "switchover")]["outcomes"] == "-"


def test_time_to_settle_after_a_daemon_restart_is_from_the_restart():
    rows = [row(0, "kill_src_daemon", "precopy", "succeeded", rec_t=10.0, set_t=12.0),
            row(1, "kill_dst_daemon", "precopy", "succeeded", rec_t=20.0, set_t=26.0),
            row(2, "link_cut", "precopy", "succeeded", rec_t=0.0, set_t=100.0)]
    assert restart_settle_s(rows) == [2.0, 6.0]
    t = text(rows, {"cell": "c", "seed": 1})
    assert "p50 4.0 s" in t and "n=2" in t and "0 violation(s)" in t
