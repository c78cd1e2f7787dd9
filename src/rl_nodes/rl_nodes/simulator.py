"""Simulator node: one robot's vectorised pybullet environments.

Publishes an observation batch, waits for the action batch answering it, steps every environment,
publishes the transitions to ``/experience`` and the finished episodes to ``/episodes``, then the
next observation batch. A watchdog republishes the pending observations when no answer comes
(policy started late, restarted or a message was lost), so the loop never stalls for good.
"""

from __future__ import annotations

import time

import numpy as np
from rl_core.config import SimulatorConfig
from rl_core.envs import VectorEnv

from rl_nodes.base import ACTIONS_TOPIC, EPISODES_TOPIC, EXPERIENCE_TOPIC, OBSERVATIONS_TOPIC
from rl_nodes.base import RLNode, robot_id_from_namespace
from rl_nodes.conversions import ACTIONS, EPISODES, EXPERIENCE, OBSERVATIONS
from rl_nodes.conversions import Actions, Episodes, Experience, Observations
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for

RESEND_AFTER_S = 1.0  # watchdog: republish observations unanswered for this long


class SimulatorNode(RLNode):
    """Steps ``num_envs`` environments of ``env_id`` for robot ``/robot_k``."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("simulator", namespace)
        self.config = declare_config(self, SimulatorConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        self.robot_id = robot_id_from_namespace(self.get_namespace())
        seed = self.config.seed + 1000 * self.robot_id
        self.envs = VectorEnv(self.config.env_id, self.config.num_envs)
        self.obs = self.envs.reset(seed=seed)
        self.env_ids = np.arange(self.config.num_envs, dtype=np.uint32)
        self._rng = np.random.default_rng(seed)
        self._action_shape = (self.config.num_envs, *self.envs.single_action_space.shape)
        self.step_count = 0
        self.total_env_steps = 0
        self.total_episodes = 0
        self.policy_version = 0
        self._sent_at = 0.0
        self._next_step_at = 0.0
        self.observations_pub = self.zc_publisher(OBSERVATIONS, OBSERVATIONS_TOPIC)
        self.experience_pub = self.zc_publisher(EXPERIENCE, EXPERIENCE_TOPIC)
        self.episodes_pub = self.zc_publisher(EPISODES, EPISODES_TOPIC)
        self.zc_subscription(ACTIONS, ACTIONS_TOPIC, self._on_actions)
        self.zc_timer(RESEND_AFTER_S / 2, self._watchdog)
        self.get_logger().info(
            f"robot {self.robot_id}: {self.config.num_envs} x {self.config.env_id}, seed {seed}")

    def _apply_config(self, config: SimulatorConfig) -> None:
        self.config = config

    def start(self) -> None:
        self._publish_observations()

    def _publish_observations(self) -> None:
        self._sent_at = time.monotonic()
        self.observations_pub.publish(
            Observations(self.robot_id, self.step_count, self.obs, time.time_ns()))

    def _watchdog(self) -> None:
        if time.monotonic() - self._sent_at > RESEND_AFTER_S:
            self._publish_observations()

    def _on_actions(self, msg: Actions) -> None:
        if msg.robot_id != self.robot_id or msg.step != self.step_count:
            return  # an answer to a republished or another robot's batch: already handled
        if msg.actions.shape != self._action_shape or not np.all(np.isfinite(msg.actions)):
            self.reject("actions", f"expected finite actions of shape {self._action_shape}, got "
                        f"shape {msg.actions.shape}; republishing the observations")
            self._publish_observations()
            return
        if self.config.max_rate_hz > 0:
            self._pace()
        actions = msg.actions
        if self.total_env_steps < self.config.random_steps:
            actions = self._rng.uniform(-1.0, 1.0, self._action_shape).astype(np.float32)
        self.policy_version = msg.policy_version
        step = self.envs.step(actions)
        self.experience_pub.publish(Experience(
            self.robot_id, self.obs, actions, step.rewards, step.next_obs, step.terminated,
            step.truncated, msg.policy_version, time.time_ns(), self.env_ids))
        self.obs = step.obs
        self.step_count += 1
        self.total_env_steps += self.config.num_envs
        if step.episodes:
            self.total_episodes += len(step.episodes)
            self.episodes_pub.publish(Episodes(
                self.robot_id, [e.env_index for e in step.episodes],
                [e.episode_return for e in step.episodes], [e.length for e in step.episodes],
                [bool(e.is_success) for e in step.episodes], self.total_episodes,
                self.total_env_steps, self.policy_version, time.time_ns()))
        self._publish_observations()

    def _pace(self) -> None:
        """Hold the configured control rate (a real robot cannot step faster)."""
        now = time.monotonic()
        if self._next_step_at > now:
            time.sleep(self._next_step_at - now)
        self._next_step_at = max(now, self._next_step_at) + 1.0 / self.config.max_rate_hz

    def close(self) -> None:
        self.envs.close()


def main() -> int:
    return main_for("simulator")


if __name__ == "__main__":
    raise SystemExit(main())
