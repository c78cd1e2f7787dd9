"""Training curves as PNG files (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def plot_training_curve(env_steps: Sequence[float], returns: Sequence[float], path: str | Path,
                        title: str = "training", evaluation: float | None = None) -> Path:
    """Write episode returns against environment steps, with a moving average, to ``path``.

    :param evaluation: mean return of the final deterministic evaluation, drawn as a line.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on robots, CI or servers
    import matplotlib.pyplot as plt

    path = Path(path)
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    steps = np.asarray(env_steps, dtype=float)
    values = np.asarray(returns, dtype=float)
    if len(values):
        axes.plot(steps, values, ".", alpha=0.3, label="episode return")
        window = max(1, min(20, len(values) // 5))
        smooth = np.convolve(values, np.ones(window) / window, mode="valid")
        axes.plot(steps[window - 1:], smooth, label=f"mean of {window}")
    if evaluation is not None:
        axes.axhline(evaluation, color="k", linestyle="--", label=f"evaluation {evaluation:.1f}")
    axes.set_xlabel("environment steps")
    axes.set_ylabel("return")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
