"""The simulator node's endpoints towards a ros2_control robot (``robot_interface: ros2_control``).

ROS wiring around :class:`rl_core.robot.boundary.RobotLoop`: joint states in
(``<namespace>/joint_states``, joint_state_broadcaster's), commands out
(``<namespace>/<controller>/commands`` as ``std_msgs/Float64MultiArray`` for a forward command
controller, or ``<namespace>/<controller>/joint_trajectory`` for joint_trajectory_controller),
the e-stop (``<namespace>/estop``, ``std_msgs/Bool``) and the robot's reset service. The command
deadline runs on a steady-clock timer, so it keeps watching when simulated time stops.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rl_core.config import BoundaryConfig, ConfigError
from rl_core.robot import JointSample
from rl_core.robot.boundary import RobotLoop
from rl_core.robot.joint_io import ControlStats, JointStateError, JointStateReader, command_limits
from rl_core.robot.safety import SafetyLayer
from rl_core.robot.task import Task
from rl_nodes import graph
from rl_nodes.conversions import plain

if TYPE_CHECKING:
    from rl_nodes.simulator import SimulatorNode

#: Scheduling niceness of the e-stop thread (lower runs first; needs root, else unchanged).
ESTOP_NICENESS = -10
#: A reset service call unanswered this long is made again (the robot may have restarted).
RESET_TIMEOUT_S = 5.0
#: A robot whose clock (joint state stamps) has not moved for this long while the boundary
#: waits for it is reported on /diagnostics.
FROZEN_CLOCK_S = 2.0


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a method of RobotBoundary under its lock: the e-stop thread and the dispatch thread
    both drive the loop and send commands."""

    @functools.wraps(method)
    def locked(self: RobotBoundary, *args: Any) -> Any:
        with self._lock:
            return method(self, *args)

    return locked


class RobotBoundary:
    """One robot behind ros2_control's topics, driven for ``node`` (a simulator node).

    :param node: the simulator node; its publishers carry observations, experience, episodes.
    :param task: the task (rl_core.robot.tasks.load_task of the node's env_id).
    :param config: the node's boundary parameters.
    :param seed: the robot's seed (start states and goals).
    """

    def __init__(self, node: SimulatorNode, task: Task, config: BoundaryConfig, seed: int) -> None:
        self.node = node
        self.task = task
        self.config = config
        self.interface = config.command_interface or task.command_interface
        if self.interface != task.command_interface:
            raise ConfigError(f"task {type(task).__name__} acts through the "
                              f"{task.command_interface} interface, command_interface is "
                              f"{self.interface!r}; a task's actions mean one interface")
        self.robot_joints = config.joint_names(task.joint_names)
        to_robot = dict(zip(task.joint_names, self.robot_joints))
        self.command_joints = [to_robot[name] for name in task.commanded]
        self.period = 1.0 / config.control_rate_hz if config.control_rate_hz else task.control_period
        scale = (np.full(len(task.commanded), config.action_scale) if config.action_scale
                 else np.asarray(task.action_scale, dtype=np.float64))
        task_limits = command_limits(task)
        indices = np.asarray([task.joint_names.index(name) for name in task.commanded])
        self.safety = SafetyLayer(self.interface, task_limits, indices, self.period,
                                  config.max_command_change * scale,
                                  task.end_effector if task.workspace else None, task.workspace)
        self.loop = RobotLoop(task, self.safety, np.random.default_rng(seed), config.reset,
                              action_scale=scale)
        self.controller = config.controller or f"{self.interface}_controller"
        topic = graph.command_topic(self.controller, config.command_topic)
        message_type = Float64MultiArray if config.command_topic == "commands" else JointTrajectory
        self.command_pub = node.zc_publisher(plain(message_type), topic)
        node.zc_subscription(plain(JointState), graph.ROBOT_JOINT_STATES, self._on_joint_state)
        self._lock = threading.RLock()
        self._estop_executor = self._start_estop_listener()
        from rl_interfaces.srv import ResetRobot

        self._reset_type = ResetRobot
        self.reset_client = (node.create_client(ResetRobot, config.reset_service)
                             if config.reset == "service" else None)
        self._reset_pending: Any = None
        self._reset_asked_at = 0.0
        # Steady clock: the command deadline must hold when simulated time stops.
        self._timer = node.create_timer(min(self.period, 0.05), self._tick,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._last_command_at = time.monotonic()
        self._observed_at = 0.0  # when the state of the observation in flight was received
        self._last_state_at: float | None = None
        self._last_stamp_change_at = time.monotonic()
        self._last_stamp = -1.0
        self.stats = ControlStats(self.period)
        self.reader = JointStateReader(self.robot_joints)
        self.observation_step = 0
        self._started = False
        self._pending_transition: Any = None  # published once the next command is out
        self._withheld = False  # an observation held back while acting is paused
        self._held_for_pause = False

    def _start_estop_listener(self) -> SingleThreadedExecutor:
        """The e-stop is taken by a node of its own, ``<simulator>_estop``, spun on a thread of
        its own: in one process with the learner, the dispatch thread may be inside a gradient
        step, and the hold must go out within one control period all the same."""
        node = self.node
        self._estop_node = rclpy.create_node(f"{node.get_name()}_estop",
                                             namespace=node.get_namespace(),
                                             context=node.context)
        self._estop_node.create_subscription(Bool, graph.ESTOP.name, self._on_estop,
                                             graph.ESTOP.qos.profile())
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(self._estop_node)

        def spin() -> None:
            try:
                # Ahead of the process' other threads when the cores are busy (root only; a
                # robot computer runs its control stack so). Idle unless an e-stop comes.
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ESTOP_NICENESS)
            except OSError:
                pass
            try:
                executor.spin()
            except (ExternalShutdownException, RuntimeError):
                pass  # the process is shutting down

        threading.Thread(target=spin, name="estop", daemon=True).start()
        return executor

    def close(self) -> None:
        self._estop_executor.shutdown(timeout_sec=1.0)
        self._estop_node.destroy_node()

    # --- start and episodes ------------------------------------------------------------------

    @_locked
    def start(self) -> None:
        self._started = True
        self._begin_episode()

    def _begin_episode(self) -> None:
        target = self.loop.begin_episode()
        if self.reset_client is None:
            return  # homing: driven by the joint states that come
        if not self.reset_client.service_is_ready():
            self._reset_pending = "waiting"  # the tick asks again once the service is there
            return
        request = self._reset_type.Request()
        request.name = list(self.robot_joints)
        request.position = [float(v) for v in target.position]
        request.velocity = [float(v) for v in target.velocity]
        self._reset_asked_at = time.monotonic()
        future = self.reset_client.call_async(request)
        self._reset_pending = future
        future.add_done_callback(lambda done: self.node.ipc.post(self._on_reset, done))

    @_locked
    def _on_reset(self, future: Any) -> None:
        if future is not self._reset_pending:
            return
        self._reset_pending = None
        response = future.result()
        if response is None or not response.success:
            reason = getattr(response, "message", "no answer")
            self.node.reject("robot reset", f"{self.config.reset_service} refused: {reason}; "
                             "asking again")
            self._begin_episode()
            return
        self._publish_observation(self.loop.reset_done())

    # --- inputs -------------------------------------------------------------------------------

    def _sample(self, msg: JointState) -> JointSample | None:
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        try:
            return self.reader.read(stamp, msg.name, msg.position, msg.velocity, msg.effort)
        except JointStateError as error:
            self.node.reject("joint states", str(error))
            return None

    @_locked
    def _on_joint_state(self, msg: JointState) -> None:
        sample = self._sample(msg)
        if sample is None or not self._started:
            return
        now = time.monotonic()
        self._last_state_at = now
        if sample.stamp < self._last_stamp and self.loop.phase != "resetting":
            self.node.get_logger().warning(
                f"the robot's clock went back ({self._last_stamp:.3f} -> {sample.stamp:.3f} s: "
                "restarted?); the episode in progress ends here, a new one begins")
            self._flush_transition()
            self._begin_episode()
        if sample.stamp != self._last_stamp:
            self._last_stamp, self._last_stamp_change_at = sample.stamp, now
        obs, transition, episode = self.loop.on_state(sample)
        self._flush_transition()
        self._pending_transition = transition
        if episode is not None:
            self._flush_transition()
            self.node.publish_boundary_episode(episode)
            self._begin_episode()
        elif (self.loop.phase == "resetting" and self.reset_client is None
              and not self.loop.estopped):
            self._home()
        self._publish_observation(obs, now)
        if self.loop.phase != "acting":
            self._flush_transition()

    def _flush_transition(self) -> None:
        """Publish the transition held back until the command for the next state went out: in
        one process the learner's work on it would otherwise delay that command."""
        if self._pending_transition is not None:
            transition, self._pending_transition = self._pending_transition, None
            self.node.publish_boundary_transition(transition)

    def _home(self) -> None:
        command = self.loop.homing_command()
        if command is None:
            self._publish_observation(self.loop.reset_done())
        else:
            self._send(command)

    @_locked
    def on_action(self, action: np.ndarray) -> None:
        command = self.loop.on_action(action)
        if command is None:
            return
        self.stats.answered(time.monotonic() - self._observed_at)
        self._send(command)
        self._flush_transition()

    @_locked
    def _on_estop(self, msg: Bool) -> None:
        """On the e-stop thread: hold at once; a release resumes on the dispatch thread."""
        engaged = bool(msg.data)
        was = self.loop.estopped
        hold = self.loop.set_estop(engaged)
        if hold is not None:
            self._send(hold)
            self._flush_transition()
        if engaged and not was:
            self.node.get_logger().warning("e-stop: robot held, acting paused until released")
        elif was and not engaged:
            self.node.get_logger().info("e-stop released: acting resumes")
            self.node.ipc.post(self.resume)

    # --- outputs ------------------------------------------------------------------------------

    def _publish_observation(self, obs: np.ndarray | None, received_at: float | None = None
                             ) -> None:
        if obs is None:
            return
        if self.node.acting_paused:
            self._withheld = True  # resume() observes again when the pause ends
            self._flush_transition()
            return
        self._observed_at = received_at if received_at is not None else time.monotonic()
        self.node.publish_boundary_observation(obs, self.observation_step)
        self.observation_step += 1
        self._last_command_at = time.monotonic()  # the deadline runs from the observation

    @_locked
    def resume(self) -> None:
        """Acting may go on (pause over, e-stop released): observe the newest state."""
        if self.loop.estopped:
            return
        if self._withheld or self.loop.phase == "acting":
            self.loop.phase = "waiting"
        self._withheld = self._held_for_pause = False
        if self.loop.phase == "resetting" and self.reset_client is None and self.loop.latest:
            self._home()  # homing stopped by the e-stop goes on
            return
        self._publish_observation(self.loop.resume_observation())

    def _send(self, command: np.ndarray) -> None:
        values = [float(v) for v in command]
        if self.config.command_topic == "commands":
            msg: Any = Float64MultiArray(data=values)
        else:
            msg = JointTrajectory(joint_names=list(self.command_joints))
            point = JointTrajectoryPoint()
            seconds = self.period
            point.time_from_start = Duration(sec=int(seconds), nanosec=int(seconds % 1 * 1e9))
            if self.interface == "position":
                point.positions = values
            elif self.interface == "velocity":
                point.velocities = values
            else:
                point.effort = values
            msg.points = [point]
            msg.header.stamp = self.node.get_clock().now().to_msg()
        self.command_pub.publish(msg)
        now = time.monotonic()
        self.stats.command_sent(now)
        self._last_command_at = now

    def _tick(self) -> None:
        self.node.ipc.post(self._check_deadline)

    @_locked
    def _check_deadline(self) -> None:
        now = time.monotonic()
        if self._reset_pending == "waiting":
            self._begin_episode()
        elif (self._reset_pending is not None
              and now - self._reset_asked_at > RESET_TIMEOUT_S):
            self.node.reject("robot reset", f"{self.config.reset_service} did not answer within "
                             f"{RESET_TIMEOUT_S:.0f} s; asking again")
            self._begin_episode()
        if self._withheld:
            # The learner pauses acting: a robot must not go on with its last command meanwhile.
            if not self._held_for_pause and now - self._last_command_at > self.config.command_timeout:
                self._held_for_pause = True
                if self.loop.latest is not None:
                    self._send(self.safety.hold(self.loop.latest))
            return
        if self.loop.estopped or self.loop.latest is None:
            return
        if self.loop.phase == "acting":
            late, what = now - self._last_command_at, "no action"
        elif self.loop.phase in ("stepping", "waiting"):
            # No joint state answered the last command (lost, or the robot restarted): the
            # hold makes a lockstep robot answer with a state, which is observed afresh.
            late = now - max(self._last_command_at, self._last_state_at or 0.0)
            what = "no joint state after the last command"
        else:
            return
        if late > self.config.command_timeout:
            hold = self.loop.timed_out()
            if hold is not None:
                self._send(hold)
                self._flush_transition()
                self.node.get_logger().warning(
                    f"{what} within command_timeout {self.config.command_timeout} s: robot held "
                    "(are the policy and the robot running?)", throttle_duration_sec=5.0)

    # --- reporting ----------------------------------------------------------------------------

    def diagnose(self, values: dict[str, object]) -> str | None:
        """Add the boundary's figures to ``values``; a warning message, or ``None``."""
        now = time.monotonic()
        latency = self.stats.latency_percentiles()
        values.update({
            "robot interface": f"ros2_control ({self.controller}/{self.config.command_topic}, "
                               f"{self.interface})",
            graph.CONTROL_RATE_KEY: f"{self.stats.rate_hz:.1f}",
            "target control rate hz": f"{1.0 / self.period:.1f}",
            graph.LATENCY_P50_KEY: f"{1e3 * latency[0]:.2f}",
            graph.LATENCY_P99_KEY: f"{1e3 * latency[1]:.2f}",
            "phase": self.loop.phase, "e-stop": self.loop.estopped,
            **{f"{graph.SAFETY_KEY_PREFIX}{kind}": count
               for kind, count in self.safety.interventions.items()},
        })
        if self.loop.estopped:
            return "e-stop engaged: robot held, acting paused"
        if self._last_state_at is None:
            return f"no joint_states from the robot yet (is it running in {self.node.get_namespace()}?)"
        if self._reset_pending == "waiting":
            return f"waiting for the robot's reset service {self.config.reset_service}"
        if (self.loop.phase in ("stepping", "waiting")
                and now - self._last_stamp_change_at > FROZEN_CLOCK_S):
            return (f"the robot's clock is frozen: joint_states stamps have not moved for "
                    f"{now - self._last_stamp_change_at:.0f} s")
        return None


__all__ = ["RobotBoundary"]
