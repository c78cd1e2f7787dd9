"""Policy node: observation batches in, action batches out, following ``/policy_weights``.

Also serves ``get_action`` for request/response clients (a real robot, a tool, an evaluation).
Until the first weights arrive it acts with its own randomly initialised actor (version 0).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch
from rl_core.config import ConfigError, PolicyConfig
from rl_core.export import OnnxPolicy
from rl_core.envs import space_shapes
from rl_core.networks import SquashedGaussianActor
from rl_interfaces.srv import GetAction

from rl_nodes.base import ACTIONS_TOPIC, LATCHED_QOS, OBSERVATIONS_TOPIC, WEIGHTS_TOPIC, RLNode
from rl_nodes.base import OK, WARN
from rl_nodes.conversions import ACTIONS, OBSERVATIONS, WEIGHTS, Actions, Observations, Weights
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for


class PolicyNode(RLNode):
    """Batched inference with the latest actor weights."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("policy", namespace)
        self.config = declare_config(self, PolicyConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        obs_shape, action_shape = space_shapes(self.config.env_id)
        self.obs_shape, self.action_shape = obs_shape, action_shape
        torch.manual_seed(self.config.seed)
        self.actor = SquashedGaussianActor(int(np.prod(obs_shape)), int(np.prod(action_shape)),
                                           self.config.hidden_sizes)
        self.onnx: OnnxPolicy | None = None
        if self.config.onnx_model:
            self.onnx = OnnxPolicy(self.config.onnx_model)
            if (self.onnx.obs_dim, self.onnx.action_dim) != (self.actor.obs_dim, self.actor.action_dim):
                raise ConfigError(f"ONNX model {self.config.onnx_model} maps {self.onnx.obs_dim} -> "
                                  f"{self.onnx.action_dim} values; {self.config.env_id} needs "
                                  f"{self.actor.obs_dim} -> {self.actor.action_dim}")
            self.get_logger().info(f"acting with ONNX model {self.config.onnx_model} "
                                   "(onnxruntime, deterministic; /policy_weights ignored)")
        self.version = 0
        self._weights_at = time.monotonic()  # when the current weights arrived (start: own init)
        self._started_at = time.monotonic()
        self._actor_lock = threading.Lock()  # get_action runs on the executor thread
        self.actions_pub = self.zc_publisher(ACTIONS, ACTIONS_TOPIC)
        self.zc_subscription(OBSERVATIONS, OBSERVATIONS_TOPIC, self._on_observations)
        self.zc_subscription(WEIGHTS, WEIGHTS_TOPIC, self._on_weights, LATCHED_QOS)
        self.create_service(GetAction, "get_action", self._on_get_action)

    def _apply_config(self, config: PolicyConfig) -> None:
        self.config = config

    def _act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        flat = obs.reshape(obs.shape[0], -1)
        if self.onnx is not None:
            return self.onnx.act(flat).reshape((obs.shape[0], *self.action_shape))
        with self._actor_lock:
            actions = self.actor.act(flat, deterministic=deterministic)
        return actions.reshape((obs.shape[0], *self.action_shape))

    def _on_observations(self, msg: Observations) -> None:
        if msg.obs.shape[1:] != self.obs_shape or not np.all(np.isfinite(msg.obs)):
            self.reject("observations", f"expected finite observations of shape "
                        f"(N, {', '.join(map(str, self.obs_shape))}), got {msg.obs.shape}")
            return
        actions = self._act(msg.obs, self.config.deterministic)
        self.actions_pub.publish(Actions(msg.robot_id, msg.step, actions, self.version,
                                         msg.stamp_ns))

    def _on_weights(self, msg: Weights) -> None:
        if msg.version <= self.version or self.onnx is not None:
            return
        if msg.architecture != self.actor.architecture():
            self.reject("policy weights", f"weights are for {msg.architecture}, this policy is "
                        f"{self.actor.architecture()}; use the same env_id and hidden_sizes")
            return
        with self._actor_lock:
            try:
                self.actor.load_state_dict(msg.state)
            except RuntimeError as error:
                self.reject("policy weights", f"tensors do not fit the actor: {error}")
                return
            first = self.version == 0
            self.version = msg.version
            self._weights_at = time.monotonic()
        if first:
            self.get_logger().info(f"received weights version {msg.version}")

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        age = time.monotonic() - self._weights_at
        values = {"weights version": self.version, "weights age s": f"{age:.1f}"}
        if self.version == 0 and time.monotonic() - self._started_at > 30.0:
            return WARN, "no weights received yet (is the trainer running?)", values
        if self.version and age > 60.0:
            return WARN, f"weights are {age:.0f} s old (trainer stalled or gone?)", values
        return OK, f"acting with weights v{self.version}", values

    def _on_get_action(self, request: GetAction.Request, response: GetAction.Response
                       ) -> GetAction.Response:
        shape = tuple(request.obs_shape)
        obs = np.asarray(request.obs, dtype=np.float32)
        size = int(np.prod(self.obs_shape))
        if shape != self.obs_shape or obs.size == 0 or obs.size % size or not np.all(np.isfinite(obs)):
            response.success = False
            response.message = (f"send finite observations with obs_shape {list(self.obs_shape)} "
                                f"and a multiple of {size} values; got obs_shape {list(shape)} "
                                f"and {obs.size} values")
            self.reject("get_action request", response.message)
            return response
        actions = self._act(obs.reshape((-1, *self.obs_shape)), request.deterministic)
        response.success = True
        response.action_shape = list(self.action_shape)
        response.actions = actions.reshape(-1).tolist()
        response.policy_version = self.version
        return response


def main() -> int:
    return main_for("policy")


if __name__ == "__main__":
    raise SystemExit(main())
