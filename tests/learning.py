"""What the learning tests share with ``benchmarks/learning_tests.py``, which measures how often
each of them fails: the seed a measurement run gives a test, and the line a test prints for each
learning outcome it asserts (its value and its threshold), before it asserts it.

A test run by hand or in the suite trains with its config's seed, as before.
"""

from __future__ import annotations

import os

from rl_core.config import NODE_CONFIGS

#: Environment variable: the seed a learning test trains with instead of its config's.
SEED_VARIABLE = "RL_ROS2_LEARNING_SEED"
#: How an outcome line starts: ``learning outcome: NAME VALUE (needs >= THRESHOLD)``.
OUTCOME_PREFIX = "learning outcome:"


def learning_seed() -> int | None:
    """The seed :data:`SEED_VARIABLE` gives, or None (the config's)."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    return int(value) if value else None


def seed_overrides() -> dict[str, dict[str, int]]:
    """``load_run_config`` overrides that give every node the measurement's seed (none without
    one), as ``rl-train-bare --seed`` does."""
    seed = learning_seed()
    return {} if seed is None else {node: {"seed": seed} for node in NODE_CONFIGS}


def seed_arguments() -> tuple[str, ...]:
    """The launch argument that gives every node the measurement's seed (none without one)."""
    seed = learning_seed()
    return () if seed is None else (f"seed:={seed}",)


def report_outcome(name: str, value: float, threshold: float) -> None:
    """Print one learning outcome the test is about to assert (``value >= threshold``)."""
    print(f"{OUTCOME_PREFIX} {name} {value:.6g} (needs >= {threshold:.6g})", flush=True)
