"""The solver from Python: profile -> frontier -> plans, selection, plan files."""

import os
import pathlib

import numpy as np
import pytest

import perseus
from conftest import CLOCKS, synthetic_csv

P_BLOCKING = 80.0
PROFILES = pathlib.Path(__file__).resolve().parents[2] / "data" / "profiles"  # in the repository


def one_f_one_b(stages: int, microbatches: int, s: int):
    """Instruction names of stage s in 1F1B order (docs/solver.md, "Schedules")."""
    warmup = min(stages - s - 1, microbatches)
    names = ["forward"] * warmup
    forwards, backwards = warmup, 0
    while backwards < microbatches:
        if forwards < microbatches:
            names.append("forward")
            forwards += 1
        names.append("backward")
        backwards += 1
    return names


@pytest.fixture
def frontier(profile_csv):
    profile = perseus.Profile.parse_csv(profile_csv, "synthetic")
    return perseus.optimize(profile, microbatches=4, p_blocking=P_BLOCKING, unit_time=0.001)


def test_frontier_is_pareto_fastest_first(frontier):
    assert len(frontier) >= 2
    times, effective = frontier.times, frontier.effective_energies
    assert all(a < b for a, b in zip(times, times[1:])), "times must rise from T_min to T*"
    assert all(a > b for a, b in zip(effective, effective[1:])), "a slower point must cost less"
    assert frontier.t_min == times[0] and frontier.t_star == times[-1]
    # T_min is as fast as running everything at the highest clock.
    assert frontier.t_min == pytest.approx(frontier.all_max["time_s"], rel=1e-12)
    # Energies as docs/solver.md ("Iteration energy") defines them: computation plus blocking.
    for i in range(len(frontier)):
        point = frontier.point(i)
        assert point["energy_j"] == pytest.approx(point["computation_energy_j"] + point["blocking_energy_j"])
        assert point["effective_energy_j"] == pytest.approx(
            point["energy_j"] - P_BLOCKING * frontier.stages * point["time_s"])


def test_per_point_figures_are_numpy_arrays(frontier):
    n = len(frontier)
    for name in ("times", "energies", "effective_energies"):
        values = getattr(frontier, name)
        assert isinstance(values, np.ndarray), (name, type(values))
        assert values.dtype == np.float64 and values.shape == (n,), (name, values.dtype, values.shape)
    # The same figures, in the same order, as the points'.
    points = [frontier.point(i) for i in range(n)]
    assert frontier.times.tolist() == [p["time_s"] for p in points]
    assert frontier.energies.tolist() == [p["energy_j"] for p in points]
    assert frontier.effective_energies.tolist() == [p["effective_energy_j"] for p in points]
    assert np.all(np.diff(frontier.times) > 0)
    assert frontier.times[0] == frontier.t_min and frontier.times[-1] == frontier.t_star
    # Each read is a copy: writing to it leaves the frontier as it is.
    times = frontier.times
    times[0] = -1.0
    assert frontier.times[0] == frontier.t_min


def test_plans_follow_the_schedule_and_use_measured_clocks(frontier):
    for i in (0, len(frontier) // 2, len(frontier) - 1):
        plan = frontier.plan(i)
        assert len(plan) == 2
        for s, stage in enumerate(plan):
            assert [name for name, _ in stage] == one_f_one_b(2, 4, s)
            assert all(mhz in CLOCKS for _, mhz in stage)
    # The slowest plan runs at lower clocks overall than the fastest.
    fastest = sum(mhz for stage in frontier.plan(0) for _, mhz in stage)
    slowest = sum(mhz for stage in frontier.plan(len(frontier) - 1) for _, mhz in stage)
    assert slowest < fastest
    as_json = frontier.plan_json(0)
    assert as_json["schema"] == "perseus.plan/1"
    assert as_json["time_s"] == pytest.approx(frontier.t_min)


def test_selection_for_a_deadline(frontier):
    assert frontier.select(frontier.t_min * 0.999) is None
    assert frontier.select(frontier.t_star * 2) == len(frontier) - 1
    assert frontier.select(frontier.t_min) == 0
    deadline = (frontier.t_min + frontier.t_star) / 2
    i = frontier.select(deadline)
    assert frontier.times[i] <= deadline < frontier.times[i + 1]
    # A straggler stretches the iteration: the wait is spent blocking.
    stretched = frontier.energy_at(0, frontier.t_min + 1.0)
    assert stretched == pytest.approx(frontier.energies[0] + P_BLOCKING * 2 * 1.0)
    with pytest.raises(IndexError):
        frontier.point(len(frontier))


def test_the_exact_milp_improves_a_selected_plan_under_a_proven_bound(frontier):
    deadline = frontier.t_min + 0.1 * (frontier.t_star - frontier.t_min)
    i = frontier.select(deadline)
    exact = frontier.exact(deadline, seconds=5.0)
    assert exact["point"] == i
    assert exact["deadline_s"] == deadline
    assert exact["time_s"] <= deadline + 1e-9
    # Never dearer than the frontier's plan, never below its own bound or the frontier's.
    assert exact["energy_at_deadline_j"] <= frontier.energy_at(i, deadline) + 1e-9
    assert exact["lower_bound_j"] <= exact["energy_at_deadline_j"] + 1e-9
    assert exact["improved"] == (exact["energy_at_deadline_j"] < frontier.energy_at(i, deadline))
    assert exact["energy_at_deadline_j"] == pytest.approx(
        exact["energy_j"] + P_BLOCKING * frontier.stages * (deadline - exact["time_s"]))
    assert len(exact["plan"]) == frontier.stages
    with pytest.raises(ValueError, match="no plan finishes"):
        frontier.exact(frontier.t_min * 0.9, seconds=1.0)


def test_the_exact_milp_on_a_stored_frontier_rebuilds_its_problem(frontier, profile_csv, tmp_path):
    out = tmp_path / "frontier"
    frontier.write(out, py="none")
    stored = perseus.load_frontier(out)
    deadline = frontier.t_min + 0.3 * (frontier.t_star - frontier.t_min)
    # The summary names the profile as it was given ("synthetic": no file), so it is passed.
    with pytest.raises(ValueError, match="is not there"):
        stored.exact(deadline, seconds=1.0)
    path = tmp_path / "profile.csv"
    path.write_text(profile_csv)
    from_store = stored.exact(deadline, seconds=10.0, profile=str(path))
    in_memory = frontier.exact(deadline, seconds=10.0)
    assert from_store["point"] == in_memory["point"] == stored.select(deadline)
    assert from_store["proven_optimal"] and in_memory["proven_optimal"]  # a small pipeline
    assert from_store["energy_at_deadline_j"] == pytest.approx(in_memory["energy_at_deadline_j"], rel=1e-12)
    # Another profile than the plans are for is refused.
    other = tmp_path / "other.csv"
    other.write_text(synthetic_csv(2, seed=4))
    with pytest.raises(ValueError, match="problem digest"):
        stored.exact(deadline, seconds=1.0, profile=str(other))


def test_written_frontier_reads_back_and_selects_the_same(frontier, tmp_path):
    out = tmp_path / "frontier"
    frontier.write(out)
    entries = perseus.read_frontier(out)
    assert [e["time_s"] for e in entries] == pytest.approx(frontier.times, rel=1e-9)
    deadline = (frontier.t_min + frontier.t_star) / 2
    assert perseus.select(out, deadline) == frontier.select(deadline)
    plan_file = out / entries[0]["plan_file"]
    assert perseus.read_freqs_pipeline(plan_file) == frontier.plan(0)
    assert perseus.parse_freqs_pipeline(frontier.freqs_pipeline(1)) == frontier.plan(1)
    with pytest.raises(perseus.InputError):
        frontier.write(out)  # exists, and force is off


def test_stored_frontier_reads_one_plan_at_a_time(frontier, tmp_path):
    out = tmp_path / "frontier"
    frontier.write(out, py="none")
    assert not list(out.glob("freqs_pipeline_*.py"))
    stored = perseus.load_frontier(out)
    assert len(stored) == len(frontier)
    # Both say what they hold when printed: points, T_min and T* with their energies.
    for shown in (frontier, stored):
        text = repr(shown)
        assert f"{len(frontier)} points" in text, text
        assert f"T_min {frontier.t_min:.4f} s ({frontier.energies[0]:.1f} J)" in text, text
        assert f"T* {frontier.t_star:.4f} s ({frontier.energies[-1]:.1f} J)" in text, text
    assert str(out) in repr(stored)
    assert isinstance(stored.times, np.ndarray) and stored.times.dtype == np.float64
    np.testing.assert_allclose(stored.times, frontier.times, rtol=1e-12)
    np.testing.assert_allclose(stored.energies, frontier.energies, rtol=1e-12)
    for i in (0, len(frontier) // 2, len(frontier) - 1):
        assert stored.plan(i) == frontier.plan(i)
        assert perseus.parse_freqs_pipeline(stored.freqs_pipeline(i)) == frontier.plan(i)
    assert stored.plan_json(0)["stages"][0][0]["frequency_mhz"] == frontier.plan(0)[0][0][1]
    deadline = (frontier.t_min + frontier.t_star) / 2
    assert stored.select(deadline) == frontier.select(deadline)
    assert stored.summary["plans"]["count"] == len(frontier)
    with pytest.raises(IndexError):
        stored.plan(len(frontier))
    # A damaged store is a clear error naming it, not a crash.
    store = out / "plans.bin"
    store.write_bytes(store.read_bytes()[:-3])
    with pytest.raises(perseus.InputError, match="plans.bin: truncated"):
        perseus.load_frontier(out)


def test_every_point_has_a_proven_lower_bound(frontier, profile_csv, tmp_path):
    bounds = frontier.lower_bounds
    assert isinstance(bounds, np.ndarray) and bounds.shape == (len(frontier),)
    assert np.all(np.isfinite(bounds)), "a refined frontier bounds every point"
    assert np.all(bounds <= frontier.energies * (1 + 1e-12)), "no plan beats its own bound"
    summary = frontier.summary()["certification"]
    gaps = frontier.energies / bounds - 1
    assert summary["bounded_points"] == len(frontier)
    assert summary["worst_gap_fraction"] == pytest.approx(gaps.max())
    # Written and read back; without refinement there is no bound.
    out = tmp_path / "certified"
    frontier.write(out, py="none")
    np.testing.assert_allclose(perseus.load_frontier(out).lower_bounds, bounds, rtol=1e-12)
    profile = perseus.Profile.parse_csv(profile_csv, "synthetic")
    plain = perseus.optimize(profile, microbatches=4, p_blocking=P_BLOCKING, unit_time=0.001, refine=False)
    assert np.all(np.isnan(plain.lower_bounds))
    # Without the certification every point keeps a bound from the LP solves made anyway.
    assert summary["certified"] is True
    quick = perseus.optimize(profile, microbatches=4, p_blocking=P_BLOCKING, unit_time=0.001, certify=False)
    assert quick.summary()["certification"]["certified"] is False
    assert quick.summary()["certification"]["lp_solves"] == 0
    assert np.all(np.isfinite(quick.lower_bounds))
    assert np.all(quick.lower_bounds <= quick.energies * (1 + 1e-12))


def test_plan_files_are_data_never_code(tmp_path):
    marker = tmp_path / "pwned"
    text = f"[[('forward', __import__('os').system('touch {marker}'))]]\n"
    with pytest.raises(perseus.InputError):
        perseus.parse_freqs_pipeline(text, "evil.py")
    assert not marker.exists()


def test_bad_profiles_name_the_line():
    with pytest.raises(perseus.InputError, match=r":2"):
        perseus.Profile.parse_csv("stage,instruction,frequency,time,energy\n0,forward,1410,abc,1\n", "bad.csv")
    with pytest.raises(perseus.InputError):
        perseus.Profile.parse_csv("", "empty.csv")
    profile = perseus.Profile.parse_csv(synthetic_csv(2), "two-stages")
    with pytest.raises(perseus.InputError):  # 3 stages asked of a 2-stage profile
        perseus.optimize(profile, microbatches=4, p_blocking=P_BLOCKING, stages=3)
    with pytest.raises(perseus.InputError, match="stages must be 0"):
        perseus.optimize(profile, microbatches=4, p_blocking=P_BLOCKING, stages=-1)
    with pytest.raises(perseus.InputError, match="1..65536"):
        perseus.optimize(profile, microbatches=70000, p_blocking=P_BLOCKING)


def test_the_bundled_bloom_profile():
    profile = perseus.Profile.read_csv(PROFILES / "bloom-176b+a100-sxm.csv")
    assert profile.num_stages == 8
    frontier = perseus.optimize(profile, microbatches=12, p_blocking=83.64, unit_time=0.001)
    assert len(frontier) > 100
    # The reference crawl spans 3.436 s down to 2.797 s in its planned time (golden file). The
    # measured frontier starts about there and reaches further: slow clocks that the reference's
    # filter drops (their energy rises) still cost less than blocking, so T*, the plan of least
    # effective energy, lies beyond the reference's slowest plan (and below all at 855 MHz).
    assert 2.7 < frontier.t_min < 2.9 and 3.436 < frontier.t_star < 4.5
    assert frontier.energies[0] > frontier.energies[-1]
    assert all(len(stage) == 24 for stage in frontier.plan(0))


def test_nonsense_numbers_and_paths_are_input_errors(frontier, tmp_path):
    with pytest.raises(perseus.InputError, match="deadline"):
        frontier.select(float("nan"))
    with pytest.raises(perseus.InputError, match="iteration time"):
        frontier.energy_at(0, float("nan"))
    with pytest.raises(perseus.InputError, match="empty path"):
        frontier.write("")
    with pytest.raises(perseus.InputError, match="current directory"):
        frontier.write(".", force=True)
    assert not list(tmp_path.parent.glob(".perseus-tmp-*"))
