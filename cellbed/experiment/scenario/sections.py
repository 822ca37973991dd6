"""The sections of a scenario file ([cell], [workload] with its trace and real-cell scaling, [policy] with its san, megha and sampling tables, [run]): every key with its default, unit, range and documentation."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from cellbed.domain.errors import InvalidArgument
from cellbed.policy.masb.broker_select import POOL_SAMPLINGS
from cellbed.experiment.scenario.schema import knob, section


FRONTENDS = ("masb", "megha", "central", "sampling", "bestfit")
FIT_NAMES = ("sum", "gpa")
CELL_KINDS = ("model", "real", "twin")
SOURCES = ("generator", "trace", "jobs")
SPIKE_POLICIES = ("none", "pause", "kill")
ACCELS = ("auto", "kvm", "tcg")
SAMPLINGS = ("periodic", "event")


@dataclass(frozen=True)
class CellSection:
    """``[cell]``: what the agents run on."""

    kind: str = knob("model", "model = virtual-time model cell; real = namespace hosts with libvirt/QEMU; "
                              "twin = a real scenario's VMs on model hosts in virtual time (cellctl compare)",
                     choices=CELL_KINDS)
    nodes: int = knob(12583, "model cell: nodes drawn from the GCD machine classes (GCD cell: 12,583); "
                             "ignored with a trace, whose machines make the cell", lo=1, hi=1_000_000)
    hosts: int = knob(3, "real cell: number of namespace hosts (cellctl cell up --hosts)", lo=1, hi=32)
    subnet: str = knob("10.231.0.0/24", "real cell: private IPv4 subnet the cell owns, with room for hosts + 16")
    host_cpu_cores: float = knob(0.5, "real cell: CPU capacity per host, cores", lo=0.05, hi=64, unit="cores")
    host_mem_mib: int = knob(1024, "real cell: guest memory capacity per host, MiB", lo=128, hi=1 << 20,
                             unit="MiB")
    accel: str = knob("auto", "real cell: guest acceleration (auto picks kvm when /dev/kvm works)",
                      choices=ACCELS)
    network_delay_s: float = knob(0.0005, "model cell: one-way delay of every agent message, s (Sparrow's and "
                                          "Megha's simulators: 0.5 ms); a real cell has its real network",
                                  lo=0.0, hi=60.0, unit="s")
    sampling: str = knob("periodic", "model cell, masb/bestfit: periodic = every node samples and reports every "
                                     "monitor period, as on a real cell; event = a node whose tasks kept their use "
                                     "since its last two samples skips the sample (and reports again only when "
                                     "that changes or its brokers' entry nears expiry)", choices=SAMPLINGS)

    retry_backoff: bool = knob(False, "model cell, masb/bestfit: a task that found no room is tried again after "
                                      "1, 2, 4, 8, then every 16 ticks (false: at every tick)")
    arrival_window: int = knob(0, "model cell, masb/bestfit: at most this many new tasks' placements in flight at "
                                  "once; the stream waits for room (the warm start's ~11 tasks per node are then "
                                  "placed in waves, bounding memory at 100k nodes; this changes the warm start's "
                                  "placements, see docs/results/scale-benchmark.md); 0 = no bound",
                               lo=0, hi=10_000_000)

    def __post_init__(self) -> None:
        try:
            net = ipaddress.ip_network(self.subnet)
        except ValueError as e:
            raise InvalidArgument(f"cell.subnet={self.subnet!r}: {e}") from None
        if (net.version != 4 or not net.is_private or net.is_loopback or net.is_link_local
                or net.num_addresses < self.hosts + 16):
            raise InvalidArgument(f"cell.subnet={self.subnet!r}: must be a private IPv4 range with room for "
                                  f"cell.hosts + 16 = {self.hosts + 16} addresses")


@dataclass(frozen=True)
class TraceSection:
    """``[workload.trace]``: a GCD-2011 trace folder and the TraceOptions to read it with."""

    path: str = knob("", "folder holding <table>/part-NNNNN-of-MMMMM.csv[.gz]; relative paths are taken "
                         "from the scenario file's folder; required when workload.source = 'trace'")
    window_start_us: int | None = knob(None, "first trace time read, µs of trace time (inclusive); "
                                             "omit = from the start", lo=0, unit="µs")
    window_end_us: int | None = knob(None, "end of the window, µs of trace time (exclusive); omit = to the end",
                                     lo=1, unit="µs")
    node_fraction: float = knob(1.0, "share of machines kept (seeded subset; tasks follow their machines)",
                                lo=0.0, hi=1.0, lo_open=True)
    node_seed: int = knob(0, "seed of the machine subset", lo=0, hi=2**63 - 1)
    removed_task_grace_us: int = knob(600_000_000, "late usage of a removed task within this is tolerated, µs",
                                      lo=0, unit="µs")
    reorder_window_us: int = knob(600_000_000, "rows up to this far back in time within a table are put back in "
                                                "order (usage rows: by start time); rows further back are counted "
                                                "as late_rows and take the last time released, µs", lo=0, unit="µs")

    def __post_init__(self) -> None:
        s, e = self.window_start_us, self.window_end_us
        if s is not None and e is not None and e <= s:
            raise InvalidArgument(f"workload.trace.window_end_us={e} must be > workload.trace.window_start_us={s}")


@dataclass(frozen=True)
class RealScaleSection:
    """``[workload.real]``: how the GCD-shaped stream is scaled down to a real cell's small guests.

    No paper gives these; every default is [RECON].  Tasks that do not become a VM are still
    placed and accounted by the agents (they hold resources) but run no guest.
    """

    task_fraction: float = knob(1.0, "share of eligible tasks that become a real VM (seeded)", lo=0.0, hi=1.0,
                                lo_open=True)
    max_vms_per_host: int = knob(4, "at most this many guests run at once on a host", lo=1, hi=64)
    min_vm_mem_mib: int = knob(96, "floor on a guest's memory (the guest kernel needs it), MiB", lo=64,
                               hi=1 << 20, unit="MiB")
    min_task_s: float = knob(120.0, "tasks shorter than this (simulated s) never become a VM: booting takes "
                                    "seconds", lo=0.0, unit="s")
    dirty_mib_s_per_core: float = knob(8.0, "guest dirty rate per used core, MiB/s (GCD has no dirty rates)",
                                       lo=0.0, hi=4096, unit="MiB/s")


@dataclass(frozen=True)
class JobsSection:
    """``[workload.jobs]``: the Megha paper's experiments' workload (seed 001 §V), for the Megha
    front-ends on a model cell: Poisson jobs of 1-32 tasks on a warm, homogeneous cell.

    The run ends when every task has started, or at ``run.duration_s`` (the drain's bound).
    """

    job_rate_per_1k_nodes: float = knob(10.0, "Poisson job arrivals per s per 1,000 nodes: the load per node "
                                              "stays the same when cell.nodes changes (Megha's size sweep: 100/s "
                                              "at 10,000 nodes)", lo=0.0, hi=1e5, lo_open=True, unit="jobs/s")
    arrivals_s: float = knob(20.0, "jobs arrive during the first arrivals_s of the run; must be < "
                                   "run.duration_s, the rest is the drain", lo=0.0, lo_open=True, unit="s")
    task_min_s: float = knob(2.0, "shortest task, s (durations are log-uniform in [task_min_s, task_max_s], "
                                  "from the task's start)", lo=0.0, lo_open=True, unit="s")
    task_max_s: float = knob(60.0, "longest task, s", lo=0.0, lo_open=True, unit="s")
    fill: float = knob(0.8, "the warm cell: each node starts with background tasks taking U(0, 2 x fill) of its "
                            "CPU (at most 95 %), ending at U(5 s, 2 x arrivals_s)", lo=0.0, hi=0.95)
    node_cpu: float = knob(4.0, "cores per node (homogeneous cell)", lo=0.25, hi=1024, unit="cores")
    node_mem_mib: int = knob(16384, "memory per node, MiB", lo=256, hi=1 << 24, unit="MiB")
    node_classes: tuple[tuple[float, ...], ...] = knob((), "a heterogeneous cell instead: [[count, cores, MiB], "
                                                          "...] in host order (the counts sum to cell.nodes), e.g. "
                                                          "the reference architecture's [[16, 4, 16384], [16, 2, 8192]]")

    def __post_init__(self) -> None:
        for i, c in enumerate(self.node_classes):
            if (len(c) != 3 or c[0] != int(c[0]) or not 1 <= c[0] <= 1_000_000 or not 0.25 <= c[1] <= 1024
                    or not 256 <= c[2] <= 1 << 24):
                raise InvalidArgument(f"workload.jobs.node_classes[{i}]={list(c)}: allowed [count 1..1000000, "
                                      "cores 0.25..1024, MiB 256..16777216]")
        if self.task_min_s > self.task_max_s:
            raise InvalidArgument(f"workload.jobs.task_min_s={self.task_min_s:g} must be <= "
                                  f"workload.jobs.task_max_s={self.task_max_s:g}")


@dataclass(frozen=True)
class WorkloadSection:
    """``[workload]``: what arrives."""

    source: str = knob("generator", "generator = synthetic GCD-shaped stream; trace = GCD-2011 replay; jobs = "
                                    "the Megha paper's Poisson jobs on a warm homogeneous cell ([workload.jobs]; "
                                    "Megha front-ends, model cell)", choices=SOURCES)
    multiplier: float = knob(1.0, "workload multiplier: each task is duplicated floor(m)-1 times, +1 with "
                                  "probability frac(m) (MASB §D.10; Table 4 uses 1.00–1.06)", lo=1.0, hi=64.0)
    compaction: float = knob(0.0, "fraction of nodes removed from the cell (MASB Table 5 uses 0–0.03)",
                             lo=0.0, hi=1.0, hi_open=True)
    time_compression: float = knob(1.0, "real cells: simulated seconds per wall-clock second. Every *_s key of a "
                                        "scenario is simulated time, so on a real cell it lasts *_s / "
                                        "time_compression wall seconds (migrations still take their real time). "
                                        "Model cells run in virtual time and need 1.0",
                                   lo=0.0, hi=1e6, lo_open=True)
    generator: dict[str, Any] = knob(None, "GeneratorConfig fields (cellbed.workload.GeneratorConfig); "
                                           "defaults are the digest §E values", factory=dict)
    trace: TraceSection = section(TraceSection, "trace folder and read options")
    real: RealScaleSection = section(RealScaleSection, "real-cell scale-down")
    jobs: JobsSection = section(JobsSection, "Poisson jobs (workload.source = 'jobs')")


@dataclass(frozen=True)
class SanSection:
    """``[policy.san]``: Service Allocation Negotiation and the NA/BA constants (DESIGN §7)."""

    enabled: bool = knob(True, "run SAN (migration-based rebalancing) on overloaded nodes")
    max_util: float = knob(0.9, "used resources, and production requests (RUS rule), must stay within this "
                                "fraction of capacity", lo=0.0, hi=1.0, lo_open=True)
    rus_threshold: float = knob(0.10, "a spike is a rise of more than this fraction of capacity between two "
                                      "samples", lo=0.0, hi=1.0, lo_open=True)
    candidate_count: int = knob(15, "recommendations per GetCandidateNodes (score-weighted sampling)", lo=1,
                                hi=1000)
    realloc_scan_limit: int = knob(2000, "nodes the BA scores per GetCandidateNodes", lo=1, hi=10_000_000)
    initial_scan_limit: int = knob(200, "nodes the BA scores per initial allocation", lo=1, hi=10_000_000)
    pool_sampling: str = knob("permute", "the BA's random scan order for initial allocation: permute = shuffle "
                                         "every fresh node; draw = draw the first 2 x initial_scan_limit without "
                                         "replacement (the same law, O(limit) instead of O(nodes))",
                              choices=POOL_SAMPLINGS)
    node_expiry_s: float = knob(300.0, "BA cache entries older than this are dropped, s", lo=0.0, lo_open=True,
                                unit="s")
    window_s: float = knob(30.0, "SAN step 3: wait this long for candidates' answers, s", lo=0.0, lo_open=True,
                           unit="s")
    recommendation_expiry_s: float = knob(180.0, "SAN step 4: recommendations expire after this, s", lo=0.0,
                                          lo_open=True, unit="s")
    tabu_restarts: int = knob(25, "SCS tabu search restarts", lo=1, hi=10_000)
    tabu_steps: int = knob(5, "SCS tabu search depth per restart", lo=1, hi=10_000)
    tabu_patience: int = knob(6, "SCS stops after this many non-improving steps", lo=1, hi=10_000)
    monitor_period_s: float = knob(60.0, "NA monitoring period, s (DESIGN §7: 60 on model cells, 10 on real)",
                                   lo=0.0, lo_open=True, unit="s")
    report_period_s: float = knob(60.0, "NA → BA report period, s", lo=0.0, lo_open=True, unit="s")
    spike_policy: str = knob("none", "what an NA does to non-production VMs on a RUS spike",
                             choices=SPIKE_POLICIES)
    scs_log_every: int = knob(50, "keep 1 in this many SCS runs in the decision log (0 = none)", lo=0)
    scoring_log_every: int = knob(5000, "keep 1 in this many scorings/target choices in the decision log "
                                        "(0 = none)", lo=0)


@dataclass(frozen=True)
class MeghaSection:
    """``[policy.megha]``: Global and Local Masters (DESIGN §9; seed 001)."""

    gms: int = knob(10, "Global Masters (Megha's scaling runs: 10)", lo=1, hi=1000)
    lms: int = knob(10, "Local Masters; each LM's cluster is cut into one partition per GM", lo=1, hi=1000)
    update_period_s: float = knob(10.0, "LM → GM state update period, s (Megha: 10)", lo=0.0, lo_open=True,
                                  unit="s")
    shares: tuple[float, ...] = knob((), "fair share of each user queue, fractions summing to 1 (Megha's "
                                         "fairness run: [0.10, 0.25, 0.15, 0.50]); empty = one queue, no "
                                         "fairness preemption; workload user u goes to queue u mod len(shares)",
                                     lo=0.0, hi=1.0, lo_open=True)
    queue_gm: tuple[int, ...] = knob((), "GM index (0-based) serving each queue; empty = queue i → GM i mod gms",
                                     lo=0)

    def __post_init__(self) -> None:
        if self.shares and abs(sum(self.shares) - 1.0) > 1e-6:
            raise InvalidArgument(f"policy.megha.shares={list(self.shares)} must sum to 1 (sum {sum(self.shares):g})")
        if self.queue_gm:
            if len(self.queue_gm) != len(self.shares):
                raise InvalidArgument(f"policy.megha.queue_gm has {len(self.queue_gm)} entries: give one per "
                                      f"queue in policy.megha.shares ({len(self.shares)}), or none")
            for i, g in enumerate(self.queue_gm):
                if g >= self.gms:
                    raise InvalidArgument(f"policy.megha.queue_gm[{i}]={g} is out of range: allowed "
                                          f"[0, {self.gms - 1}] (policy.megha.gms = {self.gms})")


@dataclass(frozen=True)
class SamplingSection:
    """``[policy.sampling]``: the Sparrow-style baseline."""

    probes: int = knob(2, "d: random nodes probed per task (late binding to the first to answer)", lo=1,
                       hi=1000)


def _stage(name: str, what: str) -> Any:
    return knob("", f"stage {name} ({what}): a policy reference, NAME (an installed policy), package.module:attr or "
                    f"file.py:attr (from the scenario's folder); empty = the front-end's built-in "
                    f"(`cellctl policy list`)")


@dataclass(frozen=True)
class PolicySection:
    """``[policy]``: the policy at every stage (DESIGN §17). Every stage key takes a policy
    reference; ``[policy.params.STAGE]`` gives its parameters."""

    frontend: str = knob("masb", "initial placement: masb | megha | central (Megha 1 GM × 1 LM) | sampling "
                                 "(Sparrow-style) | bestfit (Borg-like central best-fit, MASB Table 3)",
                         choices=FRONTENDS)
    fit: str = knob("sum", "stage fit, the SAN target's accept rule: sum (deterministic sums), gpa (Gaussian "
                           "percentile, seed 003), or a policy reference")
    initial_score: str = knob("sias", "stage score for initial allocation (masb front-end): sias, sras, sias_gain, "
                                      "sras_gain, or a policy reference")
    realloc_score: str = knob("sras", "stage score for re-allocation (SAN candidates and target choice): sias, "
                                      "sras, sias_gain, sras_gain, or a policy reference")
    gpa_rho: float = knob(0.01, "fit = gpa: accepted probability that CPU demand exceeds capacity (ϱ)",
                          lo=0.0, hi=0.5, lo_open=True)
    gpa_min_samples: int = knob(100, "fit = gpa: fewest 1-s CPU samples behind μ and σ", lo=2)
    overload: str = _stage("overload", "T6, T12: is a host overloaded")
    task_selection: str = _stage("task_selection", "T12: SCS, which tasks leave an overloaded host")
    candidates: str = _stage("candidates", "R4, R5: the broker's recommendations")
    forced: str = _stage("forced", "T12, R4: forced candidates when no host has room")
    target_order: str = _stage("target_order", "R5: the order of the accepting targets")
    admission: str = _stage("admission", "R4: the node's fit test; empty = used for masb and bestfit (an "
                                         "overcommitted cell, MASB), requested for the others")
    allocation: str = _stage("allocation", "R5: Megha's and central's match, best fit's choice; empty = first_fit, "
                                           "best_fit for bestfit")
    validation: str = _stage("validation", "R4: the LM's check on its true state")
    task_order: str = _stage("task_order", "T2: the sort key of a queued task; empty = fifo")
    preemption: str = _stage("preemption", "T10: whose tasks Megha's fair share preempts")
    probe: str = _stage("probe", "M5, R5: which nodes the sampling scheduler probes")
    params: dict[str, Any] = knob(None, "[policy.params.STAGE]: the parameters of a stage's policy, NAME = VALUE "
                                        "(checked against what the policy declares before the run)", factory=dict)
    errors: str = knob("strict", "a plugin that raises, hangs or breaks its contract: strict = the run ends with "
                                 "exit 1 naming it (results kept, marked failed); isolate = that decision is "
                                 "refused and counted, the run goes on (real agents always isolate)",
                       choices=("strict", "isolate"))
    budget_ms: float = knob(1000.0, "a plugin's time budget per call; over it the decision is refused",
                            lo=0.1, hi=600_000.0, unit="ms")
    san: SanSection = section(SanSection, "SAN switch and constants")
    megha: MeghaSection = section(MeghaSection, "Megha GMs/LMs")
    sampling: SamplingSection = section(SamplingSection, "Sparrow-style sampling")


@dataclass(frozen=True)
class MigrationSection:
    """``[migration]``: the cost of a model cell's migrations."""

    calibration: str = knob("", "calibration file of the migration cost model (JSON, written by cellctl bench "
                                "migration --fit); relative paths are taken from the scenario file's folder; "
                                "checked before the run (missing, unreadable or of another version: refused); "
                                "the manifest records its path and SHA-256. Model cells take their migrations' "
                                "time, bytes, downtime and iterations from it; a real cell's are real. "
                                "Empty = the uncalibrated pre-copy model")


@dataclass(frozen=True)
class RunSection:
    """``[run]``: length, granularity, seed and name."""

    duration_s: float = knob(2_505_600.0, "simulated span, s (GCD: 29 days)", lo=0.0, lo_open=True, unit="s")
    tick_s: float = knob(60.0, "one row of ticks.csv per tick, s (MASB/AGOCS: 1-minute cycles)", lo=0.0,
                         lo_open=True, unit="s")
    seed: int = knob(0, "the run seed: the workload and every agent's RNG derive from it", lo=0, hi=2**63 - 1)
    name: str = knob("", "run name; empty = the scenario file's name")
    explain: float = knob(0.01, "the share of decisions (SAN rounds, Megha placements) explained in "
                                "decisions.jsonl: each candidate's inputs and outputs, the view's age, the "
                                "messages; 1 = all (cellctl run --explain all)", lo=0.0, hi=1.0)

    def __post_init__(self) -> None:
        if self.tick_s > self.duration_s:
            raise InvalidArgument(f"run.tick_s={self.tick_s:g} must be <= run.duration_s={self.duration_s:g}")
