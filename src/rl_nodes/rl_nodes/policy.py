"""Policy node: observation batches in, action batches out, following ``/policy_weights``.

Also serves ``~/get_action`` for request/response clients (a real robot, a tool, an evaluation).
Until the first weights arrive it acts with its own randomly initialised actor (version 0).
``robots: 0`` (the default) serves the node's own namespace, one forward pass per batch.
``robots: N`` is central batched inference (SEED RL style): one node, normally ``/policy``,
serves ``/robot_k/observations`` -> ``/robot_k/actions`` for k < N with one forward pass over the
robots' pending batches (:mod:`rl_core.acting.central_batching`) once every robot has one pending
or the oldest has waited ``batch_window_ms``. That deadline is a timer that runs only while a
batch waits, so the process does not wake at the window's period when every round fills at once
(docs/performance.md, "Pipelining and central inference").

``onnx_model`` picks what acts (:mod:`rl_core.acting.policy_model`): the torch actor on ``device``,
following the weights :mod:`rl_core.acting.policy_model` accepts, or an exported model with
fixed weights that needs neither torch nor the simulator code (docs/tools.md, "On the robot").
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from rl_core.acting.central_batching import CentralBatcher
from rl_core.acting.policy_model import WeightsGate, build_policy_model, encoded_size_bound
from rl_core.config import PolicyConfig
from rl_core.security.action_auth import answer
from rl_core.wire.messages import MAX_REQUEST_ROWS
from rl_interfaces.srv import GetAction
from rl_nodes import graph
from rl_nodes.base import (
    OK,
    STREAM_QOS,
    WARN,
    RLNode,
    load_action_keys,
    load_public_key,
    robot_id_from_namespace,
)
from rl_nodes.graph import robot_namespace
from rl_nodes.intra_process_endpoints import IntraProcessPublisher
from rl_nodes.messages import (
    ACTIONS,
    OBSERVATIONS,
    OBSERVATIONS_WITH_IMAGES,
    Actions,
    Observations,
    Weights,
)
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for


class PolicyNode(RLNode):
    """Batched inference with the latest actor weights, for one robot or centrally for N."""

    NAME = "policy"

    def build(self) -> None:
        self.config = declare_config(self, PolicyConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        self.model, note = build_policy_model(self.config)
        if note is not None:
            self.get_logger().info(note)
        self.obs_shape, self.action_shape = self.model.obs_shape, self.model.action_shape
        self.actor = self.model.actor  # None for an ONNX policy
        # An ONNX policy follows no weights, so it needs no key (nor a warning about none).
        key = (load_public_key(self.get_logger(), self.config.allow_unsigned)
               if self.actor is not None else None)
        self.weights = WeightsGate(key, time.monotonic(), None if self.actor is None else
                                   encoded_size_bound(self.actor.state_dict()),
                                   self.config.allow_unsigned)
        self.robots = self.config.robots
        # The MAC that lets a simulator step with our actions (rl_core.security.action_auth); per robot,
        # for the robot this node serves, never for one an observation names, and over the
        # digest of the observations answered: a simulator takes it only for its own.
        self.action_keys = load_action_keys(self.get_logger())
        self.robot_id = robot_id_from_namespace(self.get_namespace())
        #: ``actions`` of this node's namespace (per robot), or ``/robot_k/actions`` at index k.
        self.actions_pubs: list[IntraProcessPublisher[Actions]] = []
        #: The central batching (robots: N; tools and tests read its totals, empty per robot).
        self.batcher = CentralBatcher(self.robots)
        if self.robots:
            self._serve_robots(self.robots)
        else:
            self.actions_pubs.append(self.publisher(graph.ACTIONS))
            self._subscribe_observations(graph.OBSERVATIONS.name, self._on_observations)
        if self.actor is not None:  # an ONNX policy keeps its weights (and needs no torch)
            self.subscription(graph.WEIGHTS, self._on_weights)
        service = self.create_service(GetAction, graph.GET_ACTION.name, self._on_get_action)
        if self.robots:
            self.get_logger().info(
                f"central policy for {robot_namespace(0)} .. {robot_namespace(self.robots - 1)}, "
                f"batch window {self.config.batch_window_ms:g} ms; get_action at "
                f"{service.service_name}")

    @property
    def version(self) -> int:
        """Version of the weights acted with (0: the initial actor)."""
        return self.weights.version

    def _apply_config(self, config: PolicyConfig) -> None:
        window_changed = config.batch_window_ms != self.config.batch_window_ms
        self.config = config
        if self.robots and window_changed:
            # Parameter callbacks may run on the executor thread; the batching state belongs to
            # the dispatch thread.
            self.ipc.post_for(self, self._set_window, config.batch_window_ms)

    def _act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return self.model.act(obs, deterministic)

    def _valid_observations(self, msg: Observations) -> bool:
        if not self.active:
            return False  # deactivated: the simulators resend once the policy is active again
        # Values from the network were checked finite when decoded (rl_nodes.messages).
        refusal = self.model.observations_refusal(msg.obs)
        if refusal is not None:
            self.reject("observations", refusal)
        return refusal is None

    def _subscribe_observations(self, topic: str, callback: Any) -> None:
        """Observations of ``topic``; for an image task with the images of its side topics."""
        if self.model.pixels:
            # sensor_msgs is imported only here: the edge install (an ONNX policy on state
            # vectors) does not have it.
            from rl_nodes.image_transport import subscribe_with_images

            subscribe_with_images(self, OBSERVATIONS_WITH_IMAGES, topic, STREAM_QOS, callback,
                                  "observations", self.model.obs_shape)
        else:
            self.subscription(topic, callback, OBSERVATIONS, stepping=True)

    def _on_observations(self, msg: Observations) -> None:
        if not self._valid_observations(msg):
            return
        actions = self._act(msg.obs, self.config.deterministic)
        self.actions_pubs[0].publish(answer(self.action_keys, self.robot_id, msg, actions,
                                            self.version))

    # --- central batched inference ---------------------------------------------------------------

    def _serve_robots(self, robots: int) -> None:
        """Subscribe every robot's observations and set up the batching window."""
        for robot in range(robots):
            # The robots of this policy's deployment: /robot_k, or /NS/robot_k under namespace:=NS.
            namespace = graph.in_namespace(self.get_namespace(), robot_namespace(robot))
            self.actions_pubs.append(self.publisher(graph.resolve(
                graph.ACTIONS.name, namespace), ACTIONS, stepping=True))
            self._subscribe_observations(graph.resolve(graph.OBSERVATIONS.name, namespace),
                                         functools.partial(self._on_robot_observations, robot))
        self._window_timer: Any = None
        self._set_window(self.config.batch_window_ms)

    def _set_window(self, window_ms: float) -> None:
        """(Re)create the deadline timer for a window of ``window_ms`` (none for 0)."""
        if self._window_timer is not None:
            self.destroy_timer(self._window_timer)
            self._window_timer = None
        self.batcher.window_s = window_ms / 1e3
        if self.batcher.window_s > 0:
            self._window_timer = self.timer(self.batcher.window_s, self._on_window)
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
        # Nothing pending: the forward pass only cancels the timer (it may be a tick posted
        # before the window became 0).
        if not self.batcher.tick_is_early(time.monotonic()):
            self._forward_pending()

    def _forward_pending(self) -> None:
        """One forward pass over every pending batch, then each robot's share of the actions."""
        if self._window_timer is not None:
            self._window_timer.cancel()
        version = self.version
        for batch, actions in self.batcher.forward(
                lambda obs: self._act(obs, self.config.deterministic)):
            self.actions_pubs[batch.robot].publish(
                answer(self.action_keys, batch.robot, batch.msg, actions, version))

    # --- weights, diagnostics, get_action ---------------------------------------------------------

    def _on_weights(self, msg: Weights) -> None:
        assert self.actor is not None  # an ONNX policy never subscribes
        if self.weights.is_current(msg):
            return  # the latched copy of the current weights again
        refusal = self.weights.refusal(msg, self.actor.architecture())
        if refusal is None:
            try:
                self.model.load(msg.tensors())
            except RuntimeError as error:
                refusal = f"tensors do not fit the actor: {error}"
        if refusal is not None:
            self.reject("policy weights", refusal)
        elif self.weights.loaded(msg, time.monotonic()):
            self.get_logger().info(f"received weights version {msg.version}")

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        now = time.monotonic()
        values = self.weights.figures(now)
        silent: list[int] = []
        if self.robots:
            batching, silent = self.batcher.diagnostics()
            values.update(batching)
        warning = self.weights.warning(now)
        if warning is not None:
            return WARN, warning, values
        if silent and len(silent) < self.robots:
            names = ", ".join(robot_namespace(robot) for robot in silent)
            return WARN, (f"no observations from {names} (forward passes wait up to the batch "
                          "window for them)"), values
        return OK, f"acting with weights v{self.version}", values

    def _on_get_action(self, request: GetAction.Request, response: GetAction.Response
                       ) -> GetAction.Response:
        try:
            if not self.active:
                raise ValueError(f"{self.get_fully_qualified_name()} is inactive (lifecycle)")
            obs = self.model.request_observations(request.obs, request.obs_shape, MAX_REQUEST_ROWS)
        except ValueError as error:
            response.success = False
            response.message = str(error)
            self.reject("get_action request", response.message)
            return response
        actions = self._act(obs, request.deterministic)
        response.success = True
        response.action_shape = list(self.action_shape)
        response.actions = actions.reshape(-1).tolist()
        response.policy_version = self.version
        return response


def main() -> int:
    return main_for("policy")


if __name__ == "__main__":
    raise SystemExit(main())
