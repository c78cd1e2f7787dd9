"""Simulator node: one robot's vectorised pybullet environments.

Publishes an observation batch, waits for the action batch answering it, steps the environments,
publishes the transitions to ``/experience`` and the finished episodes to ``/episodes``, then the
next observation batch. A watchdog republishes pending observations when no answer comes (policy
started late, restarted or a message was lost), so the loop never stalls for good.

With ``pipeline: true`` the environments form two *lanes* (halves) with observation batches of
their own (Sample Factory's double-buffered sampling): while one lane waits for its actions the
other steps, so physics overlaps transport and inference in another process. A lane's batches
carry step numbers ``count * lanes + lane``, so the answer tells which lane it is for.

The replay buffer's rate limiter pauses acting through ``/replay_status`` (``acting_paused``): a
lane that finishes a step while acting is paused holds its next observations until a status
without the pause arrives. No transition is dropped; the robot only waits for the learner.
While the limiter is on, a replay buffer that falls silent (its host unreachable: a cut link, a
crashed process) pauses acting too, after ``STATUS_SILENCE_S``: experience sent then would be lost,
or reach the learner late as a burst played with stale weights. The next status resumes it.

A task that observes images sends them across DDS as ``observation_codec`` says (raw, png, jpeg:
one image message per batch on the batch topic's side topic; latent: the trainer's encoder runs
here and only features reach a policy in another process), see rl_nodes.image_transport. The
payload bytes sent over DDS are counted on ``/diagnostics``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from rl_core import variables
from rl_core.acting import ActingGate, Pacer
from rl_core.config import BoundaryConfig, ConfigError, SimulatorConfig
from rl_core.envs import PybulletRobotEnv, VectorEnv
from rl_core.image_codecs import is_image_shape
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph, visualization
from rl_nodes.base import (
    EXPERIENCE_QOS,
    OK,
    STREAM_QOS,
    WARN,
    RLNode,
    load_weights_key,
    robot_id_from_namespace,
)
from rl_nodes.conversions import (
    ACTIONS,
    EPISODES,
    EXPERIENCE,
    OBSERVATIONS,
    WEIGHTS,
    Actions,
    Episodes,
    Experience,
    Observations,
    Weights,
    plain,
)
from rl_nodes.image_transport import LatentEncoder, image_publisher
from rl_nodes.intra_process import IntraProcessPublisher
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.robot_boundary import RobotBoundary
from rl_nodes.runtime import main_for

RESEND_AFTER_S = 1.0  # watchdog: republish observations unanswered for this long
#: With the rate limiter on, acting pauses when no /replay_status came for this long: twice the
#: longest interval between statuses that the graph accepts.
STATUS_SILENCE_S = 2.0 / graph.REPLAY_STATUS.rate_hz[0]
RESTART_VARIABLE = variables.RESTART_COUNT  # set by the rl-bringup supervisor on respawn
RESTART_SEED_STRIDE = 1_000_003


@dataclass
class Lane:
    """A group of environments stepped together, with its own observation batch in flight."""

    index: int
    envs: VectorEnv
    env_ids: np.ndarray  # robot-wide index of each environment of the lane
    obs: np.ndarray
    count: int = 0  # steps taken
    sent_at: float = 0.0
    held: bool = False  # next observations withheld while acting is paused


class SimulatorNode(RLNode):
    """Steps ``num_envs`` environments of ``env_id`` for robot ``/robot_k``."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("simulator", namespace)
        self.config = declare_config(self, SimulatorConfig)
        self.boundary_config = declare_config(self, BoundaryConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        watch_config(self, lambda: self.boundary_config, self._apply_boundary_config)
        self.robot_id = robot_id_from_namespace(self.get_namespace())
        # A respawned simulator (the supervisor counts restarts) continues with a fresh seed
        # stream instead of repeating the data of its first run.
        restarts = int(os.environ.get(RESTART_VARIABLE, "0") or 0)
        seed = self.config.seed + 1000 * self.robot_id + RESTART_SEED_STRIDE * restarts
        self.boundary: RobotBoundary | None = None
        self.lanes = ([] if self.boundary_config.robot_interface == "ros2_control"
                      else self._make_lanes(seed))
        self._rng = np.random.default_rng(seed)
        self.step_count = 0
        self.stream = time.time_ns()  # this run of the simulator; a respawn starts a newer one
        self.sequence = 0  # experience messages sent in this stream
        self.total_env_steps = 0
        self.total_episodes = 0
        self.policy_version = 0
        self.gate = ActingGate(STATUS_SILENCE_S)
        self.pacer = Pacer(self.config.max_rate_hz)
        self.observations_pub = self.zc_publisher(OBSERVATIONS, graph.OBSERVATIONS)
        self.experience_pub = self.zc_publisher(EXPERIENCE, graph.EXPERIENCE)
        self.episodes_pub = self.zc_publisher(EPISODES, graph.EPISODES)
        self.zc_subscription(ACTIONS, graph.ACTIONS, self._on_actions)
        self.zc_subscription(plain(ReplayStatus), graph.REPLAY_STATUS, self._on_replay_status)
        self.zc_timer(RESEND_AFTER_S / 2, self._watchdog)
        self._rate_window = (time.monotonic(), 0)
        self.steps_per_second = 0.0
        if not self.lanes:
            self._setup_boundary(seed)
            return
        self._setup_images()
        self._setup_visualization()
        self.get_logger().info(
            f"robot {self.robot_id}: {self.config.num_envs} x {self.config.env_id}, seed {seed}, "
            f"{len(self.lanes)} lane{'s' if len(self.lanes) > 1 else ''}")

    @property
    def acting_paused(self) -> bool:
        return self.gate.paused

    @property
    def replay_silent(self) -> bool:
        """Acting paused because the replay buffer fell silent."""
        return self.gate.silent

    def _setup_boundary(self, seed: int) -> None:
        """robot_interface ros2_control: drive the robot in this namespace (rl_nodes.robot_boundary)."""
        from rl_core.robot.tasks import load_task

        try:
            task = load_task(self.config.env_id)
        except ValueError as error:
            raise ConfigError(f"robot_interface ros2_control needs a task: {error}") from error
        if self.config.num_envs != 1 or self.config.pipeline:
            self.get_logger().warn("robot_interface ros2_control drives one robot: num_envs and "
                                   "pipeline are ignored")
        self.pixels, self.latent, self._shown_env = False, None, None
        self.obs_image_pub = self.experience_image_pub = None
        self.env_ids = np.zeros(1, dtype=np.uint32)
        self.boundary = RobotBoundary(self, task, self.boundary_config, seed)
        self.get_logger().info(
            f"robot {self.robot_id}: task {type(task).__name__} ({self.config.env_id}) through "
            f"ros2_control: joint_states in, {self.boundary.controller}/"
            f"{self.boundary_config.command_topic} out ({self.boundary.interface}), seed {seed}")

    def _make_lanes(self, seed: int) -> list[Lane]:
        num_envs = self.config.num_envs
        if self.config.pipeline and num_envs < 2:
            self.get_logger().warn("pipeline needs num_envs >= 2; stepping all environments as "
                                   "one batch")
        sizes = [num_envs // 2, num_envs - num_envs // 2] if self.config.pipeline and num_envs >= 2 \
            else [num_envs]
        lanes, offset = [], 0
        for index, size in enumerate(sizes):
            envs = VectorEnv(self.config.env_id, size)
            lanes.append(Lane(index, envs, np.arange(offset, offset + size, dtype=np.uint32),
                              envs.reset(seed=seed + offset)))
            offset += size
        return lanes

    def _setup_images(self) -> None:
        """Image side-topic publishers and the latent encoder, for a task that observes images
        (rl_nodes.image_transport); none for state vectors, whose path stays as it is."""
        self.pixels = is_image_shape(self.envs.single_observation_space.shape)
        self.codec = self.config.observation_codec
        self.obs_image_pub: IntraProcessPublisher[Any] | None = None
        self.experience_image_pub: IntraProcessPublisher[Any] | None = None
        self.latent: LatentEncoder | None = None
        if not self.pixels:
            if self.codec != "raw":
                self.get_logger().warn(f"observation_codec {self.codec!r} ignored: "
                                       f"{self.config.env_id} observes state vectors")
            return
        quality = self.config.jpeg_quality
        if self.codec == "latent":
            self.latent = LatentEncoder(self, self.envs.single_observation_space.shape,
                                        load_weights_key(self.get_logger()))
            self.zc_subscription(WEIGHTS, graph.WEIGHTS, self._on_weights)
        else:
            self.obs_image_pub = image_publisher(self, graph.OBSERVATIONS.name, self.codec,
                                                 quality, STREAM_QOS)
        # The learner trains its encoder on the frames themselves: latent sends them as png.
        self.experience_image_pub = image_publisher(
            self, graph.EXPERIENCE.name, "png" if self.codec == "latent" else self.codec,
            quality, EXPERIENCE_QOS)

    def _on_weights(self, msg: Weights) -> None:
        assert self.latent is not None
        first = not self.latent.ready
        if self.latent.on_weights(msg) and first:
            self.get_logger().info(f"latent observations: encoder of weights version "
                                   f"{msg.version} loaded")
            for lane in self.lanes:
                if lane.held and not self.acting_paused:
                    self._publish_observations(lane)

    def dds_bytes(self) -> dict[str, int]:
        """Payload bytes this simulator sent over DDS: on the acting path (observations and
        their images), with the experience (batches, images, episode statistics) and in all."""
        # (an image publisher is None for state tasks, and the observations' one for latent)
        acting = [self.observations_pub, self.obs_image_pub]
        experience = [self.experience_pub, self.experience_image_pub, self.episodes_pub]
        counts = {name: sum(publisher.dds_bytes for publisher in publishers if publisher)
                  for name, publishers in (("acting", acting), ("experience", experience))}
        return {**counts, "all": counts["acting"] + counts["experience"]}

    @property
    def envs(self) -> VectorEnv:
        """The first lane's environments (all of them without pipelining)."""
        return self.lanes[0].envs

    def _apply_boundary_config(self, config: BoundaryConfig) -> None:
        self.boundary_config = config
        if self.boundary is not None:
            self.boundary.config = config

    def _apply_config(self, config: SimulatorConfig) -> None:
        rate_changed = config.visualization_rate_hz != self.config.visualization_rate_hz
        self.config = config
        self.pacer.rate_hz = config.max_rate_hz
        if rate_changed and isinstance(self._shown_env, PybulletRobotEnv):
            self._start_visualization_timer()

    # --- rviz: robot_description, joint_states, markers, TF ---------------------------------------

    def _setup_visualization(self) -> None:
        self._visualization_timer = None
        self._shown_env = self.envs.envs[0].unwrapped
        if not isinstance(self._shown_env, PybulletRobotEnv):
            # Any gymnasium env trains; only our pybullet robots have a URDF to show.
            self.get_logger().info(f"{self.config.env_id} has no robot model (URDF): no "
                                   "robot_description, joint_states or markers for rviz")
            return
        description = self.zc_publisher(plain(String), graph.ROBOT_DESCRIPTION)
        description.publish(String(data=visualization.urdf_for_rviz(self._shown_env.urdf_path)))
        self.joint_states_pub = self.zc_publisher(plain(JointState), graph.JOINT_STATES)
        self.markers_pub = self.zc_publisher(plain(MarkerArray), graph.MARKERS)
        self.tf_pub = (self.zc_publisher(plain(visualization.TFMessage), graph.TF)
                       if visualization.TFMessage is not None else None)
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
        dds_bytes = self.dds_bytes()
        values = {"env steps/s": f"{self.steps_per_second:.1f}", "env steps": self.total_env_steps,
                  "dds bytes": dds_bytes["all"], "dds bytes acting": dds_bytes["acting"],
                  "dds bytes experience": dds_bytes["experience"],
                  "dds bytes per env step": f"{dds_bytes['all'] / max(self.total_env_steps, 1):.0f}",
                  "episodes": self.total_episodes, "policy version": self.policy_version,
                  "lanes": len(self.lanes), "acting paused": self.acting_paused,
                  "paused s": f"{self.gate.paused_total(now):.1f}"}
        target = self.config.max_rate_hz * self.config.num_envs
        if self.boundary is not None:
            warning = self.boundary.diagnose(values)
            if warning is not None:
                return WARN, warning, values
            target = 0.0
        if self.pixels:
            values["observation codec"] = self.codec
        if self.latent is not None and not self.latent.ready:
            return WARN, "latent observations: waiting for the trainer's encoder weights", values
        if self.replay_silent:
            return WARN, (f"paused: no /replay_status for {self.gate.silent_for(now):.0f} s "
                          "(is the replay buffer's host reachable?)"), values
        if self.acting_paused:
            return OK, "paused by the replay buffer's rate limiter (learner catching up)", values
        if any(now - lane.sent_at > RESEND_AFTER_S for lane in self.lanes):
            return WARN, "waiting for actions (is the policy running?)", values
        if target and self.steps_per_second < 0.8 * target:
            return WARN, f"below target rate ({self.steps_per_second:.0f} < {target:.0f} steps/s)", values
        return OK, "stepping", values

    def start(self) -> None:
        if self.boundary is not None:
            self.boundary.start()
        for lane in self.lanes:
            self._publish_observations(lane)

    # --- stepping -------------------------------------------------------------------------------

    def _publish_observations(self, lane: Lane) -> None:
        obs = lane.obs
        if self.latent is not None and self.observations_pub.has_remote_subscribers():
            if not self.latent.ready:
                lane.held = True  # until the trainer's first weights bring the encoder
                return
            obs = self.latent.encode(obs)
        lane.held = False
        lane.sent_at = time.monotonic()
        data = Observations(self.robot_id, lane.count * len(self.lanes) + lane.index, obs,
                            time.time_ns())
        self.observations_pub.publish(data)
        if self.obs_image_pub is not None:
            self.obs_image_pub.publish(data, local=False)

    def _watchdog(self) -> None:
        now = time.monotonic()
        if self.gate.on_tick(now):
            self.get_logger().warning(
                f"no /replay_status for {self.gate.silent_for(now):.1f} s: the replay buffer is "
                "unreachable, and experience sent now would be lost; acting paused until it "
                "reports again (check the learner host and the network)")
        for lane in self.lanes:
            if not lane.held and now - lane.sent_at > RESEND_AFTER_S:
                self._publish_observations(lane)

    def _on_actions(self, msg: Actions) -> None:
        if self.boundary is not None:
            self._on_boundary_actions(msg)
            return
        lane = self.lanes[msg.step % len(self.lanes)]
        if msg.robot_id != self.robot_id or msg.step // len(self.lanes) != lane.count or lane.held:
            return  # an answer to a republished or another robot's batch: already handled
        shape = (len(lane.env_ids), *self.envs.single_action_space.shape)
        # Values from the network were checked finite when decoded (rl_nodes.conversions).
        if msg.actions.shape != shape:
            self.reject("actions", f"expected actions of shape {shape}, got shape "
                        f"{msg.actions.shape}; republishing the observations")
            self._publish_observations(lane)
            return
        self.pacer.wait()
        self.policy_version = msg.policy_version
        self._step(lane, msg.actions, msg.policy_version)
        if self.acting_paused:
            lane.held = True
        else:
            self._publish_observations(lane)

    def _step(self, lane: Lane, actions: np.ndarray, policy_version: int) -> None:
        if self.total_env_steps < self.config.random_steps:
            actions = self._rng.uniform(-1.0, 1.0, actions.shape).astype(np.float32)
        step = lane.envs.step(actions)
        experience = Experience(
            self.robot_id, lane.obs, actions, step.rewards, step.next_obs, step.terminated,
            step.truncated, policy_version, time.time_ns(), lane.env_ids, self.stream,
            self.sequence)
        self.experience_pub.publish(experience)
        if self.experience_image_pub is not None:
            self.experience_image_pub.publish(experience, local=False)
        self.sequence += 1
        lane.obs = step.obs
        lane.count += 1
        self.step_count += 1
        self.total_env_steps += len(lane.env_ids)
        if step.episodes:
            self.total_episodes += len(step.episodes)
            self.episodes_pub.publish(Episodes(
                self.robot_id, [int(lane.env_ids[e.env_index]) for e in step.episodes],
                [e.episode_return for e in step.episodes], [e.length for e in step.episodes],
                [bool(e.is_success) for e in step.episodes], self.total_episodes,
                self.total_env_steps, self.policy_version, time.time_ns()))

    # --- the ros2_control boundary (rl_nodes.robot_boundary calls these) -------------------

    def _on_boundary_actions(self, msg: Actions) -> None:
        assert self.boundary is not None
        if msg.robot_id != self.robot_id or msg.step != self.boundary.observation_step - 1:
            return  # an answer to an older observation or another robot's
        shape = (1, *self.boundary.task.action_space.shape)
        if msg.actions.shape != shape:
            self.reject("actions", f"expected actions of shape {shape}, got shape "
                        f"{msg.actions.shape}")
            return
        self.policy_version = msg.policy_version
        if self.total_env_steps < self.config.random_steps:
            actions = self._rng.uniform(-1.0, 1.0, shape[1:])
        else:
            actions = msg.actions[0]
        self.boundary.on_action(actions)

    def publish_boundary_observation(self, obs: np.ndarray, step: int) -> None:
        self.observations_pub.publish(Observations(self.robot_id, step, obs[None].astype(
            np.float32), self.get_clock().now().nanoseconds))

    def publish_boundary_transition(self, transition: Any) -> None:
        experience = Experience(
            self.robot_id, transition.obs[None].astype(np.float32), transition.action[None],
            np.asarray([transition.reward], dtype=np.float32),
            transition.next_obs[None].astype(np.float32), np.asarray([transition.terminated]),
            np.asarray([transition.truncated]), self.policy_version,
            self.get_clock().now().nanoseconds, self.env_ids, self.stream, self.sequence)
        self.experience_pub.publish(experience)
        self.sequence += 1
        self.step_count += 1
        self.total_env_steps += 1

    def publish_boundary_episode(self, episode: Any) -> None:
        self.total_episodes += 1
        self.episodes_pub.publish(Episodes(
            self.robot_id, [0], [episode.episode_return], [episode.length],
            [bool(episode.success)], self.total_episodes, self.total_env_steps,
            self.policy_version, self.get_clock().now().nanoseconds))

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        """Follow the rate limiter: hold stepping while acting is paused, resume after."""
        change = self.gate.on_status(bool(msg.rate_limited), bool(msg.acting_paused),
                                     time.monotonic())
        if change.heard_again:
            self.get_logger().info("the replay buffer reports again; acting follows its rate "
                                   "limiter")
        if not change.resumed:
            return
        if self.boundary is not None:
            self.boundary.resume()
        for lane in self.lanes:
            if lane.held:
                self._publish_observations(lane)

    def close(self) -> None:
        # What this run published: a retired robot (SIGINT) can be checked against what the
        # replay buffer received (tests/integration/test_retire_flush.py).
        self.get_logger().info(f"closing: {self.sequence} experience messages "
                               f"({self.total_env_steps} env steps) published in stream "
                               f"{self.stream}")
        for lane in self.lanes:
            lane.envs.close()
        if self.boundary is not None:
            self.boundary.close()


def main() -> int:
    return main_for("simulator")


if __name__ == "__main__":
    raise SystemExit(main())
