"""Simulator node: one robot's vectorised pybullet environments (or a ros2_control robot).

Publishes an observation batch, waits for the action batch answering it, steps the environments,
publishes the transitions to ``/experience`` and the finished episodes to ``/episodes``, then the
next observation batch; a watchdog republishes observations left unanswered. Lanes, counts,
random first steps and n-step returns are rl_core.acting.stepping's; when acting pauses (the
replay buffer's rate limiter, or its silence) is rl_core.acting.gate's: a lane that finishes a
step while acting is paused holds its next observations until it resumes. Images cross DDS as
simulator_images says; payload bytes sent over DDS are counted on ``/diagnostics``.
"""
from __future__ import annotations

import time

import numpy as np

from rl_core.acting import stepping
from rl_core.acting.gate import ActingGate, Pacer
from rl_core.acting.stepping import Lane
from rl_core.acting.teleop import ScriptedIntervention
from rl_core.config import BoundaryConfig, SimulatorConfig
from rl_core.envs import VectorEnv
from rl_core.security.action_auth import ActionCheck, published_digests
from rl_core.security.signed_status import StatusCheck
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import OK, WARN, RLNode, load_action_keys, load_public_key, robot_id_from_namespace
from rl_nodes.messages import Actions, Episodes, Experience, Observations
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.robot_boundary import RobotBoundary
from rl_nodes.runtime import main_for
from rl_nodes.rviz_display import RvizDisplay
from rl_nodes.simulator_images import SimulatorImages
from rl_nodes.teleop_input import TeleopInput

RESEND_AFTER_S = 1.0  # watchdog: republish observations unanswered for this long
#: With the rate limiter on, acting pauses when no /replay_status came for this long: twice the
#: longest interval between statuses that the graph accepts.
STATUS_SILENCE_S = 2.0 / graph.REPLAY_STATUS.rate_hz[0]


class SimulatorNode(RLNode):
    """Steps ``num_envs`` environments of ``env_id`` for robot ``/robot_k``."""

    NAME = "simulator"

    def build(self) -> None:
        self.config = declare_config(self, SimulatorConfig)
        self.boundary_config = declare_config(self, BoundaryConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        watch_config(self, lambda: self.boundary_config, self._apply_boundary_config)
        self.robot_id = robot_id_from_namespace(self.get_namespace())
        seed = stepping.simulator_seed(self.config.seed, self.robot_id)
        self.boundary: RobotBoundary | None = None
        self.display: RvizDisplay | None = None
        ros2_control = self.boundary_config.robot_interface == "ros2_control"
        if self.config.pipeline and self.config.num_envs < 2 and not ros2_control:
            self.get_logger().warn("pipeline needs num_envs >= 2; stepping all environments as "
                                   "one batch")
        self.stepper = stepping.Stepper([] if ros2_control else stepping.make_lanes(
            self.config.env_id, self.config.num_envs, self.config.pipeline, seed),
            self.config.random_steps, np.random.default_rng(seed), self.robot_id,
            stream=time.time_ns(),  # this run of the simulator; a respawn starts a newer one
            n_step=self.config.n_step, gamma=self.config.gamma)
        self.gate = ActingGate(STATUS_SILENCE_S, self.config.await_replay_status,
                               time.monotonic())
        self.public_key = load_public_key(self.get_logger(), self.config.allow_unsigned)
        self.status_check = StatusCheck(self.public_key, self.config.allow_unsigned)
        # Only the robot's own policy (or a central one serving it) can make the actions' MAC,
        # and only for the observations this node published (send_observations).
        self.action_check = ActionCheck(load_action_keys(self.get_logger(),
                                                         self.config.allow_unsigned),
                                        self.config.allow_unsigned)
        self.pacer = Pacer(self.config.max_rate_hz)
        self.rate = stepping.RateMeter(time.monotonic())
        self.observations_pub = self.publisher(graph.OBSERVATIONS)
        self.experience_pub = self.publisher(graph.EXPERIENCE)
        self.episodes_pub = self.publisher(graph.EPISODES)
        self.subscription(graph.ACTIONS, self._on_actions)
        self.subscription(graph.REPLAY_STATUS, self._on_replay_status)
        self.timer(RESEND_AFTER_S / 2, self._watchdog)
        self.images = SimulatorImages(
            self, None if ros2_control else self.envs.single_observation_space.shape,
            self.config, self._release_held)
        if ros2_control:
            self.boundary = RobotBoundary.for_simulator(self, seed)
            self._take_teleop(self.boundary.task.action_row_shape, 1, seed, self.boundary.task.choices)
            return
        self._take_teleop(self.envs.action_shape, self.config.num_envs, seed, self.envs.choices)
        self.display = RvizDisplay.of(self, self.envs.envs[0].unwrapped, self.robot_id,
                                      self.config.visualization_rate_hz)
        lanes = len(self.stepper.lanes)
        self.get_logger().info(
            f"robot {self.robot_id}: {self.config.num_envs} x {self.config.env_id}, seed {seed}, "
            f"{lanes} lane{'s' if lanes > 1 else ''}")

    def _take_teleop(self, action_shape: tuple[int, ...], envs: int, seed: int, choices: int) -> None:
        """With ``teleop``, an operator's commands drive instead of the policy's while they
        count (rl_nodes.teleop_input; a gripper's ``choices`` on buttons); with
        ``expert_interventions``, the task's scripted expert takes over some episodes."""
        if self.config.teleop:
            self.stepper.intervention = TeleopInput(self, int(np.prod(action_shape)), choices).intervention
        elif self.config.expert_interventions:
            expert = ScriptedIntervention.for_task(
                self.config.env_id, int(np.prod(action_shape)), envs,
                self.config.expert_interventions, self.config.expert_interventions_steps, seed)
            self.stepper.intervention = expert
            self.get_logger().info(expert.describe(self.config.env_id))

    @property
    def acting_paused(self) -> bool:
        """The rate limiter holds acting, or the node is deactivated (lifecycle)."""
        return self.gate.paused or not self.active

    @property
    def replay_silent(self) -> bool:
        """Acting paused because the replay buffer fell silent."""
        return self.gate.silent

    @property
    def total_env_steps(self) -> int:
        return self.stepper.total_env_steps

    @property
    def step_count(self) -> int:
        return self.stepper.step_count

    @property
    def policy_version(self) -> int:
        return self.stepper.policy_version

    @property
    def envs(self) -> VectorEnv:
        """The first lane's environments (all of them without pipelining)."""
        return self.stepper.lanes[0].envs

    def dds_bytes(self) -> dict[str, int]:
        """Payload bytes this simulator sent over DDS: on the acting path (observations and
        their images), with the experience (batches, images, episode statistics) and in all."""
        # (an image publisher is None for state tasks, and the observations' one for latent)
        acting = [self.observations_pub, self.images.observations_pub]
        experience = [self.experience_pub, self.images.experience_pub, self.episodes_pub]
        counts = {name: sum(publisher.dds_bytes for publisher in publishers if publisher)
                  for name, publishers in (("acting", acting), ("experience", experience))}
        return {**counts, "all": counts["acting"] + counts["experience"]}

    def _apply_boundary_config(self, config: BoundaryConfig) -> None:
        self.boundary_config = config
        if self.boundary is not None:
            self.boundary.config = config

    def _apply_config(self, config: SimulatorConfig) -> None:
        rate_changed = config.visualization_rate_hz != self.config.visualization_rate_hz
        self.config = config
        self.pacer.rate_hz = config.max_rate_hz
        self.stepper.random_steps = config.random_steps
        if rate_changed and self.display is not None:
            self.display.set_rate(config.visualization_rate_hz)

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        now = time.monotonic()
        steps_per_second = self.rate.update(now, self.total_env_steps)
        values = stepping.acting_values(self.stepper, self.gate, steps_per_second,
                                        self.dds_bytes(), now)
        warning = self.boundary.diagnose(values) if self.boundary is not None else None
        if self.images.pixels:
            values["observation codec"] = self.images.codec
        if self.stepper.intervention is not None:
            values[graph.INTERVENTION_RATE_KEY] = f"{self.stepper.intervention.rate:.3f}"
        if warning is None and self.images.waiting_for_encoder:
            warning = "latent observations: waiting for the trainer's encoder weights"
        target = self.config.max_rate_hz * self.config.num_envs if self.boundary is None else 0.0
        warn, message = stepping.acting_diagnosis(
            self.gate, self.stepper.waiting(now, RESEND_AFTER_S), steps_per_second, target, now,
            warning)
        return (WARN if warn else OK), message, values

    def begin(self) -> None:
        if self.boundary is not None:
            self.boundary.start()
        for lane in self.stepper.lanes:
            lane.held = True
        self._release_held()

    # --- stepping -------------------------------------------------------------------------------

    def _publish_observations(self, lane: Lane) -> None:
        obs = self.images.observations(lane.obs, self.observations_pub.has_remote_subscribers())
        if obs is None:
            lane.held = True  # until the trainer's first weights bring the encoder
            return
        lane.held = False
        lane.sent_at = time.monotonic()
        self.send_observations(Observations(self.robot_id, self.stepper.batch_step(lane), obs,
                                            time.time_ns()))

    def send_observations(self, data: Observations) -> None:
        """Publish an observation batch (and its images), and expect answers to it alone: the
        action check remembers the digests a receiver may compute of what it gets (the values,
        or the encoded image that crossed DDS; rl_core.security.action_auth)."""
        self.observations_pub.publish(data)
        payload = self.images.publish_observations(data)
        self.action_check.expect(self.robot_id, data.step, published_digests(
            data, payload, bool(self.observations_pub.entry.subscriptions)))

    def _watchdog(self) -> None:
        now = time.monotonic()
        if self.gate.on_tick(now):
            self.pause()  # the learner is lost
            self.get_logger().warning(
                f"no /replay_status for {self.gate.silent_for(now):.1f} s: the replay buffer is "
                "unreachable, and experience sent now would be lost; acting paused until it "
                "reports again (check the learner host and the network)")
        for lane in self.stepper.unanswered(now, RESEND_AFTER_S):
            self._publish_observations(lane)

    def _on_actions(self, msg: Actions) -> None:
        if msg.robot_id != self.robot_id:
            return  # another robot's
        if not self.actions_authentic(msg, self.action_check):
            return
        if self.boundary is not None:
            self.boundary.on_actions(msg)
            return
        lane = self.stepper.lane_for(msg.step)
        if lane is None:
            return  # an answer to a republished batch: already handled
        # Values from the network were checked finite when decoded (rl_nodes.messages).
        try:
            stepping.check_actions(msg.actions, self.stepper.actions_shape(lane), lane.envs.choices)
        except ValueError as error:
            self.reject("actions", f"{error}; republishing the observations")
            self._publish_observations(lane)
            return
        self.pacer.wait()
        self.publish_experience(*self.stepper.step(lane, msg.actions, msg.policy_version, time.time_ns()))
        if self.acting_paused:
            lane.held = True
        else:
            self._publish_observations(lane)

    def publish_experience(self, experience: Experience | None,
                           episodes: Episodes | None = None) -> None:
        """Publish a step's experience and the episodes that ended in it."""
        if experience is not None:
            self.experience_pub.publish(experience)
            self.images.publish_experience(experience)
        if episodes is not None:
            self.episodes_pub.publish(episodes)

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        """Follow the rate limiter: hold stepping while acting is paused, resume after; only the
        learner's signed, newer statuses count."""
        if not self.status_obeyed(msg, self.status_check):
            return
        change = self.gate.on_status(bool(msg.rate_limited), bool(msg.acting_paused),
                                     time.monotonic(), bool(msg.done))
        for line in change.lines(msg.total_env_steps, bool(msg.rate_limited)):
            self.get_logger().info(line)
        if change.resumed:
            self.resume()
        elif self.acting_paused:
            self.pause()  # the rate limiter's pause or the run's end

    def pause(self) -> None:
        """Acting stops (deactivated, paused, the run's end, no buffer): a robot is held now."""
        if self.boundary is not None:
            self.boundary.stop_acting()

    def resume(self) -> None:
        """Acting goes on (the rate limiter or a lifecycle activation): send what was held."""
        if self.boundary is not None:
            self.boundary.resume()
        self._release_held()

    def _release_held(self) -> None:
        """Send the observations the lanes hold, unless acting is paused."""
        if not self.acting_paused:
            for lane in self.stepper.held():
                self._publish_observations(lane)

    def close(self) -> None:
        # What this run published: a retired robot (SIGINT) can be checked against what the
        # replay buffer received (tests/integration/test_retire_flush.py).
        self.get_logger().info(f"closing: {self.stepper.sequence} experience messages "
                               f"({self.total_env_steps} env steps) published in stream "
                               f"{self.stepper.stream}")
        self.pacer.close()
        for lane in self.stepper.lanes:
            lane.envs.close()
        if self.boundary is not None:
            self.boundary.close()


def main() -> int:
    return main_for("simulator")


if __name__ == "__main__":
    raise SystemExit(main())
