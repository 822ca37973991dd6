"""Parameters of the model cell: what every front-end shares, and each front-end family's own block."""
from __future__ import annotations

import dataclasses

from cellbed.controller.megha.params import CostModel
from cellbed.daemon.san import SanConfig
from cellbed.domain.errors import InvalidArgument, check_range
from cellbed.domain.overhead import GuestOverhead
from cellbed.policy.masb.broker_select import BrokerParams
from cellbed.policy.migration import costfile
from cellbed.policy.migration.cost import PrecopyParams
from cellbed.metrics.rows import MigrationRow, TickRow
from cellbed.workload.generator import DEFAULT_ATTRIBUTE_PROBS

MASB_FRONTENDS = ("masb", "bestfit")
MEGHA_FRONTENDS = ("megha", "central", "sampling")
FRONTENDS = MASB_FRONTENDS + MEGHA_FRONTENDS
MACHINES = ("homogeneous", "stream")
SAMPLINGS = ("periodic", "event")

END_WITH_HOST_S = 60.0
"""A task on a host that leaves the cell, whose own end in the trace (EVICT, LOST, FAIL...) comes
within this many seconds of the removal, ends with its host instead of being placed again: GCD
records a removed machine's task ends at, or shortly after, its REMOVE."""

MIN_HOST_CPU = 0.01
MIN_HOST_MEM_MIB = 64
"""The smallest host a NodeConfig allows: a stream machine with less (an empty GCD capacity
field) gets this."""


def migration_calibration(path: str) -> costfile.CalibrationFile | None:
    """The migration cost model's calibration file that a scenario names (``migration.calibration``),
    read and checked (InvalidArgument naming the file: missing, unreadable, another version, a bad
    parameter); None when it names none. Its ``params`` become ``ModelCellParams.cost``."""
    return costfile.read(path) if path else None


@dataclasses.dataclass(frozen=True)
class MeghaParams:
    """The Megha front-ends' cell: homogeneous nodes, G GMs × L LMs (central: 1 × 1) or the
    sampling baseline, with a processing-cost model charged by the virtual clock."""

    node_cpu: float = 4.0                   # cores per node
    node_mem_mib: int = 16384               # MiB per node
    gms: int = 2                            # Global Masters (central: 1)
    lms: int = 2                            # Local Masters (central: 1); hosts split in equal blocks
    update_period_s: float = 10.0           # LM -> GM periodic state (Megha: 10 s)
    probes: int = 2                         # sampling: d
    schedulers: int = 0                     # sampling schedulers; 0 = as many as GMs
    shares: tuple[tuple[str, float], ...] = ()   # (user, share); empty: one equal queue per GM, no fairness
    queue_gm: tuple[int, ...] = ()          # GM index (0-based) per share entry; empty: i mod gms
    fairness: bool = False                  # preemption under contention (needs shares)
    cost: CostModel | None = CostModel()    # modelled processing times; None = zero
    background_fill: float = 0.0            # mean share of each node's CPU pre-filled at t=0 (a warm cell)
    background_s: tuple[float, float] = (10.0, 120.0)   # background tasks run U(lo, hi) s, then end
    attribute_clusters: int = 10            # nodes are cut in this many blocks, each with its own
                                            # attribute prevalence factor (same cell for every front-end)
    standby: bool = False                   # give every LM a standby instance
    attribute_probs: tuple[float, ...] = DEFAULT_ATTRIBUTE_PROBS
    node_classes: tuple[tuple[float, float, int], ...] = ()   # (count, cores, MiB) in host order: a
                                            # heterogeneous cell of these classes instead of node_cpu/node_mem_mib
    machines: str = "homogeneous"           # homogeneous: `nodes` hosts as above (the stream's machines stand
                                            # for them in order: their joins and leaves apply); stream: the
                                            # hosts are the stream's machines, capacities and attributes (a trace)


@dataclasses.dataclass(frozen=True)
class ModelCellParams:
    """The model cell. ``frontend`` chooses the placement front-end; the MASB fields apply to
    ``masb``/``bestfit``, the :class:`MeghaParams` block to ``megha``/``central``/``sampling``."""

    frontend: str = "masb"                 # masb | bestfit | megha | central | sampling
    nodes: int = 500
    seed: int = 0
    latency_s: float = 0.0005              # one way, in-process network
    jitter_s: float = 0.0005
    monitor_period_s: float = 60.0
    duration_s: float = 7200.0
    tick_s: float = 60.0
    # --- MASB / best fit -------------------------------------------------------------------------
    brokers: int = 3
    cpu_scale_cores: float = 32.0          # normalised 1.0 CPU
    mem_scale_mib: float = 65536.0         # normalised 1.0 memory
    san: SanConfig = SanConfig(window_s=30.0, report_period_s=60.0)
    broker: BrokerParams = BrokerParams()
    generator: dict = dataclasses.field(default_factory=dict)   # GeneratorConfig overrides
    overload_share: float = 0.0            # share of hosts whose tasks (those there at overload_at_s)...
    overload_factor: float = 1.0           # ...use this many times more CPU from then on, wherever they go
    overload_at_s: float = 0.0
    migration_failure_prob: float = 0.0
    cost: PrecopyParams = PrecopyParams()
    guest: GuestOverhead = GuestOverhead()   # a real guest's overhead and boot (the real-cell twin); identity = none
    boot_timeout_s: float = 60.0           # a model node's StartVm waits this long for its guest (a twin on the
                                           # simulated axis: the real node's wait × the time compression)
    retry_per_tick: int = 0                # deferred placements retried per tick; 0: max(500, nodes // 4)
    retry_backoff: bool = False            # a task that found no room waits 1, 2, 4, 8, 16 ticks (not 1) before its next try
    sampling: str = "periodic"             # periodic | event (hosts skip samples while nothing changes: NodeConfig.skip_quiet_samples)
    arrival_window: int = 0                # masb/bestfit: at most this many new tasks' placements in flight; 0 = no bound
    # --- Megha, central, sampling ----------------------------------------------------------------
    megha: MeghaParams = MeghaParams()

    def validate(self) -> "ModelCellParams":
        if self.frontend not in FRONTENDS:
            raise InvalidArgument(f"frontend={self.frontend!r}: allowed {', '.join(FRONTENDS)}")
        check_range("nodes", self.nodes, 1, 200_000)
        if self.sampling not in SAMPLINGS:
            raise InvalidArgument(f"sampling={self.sampling!r}: allowed {', '.join(SAMPLINGS)}")
        check_range("latency_s", self.latency_s, 0.0, 10.0, "s")
        check_range("arrival_window", self.arrival_window, 0, 10_000_000)
        if self.frontend in MEGHA_FRONTENDS:
            self._validate_megha()
        return self

    def _validate_megha(self) -> None:
        m = self.megha
        if m.machines not in MACHINES:
            raise InvalidArgument(f"megha.machines={m.machines!r}: allowed {', '.join(MACHINES)}")
        check_range("gms", m.gms, 1, 1000)
        # with the stream's machines, `nodes` is not the cell's size: build() caps the LMs at the machines
        check_range("lms", m.lms, 1, 1000 if m.machines == "stream" else min(1000, self.nodes))
        check_range("background_fill", m.background_fill, 0.0, 0.95)
        if m.queue_gm and len(m.queue_gm) != len(m.shares):
            raise InvalidArgument(f"queue_gm has {len(m.queue_gm)} entries: give one per share ({len(m.shares)})")
        if m.shares and abs(sum(s for _, s in m.shares) - 1.0) > 1e-6:
            raise InvalidArgument(f"shares must sum to 1, got {sum(s for _, s in m.shares):g}")

    @property
    def n_gms(self) -> int:
        return 1 if self.frontend == "central" else self.megha.gms

    @property
    def n_lms(self) -> int:
        return 1 if self.frontend == "central" else self.megha.lms


@dataclasses.dataclass
class Summary:
    ticks: list[TickRow]
    tasks_added: int
    tasks_removed: int
    tasks_live: int
    tasks_pending: int
    lost: list[str]
    duplicated: list[str]
    counters: dict
    broker_counters: dict
    net: dict
    migrations: list[MigrationRow]
    extra: dict = dataclasses.field(default_factory=dict)    # the front-end's own counts
