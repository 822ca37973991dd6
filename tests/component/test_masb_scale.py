"""Issue 3, acceptance 2: 500 model hosts, a GCD-shaped task mix, in virtual time with overload
injected once the cell is warm; SAN drives overloaded hosts to ≤ 0.5%, no task is lost or
duplicated, and the negotiation statistics are reported (printed with -s).

Sizes (issue 27): the first simulated hour of the acceptance's two-hour run (overload injected at
30 min, the last 10 minutes, 20–30 min after the injection, measured). The run is deterministic
and a shorter duration only truncates it: the 1-hour run's ticks are the 2-hour run's first 60,
tick for tick. The two hours are ``scripts/bench_masb.py model --nodes 500 --hours 2 --seed 11`` (it prints
the same end state). Measured at seed 11, two hours: the overload shed within 6 minutes (at most
1 overloaded host, at 34 min; 0 from 35 min to the end), ~2 migrations a minute after that, so
the second hour added nothing the assertions look at; at one hour: 111 migrations after the
injection (> 10), 0 overloaded in the last 10 minutes. The pending check counts the deferrals of
the run's last minute (the ticks' pending, after each tick's retries, is 0 throughout), so it
sits near its bound at any length: 44 of 5,632 live (0.78 %) at 2 h, 47 of 5,567 (0.84 %) at 1 h;
a 40-minute run with the overload at 20 min ended at 59 of 5,620 (1.05 %) and was not taken.
"""
import time

import pytest

from cellbed.model.cell import ModelCell, ModelCellParams
from cellbed.runtime import run_virtual


@pytest.mark.slow          # 500 hosts, one simulated hour: the full suite, not --quick
def test_500_hosts_overload_is_shed_without_losing_tasks():
    p = ModelCellParams(nodes=500, duration_s=3600, seed=11, overload_share=0.1, overload_factor=2.0,
                        overload_at_s=1800)
    w = time.perf_counter()
    s = run_virtual(ModelCell(p).run())
    wall = time.perf_counter() - w
    last = s.ticks[-1]
    tail = [t for t in s.ticks if t.t_s > p.duration_s - 600]          # the last 10 minutes
    tail_share = sum(t.overloaded for t in tail) / sum(t.nodes for t in tail)
    c = s.counters
    answers = c.get("acceptances", 0) + sum(v for k, v in c.items() if k.startswith("rejections_"))
    collisions = c.get("collisions", 0) / max(1, c.get("process_accepted", 0) + c.get("collisions", 0))
    after = [m for m in s.migrations if m.t_s > p.overload_at_s]
    print(f"\n500 hosts x {p.duration_s / 60:.0f} min: wall {wall:.0f} s "
          f"({p.duration_s / 3600 / (wall / 60):.2f} simulated h per wall min); "
          f"tasks added {s.tasks_added}, live {s.tasks_live}, pending {s.tasks_pending}; "
          f"SANs {c.get('sans_started', 0)}, migrated {c.get('sans_migrated', 0)}, gave up {c.get('sans_gave-up', 0)}; "
          f"acceptances {c.get('acceptances', 0)} of {answers} answers; collision rate {collisions:.1%}; "
          f"migrations after the injection {len(after)}; end: overloaded {last.overloaded}, "
          f"last 10 min: overloaded {[t.overloaded for t in tail]} "
          f"(mean share {tail_share:.2%}); ASR PA {last.pa} DA {last.da} TA {last.ta} STA {last.sta}")
    assert not s.lost and not s.duplicated
    assert s.tasks_live > 4000 and s.tasks_pending <= 0.01 * s.tasks_live
    assert len(after) > 10                                   # the injected overload was really shed
    # ≤ 0.5% overloaded at the end, per minute as the paper counts it: averaged over the last 10 minutes
    assert tail_share <= 0.005
    assert max(t.overloaded for t in s.ticks if t.t_s > p.overload_at_s) >= last.overloaded
    assert c["acceptances"] > 0 and answers > c["acceptances"]  # some candidates said no, with reasons
