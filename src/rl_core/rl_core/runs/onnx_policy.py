"""Run a policy exported by :func:`rl_core.runs.export.export_onnx` with onnxruntime: no torch.

This module needs numpy and onnxruntime only, so a robot-side install (requirements-edge.txt)
can act with an exported policy without torch or pybullet. The metadata keys the exporter
writes are defined here, beside the reader that checks them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

ARCHITECTURE_KEY = "rl_ros2.architecture"
ENV_ID_KEY = "rl_ros2.env_id"
POLICY_KEY = "rl_ros2.policy"
POLICY_KIND = "deterministic tanh(mean)"
#: The policy of a ``Discrete`` action: its most probable choice's index.
CHOICE_KIND = "most probable choice"
#: ... of an arm-and-choice actor: the arm's tanh(mean), then the best valued choice's index.
ARM_AND_CHOICE_KIND = "deterministic tanh(mean) and best valued choice"
INPUT_NAME = "obs"
OUTPUT_NAME = "action"


class OnnxPolicy:
    """A policy exported by :func:`rl_core.runs.export.export_onnx`, run with onnxruntime on the CPU.

    It acts like :meth:`rl_core.algorithms.networks.SquashedGaussianActor.act` with ``deterministic=True``,
    so it can stand in for the actor wherever only acting is needed (e.g.
    :func:`rl_core.learning.evaluation.evaluate`).

    :param path: the ``.onnx`` file.
    :param intra_op_threads: onnxruntime intra-op threads; 1 by default, which is the fastest
        choice for these small networks and leaves the robot's other cores alone.
    :raises FileNotFoundError: when ``path`` does not exist.
    :raises ValueError: when the file is not an ONNX model or not one written by
        :func:`export_onnx` (no architecture metadata).
    """

    def __init__(self, path: str | os.PathLike[str], intra_op_threads: int = 1) -> None:
        import onnxruntime  # deferred so that importing rl_core never needs onnxruntime

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no ONNX model at {str(self.path)!r}; write one with "
                                    "rl_core.runs.export.export_onnx or `rl-bringup export`")
        if intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {intra_op_threads}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only; warnings about unused initialisers are noise
        try:
            self._session = onnxruntime.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise ValueError(f"{str(self.path)!r} is not a loadable ONNX model: {error}") from error
        metadata = self._session.get_modelmeta().custom_metadata_map
        if ARCHITECTURE_KEY not in metadata:
            raise ValueError(f"{str(self.path)!r} has no {ARCHITECTURE_KEY!r} metadata; it was not "
                             "written by rl_core.runs.export.export_onnx")
        try:
            self.architecture: dict[str, Any] = json.loads(metadata[ARCHITECTURE_KEY])
        except json.JSONDecodeError as error:
            raise ValueError(f"{str(self.path)!r}: {ARCHITECTURE_KEY} metadata is not JSON: "
                             f"{error}") from error
        #: The task the policy was trained on, or ``None`` when the exporter did not know it.
        self.env_id: str | None = metadata.get(ENV_ID_KEY) or None
        self.obs_dim = int(self.architecture["obs_dim"])
        # A categorical actor's architecture names its choices; its action is one index.
        self.action_dim = int(self.architecture.get("action_dim", 1))
        self._input_name = self._session.get_inputs()[0].name

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations.

        :param obs: ``(N, obs_dim)`` observations (any real dtype; cast to float32).
        :param deterministic: must be true: the exported graph holds the mean action only.
        :return: ``(N, action_dim)`` float32 actions in [-1, 1] (a ``Discrete`` action: the
            chosen indices, ``(N, 1)``).
        :raises ValueError: on a wrong shape, or when a stochastic action is asked for.
        """
        if not deterministic:
            raise ValueError("an exported policy is deterministic (mean action only); sample "
                             "exploration actions with the torch actor instead")
        obs = np.asarray(obs)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            hint = " (add a batch axis: obs[None, :])" if obs.shape == (self.obs_dim,) else ""
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {obs.shape}{hint}")
        feed = {self._input_name: np.ascontiguousarray(obs, dtype=np.float32)}
        (actions,) = self._session.run(None, feed)
        return actions

    def __repr__(self) -> str:
        return f"OnnxPolicy({str(self.path)!r}, architecture={self.architecture})"
