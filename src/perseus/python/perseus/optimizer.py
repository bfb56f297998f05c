"""The object a PyTorch pipeline engine holds: hooks like the existing Perseus optimizer's.

It is a thin layer over the C++ :class:`perseus.Client`: global rank 0 registers the job
and shares its id with the other ranks (through ``torch.distributed`` when it is
initialised, or a ``broadcast`` function you pass), every rank registers itself with its
GPU's clocks, and the hooks fetch each iteration's schedule, hand each instruction's clock
to the asynchronous frequency controller, and report measured time and energy.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional

from perseus._perseus import Client, Gpu, NvmlGpu


def _nvml_index(device_id: int) -> int:
    """The NVML index of CUDA device ``device_id`` (CUDA_VISIBLE_DEVICES renumbers them)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible:
        return device_id
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    if device_id < len(entries) and entries[device_id].isdigit():
        return int(entries[device_id])
    return device_id


def _torch():
    """PyTorch if the program has imported it; never imports it itself."""
    return sys.modules.get("torch")


def _default_synchronize(device_id: int) -> Optional[Callable[[], None]]:
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        return lambda: torch.cuda.synchronize(device_id)
    return None


def _default_broadcast(rank: int) -> Optional[Callable[[Optional[str]], str]]:
    torch = _torch()
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return None

    def broadcast(job_id: Optional[str]) -> str:
        objects = [job_id]
        torch.distributed.broadcast_object_list(objects, src=0)
        return objects[0]

    return broadcast


class PipelineFrequencyOptimizer:
    """Per-instruction GPU clocks for one rank of a pipeline-parallel job.

    The first ten arguments are the existing Perseus optimizer's. The rest:

    ``token``
        bearer token for a server started with ``--token`` (default ``$PERSEUS_TOKEN``).
    ``job_id``
        the job's id when the caller shares it itself; otherwise rank 0 registers the job
        and ``broadcast`` (default: ``torch.distributed.broadcast_object_list``) shares it.
    ``gpu``
        a :class:`perseus.Gpu`; default :class:`perseus.NvmlGpu` (``libnvidia-ml.so.1``).
    ``schedule``, ``microbatches``, ``chunks``
        the pipeline schedule, sent with the job so that the server can profile in vivo.
    ``steps_per_round``
        fetch a schedule and report measurements every this many steps (0: fetch once,
        never report, as the existing client).
    ``synchronize``
        called before each measurement; default ``torch.cuda.synchronize`` if available.
    """

    def __init__(
        self,
        rank: int,
        dp_rank: int,
        pp_rank: int,
        tp_rank: int,
        device_id: int,
        dp_degree: int,
        pp_degree: int,
        tp_degree: int,
        world_size: int,
        server_url: str,
        job_metadata: Optional[str] = None,
        *,
        token: Optional[str] = None,
        job_id: Optional[str] = None,
        broadcast: Optional[Callable[[Optional[str]], str]] = None,
        gpu: Optional[Gpu] = None,
        gpu_index: Optional[int] = None,
        schedule: Optional[str] = None,
        microbatches: Optional[int] = None,
        chunks: int = 1,
        steps_per_round: int = 1,
        control_clocks: bool = True,
        synchronize: Optional[Callable[[], None]] = None,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        self.rank = rank
        self.device_id = device_id
        self.gpu = gpu if gpu is not None else NvmlGpu()
        index = gpu_index if gpu_index is not None else (0 if gpu is not None else _nvml_index(device_id))
        if synchronize is None:
            synchronize = _default_synchronize(device_id)
        settings = dict(
            server_url=server_url,
            rank=rank,
            dp_rank=dp_rank,
            pp_rank=pp_rank,
            tp_rank=tp_rank,
            dp_degree=dp_degree,
            pp_degree=pp_degree,
            tp_degree=tp_degree,
            world_size=world_size,
            job_metadata=job_metadata,
            device=index,
            token=token if token is not None else os.environ.get("PERSEUS_TOKEN", ""),
            control_clocks=control_clocks,
            steps_per_round=steps_per_round,
            synchronize=synchronize,
            clock=clock,
            schedule=schedule,
            microbatches=microbatches,
            chunks=chunks,
        )
        self._client: Optional[Client] = None
        if job_id is None:
            share = broadcast or _default_broadcast(rank)
            if share is None:
                raise RuntimeError(
                    "PipelineFrequencyOptimizer: pass job_id, or a broadcast function, or initialise "
                    "torch.distributed first, so that every rank learns the job id rank 0 registers"
                )
            if rank == 0:
                self._client = Client(self.gpu, job_id="", **settings)
                job_id = share(self._client.job_id)
            else:
                job_id = share(None)
            if not isinstance(job_id, str) or not job_id:
                raise RuntimeError(f"PipelineFrequencyOptimizer: rank 0 shared no job id ({job_id!r})")
        if self._client is None:
            self._client = Client(self.gpu, job_id=job_id, **settings)
        self.job_id: str = self._client.job_id

    # The hooks of the existing optimizer.
    def on_step_begin(self) -> None:
        """Start of an iteration: fetches the iteration's schedule (a barrier across ranks)."""
        self._client.on_step_begin()

    def on_step_end(self) -> None:
        """End of an iteration: checks the schedule was used up; reports measurements."""
        self._client.on_step_end()

    def on_instruction_begin(self, name: str) -> None:
        """Before a forward or backward: checks it is the schedule's next and sets its clock."""
        self._client.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        """After a forward or backward: records its time and energy."""
        self._client.on_instruction_end(name)

    @property
    def schedule(self):
        """This iteration's (instruction, MHz) list."""
        return self._client.schedule

    @property
    def client(self) -> Client:
        return self._client

    def close(self) -> None:
        """Stops the frequency controller and resets the GPU's clocks."""
        if self._client is not None:
            self._client.close()
