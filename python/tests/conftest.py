"""Shared helpers: a synthetic, physically shaped profile (faster clocks cost more energy)."""

import random

import pytest

CLOCKS = [1410, 1350, 1290, 1230, 1170, 1110]


def synthetic_csv(stages: int, clocks=CLOCKS, seed: int = 3) -> str:
    rng = random.Random(seed)
    rows = ["stage,instruction,frequency,time,energy"]
    for s in range(stages):
        for kind, scale in (("forward", 1.0), ("backward", 2.0)):
            base = 0.04 * scale * (0.7 + 0.6 * rng.random())
            compute_share = 0.5 + 0.5 * rng.random()
            static_w = 60.0 + 30.0 * rng.random()
            dynamic_w = 200.0 + 150.0 * rng.random()
            for mhz in clocks:
                ratio = clocks[0] / mhz
                time = base * (compute_share * ratio + (1.0 - compute_share))
                power = static_w + dynamic_w * (mhz / clocks[0]) ** 2.5
                rows.append(f"{s},{kind},{mhz},{time!r},{power * time!r}")
    return "\n".join(rows) + "\n"


@pytest.fixture
def profile_csv():
    return synthetic_csv(2)
