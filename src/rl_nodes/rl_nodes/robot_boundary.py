"""The simulator node's endpoints towards a ros2_control robot (``robot_interface: ros2_control``).

ROS wiring around :class:`rl_core.robot.driver.RobotDriver` (which runs
:class:`rl_core.robot.boundary.RobotLoop`): joint states in (``<namespace>/joint_states``,
joint_state_broadcaster's), commands out (``<controller>/commands``, ``std_msgs/Float64MultiArray``,
or ``<controller>/joint_trajectory``; a gripper's on ``<gripper controller>/commands``), the e-stop
(``<namespace>/estop``, ``std_msgs/Bool``; its signed release on ``estop/release`` and its
state on ``estop/state``: rl_core.robot.estop), an operator's verdict (``operator_success``,
``std_msgs/Bool``) and the reset service. The e-stop and the deadlines run on a thread of their
own, on a steady clock, so they hold the robot when the dispatch thread or simulated time stops.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from rl_core.acting.stepping import check_actions
from rl_core.config import BoundaryConfig, ConfigError
from rl_core.robot import JointTarget, estop
from rl_core.robot.boundary import EpisodeEnd, Transition
from rl_core.robot.driver import RobotDriver
from rl_core.robot.joint_io import StateSource
from rl_core.robot.task import Task
from rl_nodes import graph
from rl_nodes.estop_listener import EStopListener
from rl_nodes.messages import Actions, Observations, command_message, plain
from rl_nodes.ports import BoundaryHost


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a method of RobotBoundary under its lock: the e-stop thread and the dispatch thread
    both drive the robot and send commands."""

    @functools.wraps(method)
    def locked(self: RobotBoundary, *args: Any) -> Any:
        with self._lock:
            return method(self, *args)

    return locked


class RobotBoundary:
    """One robot behind ros2_control's topics, driven for ``node`` (a simulator node); the
    driver's host (:class:`rl_core.robot.driver.DriverHost`).

    :param node: the simulator node; its publishers carry observations, experience, episodes.
    :param task: the task (rl_core.robot.tasks.load_task of the node's env_id).
    :param config: the node's boundary parameters.
    :param seed: the robot's seed (start states and goals).
    """

    def __init__(self, node: BoundaryHost, task: Task, config: BoundaryConfig, seed: int) -> None:
        self.node = node
        self.task = task
        namespace = node.get_namespace()
        self.estop_pub = node.create_publisher(String, graph.ESTOP_STATE.name,
                                               graph.ESTOP_STATE.qos.profile())
        self.driver = RobotDriver(
            task, config, seed, self,
            release=estop.ReleaseCheck(namespace, node.public_key, node.config.allow_unsigned),
            latch=estop.EStopLatch.for_robot(config.estop_dir, namespace))
        self.interface = self.driver.interface
        self.controller = config.controller or f"{self.interface}_controller"
        topic = graph.command_topic(self.controller, config.command_topic)
        message_type = Float64MultiArray if config.command_topic == "commands" else JointTrajectory
        self.command_pub = node.publisher(topic, plain(message_type))
        self.gripper_pub = None if task.gripper is None else node.publisher(
            graph.command_topic(task.gripper.controller), plain(Float64MultiArray))
        joint_states = node.subscription(graph.ROBOT_JOINT_STATES, self._on_joint_state,
                                         with_sender=True)
        self.source = StateSource(lambda: self._publishers(joint_states.topic_name))
        self._lock = threading.RLock()
        #: The newest observation published (what the next action answers).
        self.observation: np.ndarray | None = None
        # The command deadlines on the e-stop's thread, not the dispatch thread they guard (a
        # gradient step or the run's final checkpoint there must not leave a command standing):
        # it sees each joint state too, and checks four times a control period.
        self._estop = EStopListener(node, self._on_estop, self._on_release,
                                    (self.driver.deadline_tick, self._check_deadline))
        self._estop.node.create_subscription(JointState, joint_states.topic_name,
                                             self._seen_state,
                                             graph.ROBOT_JOINT_STATES.qos.profile())
        if config.operator_success:
            node.create_subscription(Bool, graph.OPERATOR_SUCCESS.name,
                                     self._on_operator_success, 10)
        from rl_interfaces.srv import ResetRobot

        self._reset_type = ResetRobot
        self.reset_client = (node.create_client(ResetRobot, config.reset_service)
                             if config.reset == "service" else None)

    @classmethod
    def for_simulator(cls, node: BoundaryHost, seed: int) -> RobotBoundary:
        """The boundary of a simulator node whose ``robot_interface`` is ros2_control: its
        ``env_id`` names the task."""
        from rl_core.robot.tasks import load_task

        config = node.config
        try:
            task = load_task(config.env_id)
        except ValueError as error:
            raise ConfigError(f"robot_interface ros2_control needs a task: {error}") from error
        if config.num_envs != 1 or config.pipeline:
            node.get_logger().warn("robot_interface ros2_control drives one robot: num_envs and "
                                   "pipeline are ignored")
        boundary = cls(node, task, node.boundary_config, seed)
        node.get_logger().info(
            f"robot {node.robot_id}: task {type(task).__name__} ({config.env_id}) through "
            f"ros2_control: joint_states in, {boundary.controller}/"
            f"{boundary.config.command_topic} out ({boundary.interface}), seed {seed}")
        return boundary

    @property
    def config(self) -> BoundaryConfig:
        return self.driver.config

    @config.setter
    def config(self, config: BoundaryConfig) -> None:
        self.driver.config = config  # the node's parameters changed

    @property
    def observation_step(self) -> int:
        """The step number of the next observation (an action answers the one before)."""
        return self.driver.observation_step

    def close(self) -> None:
        """Hold the robot (acting ends with the process) and keep the e-stop's state."""
        with self._lock:
            self.driver.close()
        self._estop.close()

    # --- callbacks: each hands its input to the driver, under the lock ---------------------

    @_locked
    def start(self) -> None:
        self.driver.start()

    @_locked
    def _on_joint_state(self, msg: JointState, sender: bytes | None) -> None:
        refusal = self.source.refusal(sender[:graph.GUID_BYTES] if sender else None)
        if refusal is not None:
            self.node.reject("joint states", refusal)
            return
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.driver.on_joint_state(stamp, msg.name, msg.position, msg.velocity, msg.effort,
                                   self.node.get_clock().now().nanoseconds * 1e-9)

    def _publishers(self, topic: str) -> list[bytes]:
        """The GIDs of ``topic``'s publishers now."""
        return [bytes(info.endpoint_gid)[:graph.GUID_BYTES]
                for info in self.node.get_publishers_info_by_topic(topic)]

    def on_actions(self, msg: Actions) -> None:
        """The policy's answer (a batch of one) to an observation of this robot."""
        if msg.step != self.observation_step - 1:
            return  # an answer to an older observation
        try:
            check_actions(msg.actions, (1, *self.task.action_row_shape), self.task.choices)
        except ValueError as error:
            self.node.reject("actions", str(error))
            return
        self._on_action(*self.node.stepper.boundary_actions(
            msg.actions, msg.policy_version, self.observation, self.task.choices))

    @_locked
    def _on_action(self, action: np.ndarray, intervened: bool) -> None:
        self.driver.on_action(action, intervened)

    @_locked
    def _on_operator_success(self, msg: Bool) -> None:
        self.driver.on_operator_success(bool(msg.data))

    def _seen_state(self, msg: JointState, info: dict[str, Any]) -> None:
        """On the e-stop thread: the robot's state, before the dispatch thread may get to it
        (no lock: two fields are set, and the deadline check that reads them takes it)."""
        gid = info.get("publisher_gid") if info else None
        if self.source.may_be(bytes(gid["data"])[:graph.GUID_BYTES] if gid else None):
                self.driver.state_seen(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)

    @_locked
    def _on_estop(self, engaged: bool) -> None:
        """On the e-stop thread: hold at once; a release resumes on the dispatch thread."""
        if self.driver.on_estop(engaged):
            self._post(self.resume)

    @_locked
    def _on_release(self, text: str) -> None:
        """On the e-stop thread: a signed release resumes acting on the dispatch thread."""
        if self.driver.release(text):
            self._post(self.resume)

    @_locked
    def stop_acting(self) -> None:
        """Acting pauses or ends (the learner's pause, the run's end): hold the robot now."""
        self.driver.stop_acting()

    @_locked
    def resume(self) -> None:
        """Acting may go on (pause over, e-stop released): observe the newest state."""
        self.driver.resume()

    @_locked
    def _on_reset(self, future: Any) -> None:
        self.driver.reset_answered(future)

    @_locked
    def _check_deadline(self) -> None:
        self.driver.check_deadline()

    # --- the driver's host ---------------------------------------------------------------------

    def send(self, command: np.ndarray) -> None:
        self.command_pub.publish(command_message(
            command, self.config.command_topic, self.driver.command_joints, self.interface,
            self.driver.period, self.node.get_clock().now().to_msg()))

    def send_gripper(self, command: np.ndarray) -> None:
        assert self.gripper_pub is not None
        self.gripper_pub.publish(Float64MultiArray(data=[float(v) for v in command]))

    def request_reset(self, target: JointTarget) -> Any:
        if self.reset_client is None or not self.reset_client.service_is_ready():
            return None  # the driver asks again once the service is there
        request = self._reset_type.Request()
        request.name = list(self.driver.robot_joints)
        request.position = [float(v) for v in target.position]
        request.velocity = [float(v) for v in target.velocity]
        future = self.reset_client.call_async(request)
        future.add_done_callback(lambda done: self._post(self._on_reset, done))
        return future

    def _post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the dispatch thread (dropped once the node is unloaded)."""
        self.node.ipc.post_for(self.node, function, *args)

    def _stamp_ns(self) -> int:
        return self.node.get_clock().now().nanoseconds

    # Publishing may block (a reliable writer whose reader died): it is posted to run after the
    # callback, outside the lock, so that the e-stop's thread never waits for it.

    def publish_observation(self, obs: np.ndarray, step: int) -> None:
        self.observation = obs
        # (send_observations: the simulator steps only with an answer to this observation)
        self._post(self.node.send_observations, Observations(
            self.node.robot_id, step, obs[None].astype(np.float32), self._stamp_ns()))

    def publish_transition(self, transition: Transition) -> None:
        self._post(self.node.publish_experience,
                   self.node.stepper.boundary_transition(transition, self._stamp_ns()))

    def publish_episode(self, episode: EpisodeEnd) -> None:
        self._post(self.node.publish_experience, None,
                   self.node.stepper.boundary_episode(episode, self._stamp_ns()))

    def acting_paused(self) -> bool:
        return self.node.acting_paused

    def reject(self, what: str, reason: str) -> None:
        self.node.reject(what, reason)

    def warn(self, text: str) -> None:
        self.node.get_logger().warning(text)

    def info(self, text: str) -> None:
        self.node.get_logger().info(text)

    def publish_estop(self, engaged: bool, challenge: str, reason: str) -> None:
        self.estop_pub.publish(String(data=estop.state_text(engaged, challenge, reason)))

    # --- reporting ----------------------------------------------------------------------------

    def diagnose(self, values: dict[str, object]) -> str | None:
        """Add the boundary's figures to ``values``; a warning message, or ``None``."""
        driver = self.driver
        latency = driver.stats.latency_percentiles()
        values.update({
            "robot interface": f"ros2_control ({self.controller}/{self.config.command_topic}, "
                               f"{self.interface})",
            graph.CONTROL_RATE_KEY: f"{driver.stats.rate_hz:.1f}",
            "target control rate hz": f"{1.0 / driver.period:.1f}",
            graph.LATENCY_P50_KEY: f"{1e3 * latency[0]:.2f}",
            graph.LATENCY_P99_KEY: f"{1e3 * latency[1]:.2f}",
            "phase": driver.loop.phase, "e-stop": driver.loop.estopped,
            "joint states from other publishers": self.source.refused,
            **{f"{graph.SAFETY_KEY_PREFIX}{kind}": count
               for kind, count in driver.interventions.items()},
        })
        return driver.warning(self.node.get_namespace())


__all__ = ["RobotBoundary"]
