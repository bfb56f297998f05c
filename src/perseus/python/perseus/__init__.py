"""perseus: energy scheduling for pipeline-parallel large-model training (Perseus, SOSP'24).

The solver::

    import perseus
    profile = perseus.Profile.read_csv("bloom-176b+a100-sxm.csv")
    frontier = perseus.optimize(profile, microbatches=12, p_blocking=83.64, unit_time=0.001)
    frontier.t_min, frontier.t_star          # seconds
    frontier.plan(0)                          # T_min: per stage [("forward", 1410), ...]
    frontier.select(deadline_s=3.2)           # the plan for T_opt = min(T*, T')
    frontier.write("out/bloom")               # as `perseus optimize --out`
    stored = perseus.load_frontier("out/bloom")
    stored.plan(42)                           # one plan, read from out/bloom/plans.bin

The runtime: :class:`PipelineFrequencyOptimizer` (hooks mirroring the existing Perseus
optimizer's) in a training engine, :class:`Server` to run a server in this process,
:class:`ServerConnection` for the server's routes (profiles, stragglers).

Nothing here imports PyTorch; :class:`PipelineFrequencyOptimizer` uses it only if the
training program has imported it.
"""

from perseus._perseus import (  # noqa: F401  (re-exported)
    Client,
    ClientError,
    EmulatedGpu,
    FrequencyController,
    Frontier,
    Gpu,
    GpuError,
    InputError,
    NvmlGpu,
    Profile,
    ServerConnection,
    ServerError,
    SolveError,
    StoredFrontier,
    load_frontier,
    optimize,
    parse_freqs_pipeline,
    read_freqs_pipeline,
    read_frontier,
    select,
)
from perseus._perseus import Server as _Server
from perseus.optimizer import PipelineFrequencyOptimizer  # noqa: F401

__version__ = "0.1.0"


class Server(_Server):
    """A perseus server in this process (the same service `perseus serve` runs).

    ``scheduler`` is ``"Frontier"`` (jobs upload a profile), ``"InVivoProfiling"``,
    ``"PointSolution"`` or ``"PointSolution3D"``; ``scheduler_args`` a dict as
    ``ZEUS_PFO_SCHEDULER_ARGS`` gives it.
    Binds 127.0.0.1 on a free port unless told otherwise; usable as a context manager.
    """

    def __init__(self, scheduler="Frontier", scheduler_args=None, **kwargs):
        import json

        super().__init__(scheduler, json.dumps(scheduler_args or {}), **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
