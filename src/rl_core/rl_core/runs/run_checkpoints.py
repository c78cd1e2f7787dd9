"""The two checkpoints a training run leaves, and how tools and nodes name them.

A run's output directory holds ``final`` (``<output_dir>/checkpoint``: the weights at the end
of the budget) and ``best`` (``<output_dir>/best``: the snapshot that scored highest in the
periodic evaluations, :mod:`rl_core.learning.periodic_evaluation`). Everything that reads a checkpoint
(``rl-bringup eval`` and ``export``, the trainer's ``resume``, the policy node's ``checkpoint``)
takes any of:

* a checkpoint directory itself (``runs/x/best``, ``runs/x/checkpoint``,
  ``runs/x/checkpoints/step_...``);
* ``<output_dir>/best`` or ``<output_dir>/final`` (``final`` is the name of
  ``<output_dir>/checkpoint``);
* a run's output directory alone: its ``best`` where that reader prefers it and the run has one
  (evaluation, export, acting), else its ``final`` (resuming continues where training stopped).
"""

from __future__ import annotations

from pathlib import Path

#: The checkpoint written at the end of the budget, inside the run's output directory.
FINAL_DIRECTORY = "checkpoint"
#: The best evaluated snapshot, inside the run's output directory.
BEST_DIRECTORY = "best"
#: The names a reader takes for them.
CHOICES = ("best", "final")
_META = "checkpoint.json"


def resolve_checkpoint(path: str | Path, prefer: str = "best") -> Path:
    """The checkpoint directory ``path`` names (see the module's description).

    :param prefer: ``best`` or ``final``: what a run's output directory alone stands for
        (``best`` falls back to ``final`` for a run without periodic evaluation).
    :raises FileNotFoundError: with what is there and what to pass instead.
    """
    if prefer not in CHOICES:
        raise ValueError(f"prefer must be one of {CHOICES}, got {prefer!r}")
    path = Path(path)
    if (path / _META).is_file():
        return path
    if path.name in CHOICES and not path.exists() and path.parent.is_dir():
        run, choice = path.parent, path.name
        chosen = run / (BEST_DIRECTORY if choice == "best" else FINAL_DIRECTORY)
        if (chosen / _META).is_file():
            return chosen
        raise FileNotFoundError(_missing(run, choice))
    if not path.is_dir():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}: it does not exist; pass a "
                                "training run's output directory, <output_dir>/best or "
                                "<output_dir>/final")
    order = [BEST_DIRECTORY, FINAL_DIRECTORY] if prefer == "best" else [FINAL_DIRECTORY]
    for name in order:
        if (path / name / _META).is_file():
            return path / name
    raise FileNotFoundError(_missing(path, prefer))


def _missing(run: Path, choice: str) -> str:
    present = [name for name, folder in (("best", BEST_DIRECTORY), ("final", FINAL_DIRECTORY))
               if (run / folder / _META).is_file()]
    why = ("a best checkpoint is kept only with periodic evaluation (eval_period > 0)"
           if choice == "best" else
           "the final checkpoint is written when the budget is spent; an unfinished run has "
           "its newest in <output_dir>/checkpoints")
    has = f"it has {' and '.join(present)}" if present else "it holds no checkpoint"
    return f"no {choice} checkpoint in {str(run)!r} ({why}); {has}"
