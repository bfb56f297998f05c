"""The runtime from Python: a server, ranks driving emulated GPUs through the hooks,
stragglers, errors, and `perseus serve` itself."""

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading

import pytest

import perseus
from conftest import synthetic_csv

P_BLOCKING = 80.0
STAGES, PIPELINES, MICROBATCHES = 2, 2, 4


def test_importable_without_pytorch():
    code = "import sys, perseus; assert 'torch' not in sys.modules; print(perseus.PipelineFrequencyOptimizer.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "PipelineFrequencyOptimizer"


class Broadcast:
    """What torch.distributed.broadcast_object_list does for the job id, for threads."""

    def __init__(self):
        self._value = None
        self._ready = threading.Event()

    def __call__(self, job_id):
        if job_id is not None:
            self._value = job_id
            self._ready.set()
        assert self._ready.wait(30)
        return self._value


def run_ranks(ranks, step):
    """Runs step(rank) for every rank at once (the schedule is a barrier); re-raises failures."""
    errors = []

    def body(r):
        try:
            step(r)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]


def test_hooks_run_the_frontier_plans_and_follow_a_straggler():
    csv = synthetic_csv(STAGES)
    profile = perseus.Profile.parse_csv(csv, "synthetic")
    expected = perseus.optimize(profile, microbatches=MICROBATCHES, p_blocking=P_BLOCKING, unit_time=0.001)
    with perseus.Server("Frontier", barrier_timeout_s=30) as server:
        world = STAGES * PIPELINES
        gpus = [perseus.EmulatedGpu(profile, P_BLOCKING) for _ in range(world)]
        share = Broadcast()
        optimizers = [None] * world

        def make(r):
            d, s = divmod(r, STAGES)
            optimizers[r] = perseus.PipelineFrequencyOptimizer(
                r, d, s, 0, 0, PIPELINES, STAGES, 1, world, server.url, job_metadata="pytest",
                broadcast=share, gpu=gpus[r], schedule="1f1b", microbatches=MICROBATCHES,
                clock=lambda g=gpus[r]: g.now_s)

        run_ranks(range(world), make)
        job_id = optimizers[0].job_id
        assert all(o.job_id == job_id for o in optimizers)
        assert job_id.endswith("+dp2+pp2+tp1+Frontier+pytest")

        admin = perseus.ServerConnection(server.url)
        answer = admin.upload_profile(job_id, csv, P_BLOCKING, 0.001, schedule="1f1b", microbatches=MICROBATCHES)
        assert answer["status"] == "computing"
        assert server.wait_until_idle(60)

        ran = [None] * world

        def step(r):
            o, gpu = optimizers[r], gpus[r]
            o.on_step_begin()
            clocks = []
            for name, _ in o.schedule:
                o.on_instruction_begin(name)
                o.client.wait_for_clock()
                clocks.append(gpu.graphics_clock_mhz)
                gpu.run(name, r % STAGES)
                o.on_instruction_end(name)
            o.on_step_end()
            ran[r] = clocks

        run_ranks(range(world), step)
        t_min_plan = expected.plan(0)
        for r in range(world):
            assert ran[r] == [mhz for _, mhz in t_min_plan[r % STAGES]], f"rank {r}"

        # Pipeline 1 straggles: pipeline 0 moves to the plan for T' = 1.3 T_min.
        notice = admin.announce_straggler(id=STAGES, degree=1.3, job_id=job_id)
        assert notice["t_prime_s"] == pytest.approx(1.3 * expected.t_min, rel=1e-9)
        run_ranks(range(world), step)
        t_opt_plan = expected.plan(expected.select(1.3 * expected.t_min))
        assert t_opt_plan != t_min_plan
        for r in range(world):
            plan = t_opt_plan if r < STAGES else t_min_plan
            assert ran[r] == [mhz for _, mhz in plan[r % STAGES]], f"rank {r}"

        # Recovered: everyone back on T_min.
        admin.announce_straggler(id=STAGES, degree=1.0, job_id=job_id)
        run_ranks(range(world), step)
        for r in range(world):
            assert ran[r] == [mhz for _, mhz in t_min_plan[r % STAGES]], f"rank {r}"
        assert optimizers[0].client.stats()["results_posted"] == 3
        for o in optimizers:
            o.close()
        admin.close()


def test_errors_carry_what_went_wrong():
    with perseus.Server("Frontier", token="s3cret") as server:
        gpu = perseus.EmulatedGpu(perseus.Profile.parse_csv(synthetic_csv(1), "one"), P_BLOCKING)
        with pytest.raises(perseus.ServerError) as refused:
            perseus.Client(gpu, server.url, 0, 0, 0, 0, 1, 1, 1, 1, retry_for_s=0)
        assert refused.value.status == 401
        with pytest.raises(perseus.ServerError) as bad:
            perseus.Client(gpu, server.url, 0, 0, 0, 0, 1, 2, 1, 3, token="s3cret", retry_for_s=0)
        assert bad.value.status == 422
        assert "world_size = 3" in bad.value.detail
        client = perseus.Client(gpu, server.url, 0, 0, 0, 0, 1, 1, 1, 1, token="s3cret", schedule="1f1b",
                                microbatches=2)
        client.on_step_begin()
        assert [name for name, _ in client.schedule] == ["forward", "backward", "forward", "backward"]
        with pytest.raises(perseus.ClientError, match="expects 'forward'"):
            client.on_instruction_begin("backward")
        with pytest.raises(perseus.InputError):
            perseus.ServerConnection("ftp://example")
        client.close()


def perseus_binary():
    configured = os.environ.get("PERSEUS_BINARY")
    if configured:
        return pathlib.Path(configured)
    return pathlib.Path(perseus.__file__).resolve().parents[2] / "perseus"  # <build>/python/perseus/__init__.py


@pytest.mark.skipif(not perseus_binary().exists(), reason="the perseus command is not built")
def test_perseus_serve_speaks_to_the_python_client(tmp_path):
    server = subprocess.Popen(
        [str(perseus_binary()), "serve", "--port", "0", "--db", str(tmp_path / "server.db"), "--token", "tok",
         "--dump-dir", str(tmp_path / "dump")],
        stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in server.stderr:
            m = re.search(r"event=listening host=(\S+) port=(\d+)", line)
            if m:
                assert m.group(1) == "127.0.0.1"  # not reachable from other hosts unless told
                port = int(m.group(2))
                break
        assert port, "the server did not report its port"
        url = f"http://127.0.0.1:{port}"
        admin = perseus.ServerConnection(url, token="tok")
        assert admin.get_json("/healthz")["status"] == "ok"
        gpu = perseus.EmulatedGpu(perseus.Profile.parse_csv(synthetic_csv(1), "one"), P_BLOCKING)
        client = perseus.Client(gpu, url, 0, 0, 0, 0, 1, 1, 1, 1, token="tok", schedule="1f1b", microbatches=2)
        client.on_step_begin()  # the highest clock while the server waits for a profile
        assert {mhz for _, mhz in client.schedule} == {1410}
        client.close()
        assert admin.get_json("/info")["jobs"][0]["job_id"] == client.job_id
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
