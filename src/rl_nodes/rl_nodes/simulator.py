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
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray
from rl_core.envs import VectorEnv

from rl_nodes.base import ACTIONS_TOPIC, EPISODES_TOPIC, EXPERIENCE_TOPIC, OBSERVATIONS_TOPIC
from rl_nodes import visualization
from rl_nodes.base import LATCHED_QOS, OK, WARN, RLNode, robot_id_from_namespace
from rl_nodes.conversions import ACTIONS, EPISODES, EXPERIENCE, OBSERVATIONS, plain
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
        self._rate_window = (time.monotonic(), 0)
        self.steps_per_second = 0.0
        self._setup_visualization()
        self.get_logger().info(
            f"robot {self.robot_id}: {self.config.num_envs} x {self.config.env_id}, seed {seed}")

    def _apply_config(self, config: SimulatorConfig) -> None:
        rate_changed = config.visualization_rate_hz != self.config.visualization_rate_hz
        self.config = config
        if rate_changed:
            self._start_visualization_timer()

    # --- rviz: robot_description, joint_states, markers, TF ---------------------------------------

    def _setup_visualization(self) -> None:
        self._shown_env = self.envs.envs[0].unwrapped
        description = self.zc_publisher(plain(String), "robot_description", LATCHED_QOS)
        description.publish(String(data=visualization.urdf_for_rviz(self._shown_env.urdf_path)))
        self.joint_states_pub = self.zc_publisher(plain(JointState), "joint_states")
        self.markers_pub = self.zc_publisher(plain(MarkerArray), "markers")
        self.tf_pub = (self.zc_publisher(plain(visualization.TFMessage), "/tf")
                       if visualization.TFMessage is not None else None)
        self._visualization_timer = None
        self._start_visualization_timer()

    def _start_visualization_timer(self) -> None:
        if self._visualization_timer is not None:
            self.destroy_timer(self._visualization_timer)
            self._visualization_timer = None
        if self.config.visualization_rate_hz > 0:
            self._visualization_timer = self.zc_timer(1.0 / self.config.visualization_rate_hz,
                                                      self._publish_visualization)

    def _publish_visualization(self) -> None:
        """Publish environment 0's state, building only what someone listens to."""
        stamp = self.get_clock().now().to_msg()
        env = self._shown_env
        if self.joint_states_pub.get_subscription_count():
            self.joint_states_pub.publish(visualization.joint_state(env, stamp))
        if self.markers_pub.get_subscription_count():
            self.markers_pub.publish(visualization.markers(env, self.robot_id, stamp))
        if self.tf_pub is not None and self.tf_pub.get_subscription_count():
            self.tf_pub.publish(visualization.transforms(env, self.robot_id, stamp))

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        now = time.monotonic()
        then, steps_then = self._rate_window
        self._rate_window = (now, self.total_env_steps)
        self.steps_per_second = (self.total_env_steps - steps_then) / max(now - then, 1e-9)
        values = {"env steps/s": f"{self.steps_per_second:.1f}", "env steps": self.total_env_steps,
                  "episodes": self.total_episodes, "policy version": self.policy_version}
        target = self.config.max_rate_hz * self.config.num_envs
        if now - self._sent_at > RESEND_AFTER_S:
            return WARN, "waiting for actions (is the policy running?)", values
        if target and self.steps_per_second < 0.8 * target:
            return WARN, f"below target rate ({self.steps_per_second:.0f} < {target:.0f} steps/s)", values
        return OK, "stepping", values

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
