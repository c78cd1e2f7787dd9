"""Policy node: observation batches in, action batches out, following ``/policy_weights``.

Also serves ``~/get_action`` for request/response clients (a real robot, a tool, an evaluation):
``/robot_k/policy/get_action`` per robot, ``/policy/get_action`` for the central policy.
Until the first weights arrive it acts with its own randomly initialised actor (version 0).

Two layouts, chosen by the ``robots`` parameter:

* ``robots: 0`` (per robot, the default): the node serves its own namespace,
  ``observations`` -> ``actions``, one forward pass per observation batch.
* ``robots: N`` (central batched inference, SEED RL style): one node, normally ``/policy``,
  subscribes ``/robot_k/observations`` and publishes ``/robot_k/actions`` for k < N. Pending
  batches are collected and answered by ONE forward pass over their concatenation as soon as
  every robot has one pending, or when the oldest has waited ``batch_window_ms``; the actions
  are then split and published per robot with each batch's own ``robot_id`` and ``step``.
  Robots per forward pass and the latency batching adds are kept
  in :attr:`PolicyNode.batching` and reported on ``/diagnostics``.

The window deadline is one rclpy timer that runs only while a batch waits (reset when the first
batch of a round arrives, cancelled by the forward pass): a free-running timer at the window
period would wake the process 500 times a second (2 ms) even when every round fills at once.

Two ways of acting, chosen by ``onnx_model``:

* ``''`` (the default): the torch actor on ``device`` (``auto``: CUDA when present), following
  ``/policy_weights``. Observations go to the device and actions come back once per forward pass.
* a file written by ``rl-bringup export``: onnxruntime on the CPU, deterministic, fixed weights.
  The node then takes its observation and action sizes from the model (checking the task the
  model records against ``env_id``), does not subscribe to ``/policy_weights``, and imports
  neither torch nor the simulator code, so it runs from the robot-side install of
  requirements-edge.txt (docs/tools.md, "On the robot: the edge install").
"""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_core.central_batching import BatchingStats, CentralBatcher
from rl_core.config import ConfigError, PolicyConfig
from rl_core.image_codecs import is_image_shape
from rl_core.onnx_policy import OnnxPolicy
from rl_interfaces.srv import GetAction
from rl_nodes import graph
from rl_nodes.base import OK, STREAM_QOS, WARN, RLNode, load_weights_key, weights_refusal
from rl_nodes.conversions import (
    ACTIONS,
    MAX_REQUEST_ROWS,
    OBSERVATIONS,
    OBSERVATIONS_WITH_IMAGES,
    WEIGHTS,
    Actions,
    Observations,
    Weights,
)
from rl_nodes.graph import robot_namespace
from rl_nodes.intra_process import IntraProcessPublisher
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for

if TYPE_CHECKING:
    from rl_core.encoders import EncodedActor
    from rl_core.networks import SquashedGaussianActor


class PolicyNode(RLNode):
    """Batched inference with the latest actor weights, for one robot or centrally for N."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("policy", namespace)
        self.config = declare_config(self, PolicyConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        self.obs_shape: tuple[int, ...] = ()
        self.action_shape: tuple[int, ...] = ()
        self.onnx: OnnxPolicy | None = None
        self.actor: SquashedGaussianActor | EncodedActor | None = None
        if self.config.onnx_model:
            self.onnx = self._load_onnx(self.config.onnx_model)
        else:
            self.actor = self._build_actor()
        self.version = 0
        self.epoch = 0  # run epoch of the trainer whose weights are loaded
        # An ONNX policy follows no weights, so it needs no key (nor a warning about none).
        self.weights_key = load_weights_key(self.get_logger()) if self.actor is not None else None
        self._weights_at = time.monotonic()  # when the current weights arrived (start: own init)
        self._started_at = time.monotonic()
        self._actor_lock = threading.Lock()  # get_action runs on the executor thread
        self.robots = self.config.robots
        #: ``actions`` of this node's namespace (per robot), or ``/robot_k/actions`` at index k.
        self.actions_pubs: list[IntraProcessPublisher[Actions]] = []
        #: The central batching (robots: N); its totals stay empty per robot.
        self.batcher = CentralBatcher(self.robots)
        if self.robots:
            self._serve_robots(self.robots)
        else:
            self.actions_pubs.append(self.zc_publisher(ACTIONS, graph.ACTIONS))
            self._subscribe_observations(graph.OBSERVATIONS.name, self._on_observations)
        if self.actor is not None:  # an ONNX policy keeps its weights (and needs no torch)
            self.zc_subscription(WEIGHTS, graph.WEIGHTS, self._on_weights)
        service = self.create_service(GetAction, graph.GET_ACTION.name, self._on_get_action)
        if self.robots:
            self.get_logger().info(
                f"central policy for {robot_namespace(0)} .. {robot_namespace(self.robots - 1)}, "
                f"batch window {self.config.batch_window_ms:g} ms; get_action at "
                f"{service.service_name}")

    def _load_onnx(self, path: str) -> OnnxPolicy:
        """The exported policy at ``path``; the node's sizes come from it.

        :raises ConfigError: when the file is missing or unreadable, or the model records
            another task than ``env_id``.
        """
        try:
            onnx = OnnxPolicy(path)
        except (OSError, ValueError) as error:
            raise ConfigError(f"onnx_model: {error}") from error
        if onnx.env_id is not None and onnx.env_id != self.config.env_id:
            raise ConfigError(f"ONNX model {path} was exported for {onnx.env_id}, this policy's "
                              f"env_id is {self.config.env_id}; set env_id:={onnx.env_id} or "
                              f"export a checkpoint of {self.config.env_id}")
        self.obs_shape, self.action_shape = (onnx.obs_dim,), (onnx.action_dim,)
        ignored = f"; device:={self.config.device} ignored" if self.config.device != "auto" else ""
        self.get_logger().info(
            f"acting with ONNX model {path} ({onnx.obs_dim} -> {onnx.action_dim}, task "
            f"{onnx.env_id or 'not recorded'}; onnxruntime on the CPU, deterministic; "
            f"/policy_weights not followed{ignored})")
        return onnx

    def _build_actor(self) -> SquashedGaussianActor | EncodedActor:
        """The torch actor on ``device``, randomly initialised (version 0) until weights come.

        torch and the simulator code are imported here, not at module level: an ONNX policy
        runs without them.

        :raises ConfigError: when ``device:=cuda`` and torch has no CUDA.
        """
        import torch

        from rl_core.device import describe, resolve_device
        from rl_core.encoders import make_actor
        from rl_core.envs import space_shapes

        device = resolve_device(self.config.device)
        self.obs_shape, self.action_shape = space_shapes(self.config.env_id)
        torch.manual_seed(self.config.seed)
        actor = make_actor(self.obs_shape, int(np.prod(self.action_shape)),
                           self.config.hidden_sizes, self.config.feature_dim,
                           self.config.encoder_channels).to(device)
        if device.type != "cpu":
            self.get_logger().info(f"acting on {describe(device)}")
        return actor

    def _apply_config(self, config: PolicyConfig) -> None:
        window_changed = config.batch_window_ms != self.config.batch_window_ms
        self.config = config
        if self.robots and window_changed:
            # Parameter callbacks may run on the executor thread; the batching state belongs to
            # the dispatch thread.
            self.ipc.post(self._set_window, config.batch_window_ms)

    @property
    def pixels(self) -> bool:
        """Whether the task observes images (the torch actor then has an encoder)."""
        return is_image_shape(self.obs_shape)

    def _act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Actions for observations of ``self.obs_shape``, or for an image task also for the
        encoder's features (``observation_codec`` latent: the robot ran the encoder)."""
        if self.onnx is not None:
            return self.onnx.act(obs.reshape(obs.shape[0], -1)).reshape(
                (obs.shape[0], *self.action_shape))
        assert self.actor is not None
        with self._actor_lock:
            if not self.pixels:
                actions = self.actor.act(obs.reshape(obs.shape[0], -1), deterministic=deterministic)
            elif obs.ndim == 2:  # features
                actions = self.actor.head.act(obs, deterministic=deterministic)
            else:
                actions = self.actor.act(obs, deterministic=deterministic)
        return actions.reshape((obs.shape[0], *self.action_shape))

    def _valid_observations(self, msg: Observations) -> bool:
        # Values from the network were checked finite when decoded (rl_nodes.conversions).
        shape = msg.obs.shape[1:]
        if shape == self.obs_shape or self.pixels and shape == (self.config.feature_dim,):
            return True
        features = (f" or encoder features (N, {self.config.feature_dim})" if self.pixels
                    else "")
        self.reject("observations", f"expected observations of shape "
                    f"(N, {', '.join(map(str, self.obs_shape))}){features}, got {msg.obs.shape}")
        return False

    def _subscribe_observations(self, topic: str, callback: Any) -> None:
        """Observations of ``topic``; for an image task with the images of its side topics."""
        if self.pixels:
            # sensor_msgs is imported only here: the edge install (an ONNX policy on state
            # vectors) does not have it.
            from rl_nodes.image_transport import subscribe_with_images

            subscribe_with_images(self, OBSERVATIONS_WITH_IMAGES, topic, STREAM_QOS, callback,
                                  "observations")
        else:
            self.zc_subscription(OBSERVATIONS, topic, callback)

    def _on_observations(self, msg: Observations) -> None:
        if not self._valid_observations(msg):
            return
        actions = self._act(msg.obs, self.config.deterministic)
        self.actions_pubs[0].publish(Actions(msg.robot_id, msg.step, actions, self.version,
                                             msg.stamp_ns))

    # --- central batched inference ---------------------------------------------------------------

    def _serve_robots(self, robots: int) -> None:
        """Subscribe every robot's observations and set up the batching state."""
        for robot in range(robots):
            namespace = robot_namespace(robot)
            self.actions_pubs.append(self.zc_publisher(ACTIONS, graph.resolve(
                graph.ACTIONS.name, namespace)))
            self._subscribe_observations(graph.resolve(graph.OBSERVATIONS.name, namespace),
                                         functools.partial(self._on_robot_observations, robot))
        self._window_timer: Any = None
        self._window_s = 0.0
        self._set_window(self.config.batch_window_ms)

    def _set_window(self, window_ms: float) -> None:
        """(Re)create the deadline timer for a window of ``window_ms`` (none for 0)."""
        if self._window_timer is not None:
            self.destroy_timer(self._window_timer)
            self._window_timer = None
        self._window_s = window_ms / 1e3
        if self._window_s > 0:
            self._window_timer = self.zc_timer(self._window_s, self._on_window)
            if self.batcher.pending:
                self._arm_window()
            else:
                self._window_timer.cancel()
        elif self.batcher.pending:
            self._forward_pending()

    def _arm_window(self) -> None:
        """Start the deadline: the timer fires once the window has passed from now."""
        self._window_timer.reset()
        if not self.ipc.on_dispatch_thread:
            # The executor runs in another thread (tests, tools) and may be blocked in a wait
            # computed without this timer; wake it so the deadline counts. In the node runtime
            # this thread drives the executor and rebuilds the wait anyway.
            executor = self.executor
            if executor is not None:
                executor.wake()

    def _on_robot_observations(self, robot: int, msg: Observations) -> None:
        if not self._valid_observations(msg):
            return
        if not self.batcher.pending and self._window_timer is not None:
            self._arm_window()
        if self.batcher.add(robot, msg, time.monotonic()) or self._window_timer is None:
            self._forward_pending()

    def _on_window(self) -> None:
        if not self.batcher.pending:
            if self._window_timer is not None:  # None: a tick posted before the window became 0
                self._window_timer.cancel()
            return
        if self.batcher.oldest_wait_s(time.monotonic()) < 0.5 * self._window_s:
            return  # fired for a round already answered; the timer was reset for this one
        self._forward_pending()

    def _forward_pending(self) -> None:
        """One forward pass over every pending batch, then each robot's share of the actions."""
        if self._window_timer is not None:
            self._window_timer.cancel()
        version = self.version
        for batch, actions in self.batcher.forward(
                lambda obs: self._act(obs, self.config.deterministic)):
            msg = batch.msg
            self.actions_pubs[batch.robot].publish(
                Actions(msg.robot_id, msg.step, actions, version, msg.stamp_ns))

    def _batching_diagnostics(self) -> tuple[dict[str, object], list[int]]:
        """Figures of the batching since the last report, and the robots that sent nothing."""
        recent, max_wait_s, silent = self.batcher.report()
        values = {"robots": self.robots, "batch window ms": f"{self._window_s * 1e3:g}",
                  "forward passes": recent.forward_passes,
                  "robots per forward pass": f"{recent.robots_per_pass:.2f}",
                  "observations per forward pass": f"{recent.rows_per_pass:.1f}",
                  "batch wait ms": f"{recent.mean_wait_ms:.3f}",
                  "batch wait max ms": f"{max_wait_s * 1e3:.3f}",
                  "answer latency ms": f"{recent.mean_latency_ms:.3f}"}
        return values, silent

    @property
    def batching(self) -> BatchingStats:
        """Totals of the central batching (tools and tests read them)."""
        return self.batcher.stats

    @property
    def robot_batches(self) -> list[int]:
        return self.batcher.robot_batches

    # --- weights, diagnostics, get_action ---------------------------------------------------------

    def _on_weights(self, msg: Weights) -> None:
        assert self.actor is not None  # an ONNX policy never subscribes
        if (msg.epoch, msg.version) == (self.epoch, self.version):
            return  # the latched copy of the current weights again
        refusal = weights_refusal(msg, self.weights_key, (self.epoch, self.version))
        if refusal is not None:
            self.reject("policy weights", refusal)
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
            self.epoch, self.version = msg.epoch, msg.version
            self._weights_at = time.monotonic()
        if first:
            self.get_logger().info(f"received weights version {msg.version}")

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        age = time.monotonic() - self._weights_at
        values: dict[str, object] = {"weights version": self.version,
                                     "weights age s": f"{age:.1f}"}
        silent: list[int] = []
        if self.robots:
            batching, silent = self._batching_diagnostics()
            values.update(batching)
        if self.version == 0 and time.monotonic() - self._started_at > 30.0:
            return WARN, "no weights received yet (is the trainer running?)", values
        if self.version and age > 60.0:
            return WARN, f"weights are {age:.0f} s old (trainer stalled or gone?)", values
        if silent and len(silent) < self.robots:
            names = ", ".join(robot_namespace(robot) for robot in silent)
            return WARN, (f"no observations from {names} (forward passes wait up to the batch "
                          "window for them)"), values
        return OK, f"acting with weights v{self.version}", values

    def _on_get_action(self, request: GetAction.Request, response: GetAction.Response
                       ) -> GetAction.Response:
        shape = tuple(request.obs_shape)
        if len(request.obs) > MAX_REQUEST_ROWS * max(int(np.prod(self.obs_shape)), 1):
            response.success = False
            response.message = f"at most {MAX_REQUEST_ROWS} observations per request"
            self.reject("get_action request", response.message)
            return response
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
