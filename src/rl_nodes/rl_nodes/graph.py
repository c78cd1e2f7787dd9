"""The ROS graph of a deployment, in one place: every topic, service, trainer metric and QoS.

Nodes create their endpoints from these names, tools (``rl-bringup doctor``, ``status``) and
tests expect them, and ``docs/graph.md`` is checked against them by one unit test. The module
imports nothing beyond the standard library, :mod:`rl_core.names.node_kinds`, the name rules
of :mod:`rl_core.names.ros_names` and the names of :mod:`rl_core.monitoring.progress`, so tools
and the plan use it without loading rclpy or torch (:meth:`QoS.profile` imports rclpy when it
builds a profile).

Names follow ROS resolution: ``/name`` is absolute, ``name`` lies in the node's namespace (one
per robot, ``/robot_{k}``), ``~/name`` under the node itself (``/replay_buffer/sample``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rl_core.monitoring.progress import TRAINER_SCALARS
from rl_core.names import node_kinds
from rl_core.names.ros_names import in_namespace as in_namespace  # re-exported: the graph's names
from rl_core.names.ros_names import node_name as node_name
from rl_core.names.ros_names import resolve
from rl_core.names.ros_names import robot_namespace as robot_namespace

# --- quality of service -------------------------------------------------------------------------


@dataclass(frozen=True)
class QoS:
    """A reliable KEEP_LAST profile: queue ``depth``; ``latched`` = transient local (a late
    subscriber gets the last message at once), else volatile."""

    depth: int
    latched: bool = False

    def profile(self) -> Any:
        """The ``rclpy.qos.QoSProfile`` (rclpy is imported only here)."""
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.depth,
                          reliability=ReliabilityPolicy.RELIABLE,
                          durability=(DurabilityPolicy.TRANSIENT_LOCAL if self.latched
                                      else DurabilityPolicy.VOLATILE))


#: Bytes of a DDS GUID that name its participant (the process' context): endpoints whose GUIDs
#: share them belong to one process.
GUID_PREFIX_BYTES = 12
#: Bytes of a whole DDS GUID: an rmw GID may be padded past them, compare these only.
GUID_BYTES = 16
#: Stepping traffic (observations, actions) and most topics: a short queue.
STREAM = QoS(10)
#: Experience: acting may run up to the replay's error buffer ahead of a learner process busy with
#: gradient steps; with a short queue the DDS writer would block and transitions would be lost.
DEEP = QoS(1000)
#: Latest-value topics (policy weights, robot description).
LATCHED = QoS(1, latched=True)

# --- nodes -------------------------------------------------------------------------------------

SIMULATOR, POLICY, REPLAY_BUFFER, TRAINER = (node_kinds.SIMULATOR, node_kinds.POLICY,
                                             node_kinds.REPLAY_BUFFER, node_kinds.TRAINER)
#: rl_nodes.gym_bridge's node: a gymnasium learner acting for robots in place of their policy.
GYM_BRIDGE = "gym_bridge"
#: Node kinds that run once per robot, in the robot's namespace.
PER_ROBOT_KINDS = node_kinds.PER_ROBOT_KINDS
#: rl_nodes.sim_robot: a pybullet robot behind ros2_control's topics (robot_interface:
#: ros2_control); a real robot, Gazebo or ros2_control's mock hardware takes its place.
SIM_ROBOT = "sim_robot"

# --- topics ------------------------------------------------------------------------------------

UNBOUNDED_HZ = (0.0, float("inf"))


@dataclass(frozen=True)
class Topic:
    """A topic of the graph.

    :param name: as the nodes create it (see the module docstring for relative names).
    :param type: ``pkg/msg/Type``.
    :param publishers: node kinds that publish it (``"*"``: every node).
    :param subscribers: node kinds that must subscribe to it (others may too).
    :param qos: the publishers' profile.
    :param rate_hz: (min, max) rate a running deployment shows; ``None``: not checked.
    :param stepping: a robot's every step waits on it (its subscribers' idle dispatch thread
        waits on it alone between turns of the whole executor: rl_nodes.dispatch_executor).
    """

    name: str
    type: str
    publishers: tuple[str, ...]
    subscribers: tuple[str, ...] = ()
    qos: QoS = STREAM
    rate_hz: tuple[float, float] | None = None
    stepping: bool = False

    @property
    def per_robot(self) -> bool:
        return not self.name.startswith("/")


OBSERVATIONS = Topic("observations", "rl_interfaces/msg/ObservationBatch", (SIMULATOR,),
                     (POLICY,), rate_hz=UNBOUNDED_HZ, stepping=True)
ACTIONS = Topic("actions", "rl_interfaces/msg/ActionBatch", (POLICY,), (SIMULATOR,),
                rate_hz=UNBOUNDED_HZ, stepping=True)
# The trainer subscribes too when it interleaves updates (colocated).
EXPERIENCE = Topic("/experience", "rl_interfaces/msg/ExperienceBatch", (SIMULATOR,),
                   (REPLAY_BUFFER,), DEEP, UNBOUNDED_HZ)
EPISODES = Topic("/episodes", "rl_interfaces/msg/EpisodeStatistics", (SIMULATOR,), (TRAINER,))
WEIGHTS = Topic("/policy_weights", "rl_interfaces/msg/PolicyWeights", (TRAINER,), (POLICY,),
                LATCHED)
#: The replay buffer publishes every second and at once when acting pauses or resumes, so only
#: the floor of the rate is a contract.
REPLAY_STATUS = Topic("/replay_status", "rl_interfaces/msg/ReplayStatus", (REPLAY_BUFFER,),
                      (SIMULATOR, TRAINER), rate_hz=(0.5, float("inf")))
# For rviz: the URDF, and (built only while someone listens) joint states and markers.
ROBOT_DESCRIPTION = Topic("robot_description", "std_msgs/msg/String", (SIMULATOR,), qos=LATCHED)
JOINT_STATES = Topic("joint_states", "sensor_msgs/msg/JointState", (SIMULATOR,))
MARKERS = Topic("markers", "visualization_msgs/msg/MarkerArray", (SIMULATOR,))
DIAGNOSTICS = Topic("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", ("*",))
DIAGNOSTICS_PERIOD_S = 1.0
#: The DiagnosticStatus name under which ``robots:=auto`` publishes its decisions (from a tool
#: participant in the supervisor process, not from a node of the deployment).
AUTOSCALER_STATUS = "/rl_bringup/autoscaler"
#: TF (rl_core.robot.tf_tree), with tf2's profiles: moving joints on /tf (tf2's dynamic broadcaster:
#: reliable, volatile, depth 100), fixed joints and the robot's base once on /tf_static (its
#: static broadcaster: reliable, transient local, depth 1). Published only where ``tf2_msgs``
#: imports (a full ROS 2 install) and ``publish_tf`` is on; not part of the checked graph.
TF = Topic("/tf", "tf2_msgs/msg/TFMessage", (SIMULATOR,), qos=QoS(100))
TF_STATIC = Topic("/tf_static", "tf2_msgs/msg/TFMessage", (SIMULATOR,), qos=LATCHED)
#: rl_nodes.diagnostics_aggregator (diagnostic_aggregator's aggregator_node in the docker image):
#: /diagnostics grouped for rqt_robot_monitor, and the tree's worst level, with upstream's names
#: and profile (reliable, volatile, depth 1).
DIAGNOSTICS_AGGREGATOR = node_kinds.DIAGNOSTICS_AGGREGATOR
DIAGNOSTICS_AGG = Topic("/diagnostics_agg", "diagnostic_msgs/msg/DiagnosticArray",
                        (DIAGNOSTICS_AGGREGATOR,), qos=QoS(1))
DIAGNOSTICS_TOPLEVEL = Topic("/diagnostics_toplevel_state", "diagnostic_msgs/msg/DiagnosticStatus",
                             (DIAGNOSTICS_AGGREGATOR,), qos=QoS(1))

#: Image side topics (rl_nodes.image_transport, image_transport's naming): a task that observes
#: images sends each observation and experience batch's frames as one image beside the batch,
#: ``<batch topic>/image`` (raw) or ``<batch topic>/image/compressed`` (png, jpeg). Only pixel
#: tasks have them, so the checked graph (:data:`TOPICS`) leaves them out.
RAW_IMAGE_SUFFIX, COMPRESSED_IMAGE_SUFFIX = "image", "image/compressed"


def image_topic(batch: Topic, compressed: bool) -> Topic:
    """The image side topic of ``batch`` (:data:`OBSERVATIONS` or :data:`EXPERIENCE`)."""
    suffix = COMPRESSED_IMAGE_SUFFIX if compressed else RAW_IMAGE_SUFFIX
    kind = "CompressedImage" if compressed else "Image"
    return Topic(f"{batch.name}/{suffix}", f"sensor_msgs/msg/{kind}", batch.publishers,
                 batch.subscribers, batch.qos, batch.rate_hz)


IMAGE_TOPICS: tuple[Topic, ...] = tuple(image_topic(batch, compressed)
                                        for batch in (OBSERVATIONS, EXPERIENCE)
                                        for compressed in (False, True))

#: The trainer publishes each of rl_core.monitoring.progress.TRAINER_SCALARS as ``~/<name>``
#: (``/trainer/<name>``, std_msgs/Float64).
METRIC_TYPE = "std_msgs/msg/Float64"


def metric_topic(metric: str) -> Topic:
    return Topic(f"/{TRAINER}/{metric}", METRIC_TYPE, (TRAINER,))


#: Every topic of the checked graph, in the order of docs/graph.md.
TOPICS: tuple[Topic, ...] = (
    OBSERVATIONS, ACTIONS, EXPERIENCE, EPISODES, WEIGHTS, REPLAY_STATUS, ROBOT_DESCRIPTION,
    JOINT_STATES, MARKERS, DIAGNOSTICS, DIAGNOSTICS_AGG, DIAGNOSTICS_TOPLEVEL,
    *(metric_topic(metric) for metric in TRAINER_SCALARS),
)

# --- the robot boundary (robot_interface: ros2_control) -------------------------------------------
# ros2_control's conventions, in the robot's namespace: joint_state_broadcaster publishes
# ``joint_states`` (JOINT_STATES above, published by the robot instead of the simulator), a
# forward command controller takes ``<controller>/commands``, joint_trajectory_controller
# ``<controller>/joint_trajectory``. QoS: reliable, volatile, depth 10 (rclcpp's system default,
# which the controllers use).

COMMAND_TYPE = "std_msgs/msg/Float64MultiArray"
TRAJECTORY_TYPE = "trajectory_msgs/msg/JointTrajectory"
#: How the boundary sends commands: a forward command controller or joint_trajectory_controller.
COMMAND_TOPIC_KINDS = ("commands", "joint_trajectory")


def command_topic(controller: str, kind: str = "commands") -> Topic:
    """The command topic of ``controller`` (``kind``: one of :data:`COMMAND_TOPIC_KINDS`)."""
    if kind not in COMMAND_TOPIC_KINDS:
        raise ValueError(f"unknown command topic kind {kind!r}; one of "
                         f"{', '.join(COMMAND_TOPIC_KINDS)}")
    return Topic(f"{controller}/{kind}", COMMAND_TYPE if kind == "commands" else TRAJECTORY_TYPE,
                 (SIMULATOR,), (SIM_ROBOT,))


#: A robot's state, as the boundary reads it (joint_state_broadcaster publishes it); each one
#: makes the boundary's next observation.
ROBOT_JOINT_STATES = Topic("joint_states", "sensor_msgs/msg/JointState", (SIM_ROBOT,),
                           (SIMULATOR,), stepping=True)
#: Emergency stop: ``true`` holds the robot within one control period and pauses acting until a
#: signed release comes on :data:`ESTOP_RELEASE` (a plain ``false`` releases nothing).
ESTOP = Topic("estop", "std_msgs/msg/Bool", (), (SIMULATOR,))
#: The e-stop's state (JSON: engaged, the challenge a release must sign, the reason), latched.
ESTOP_STATE = Topic("estop/state", "std_msgs/msg/String", (SIMULATOR,), qos=LATCHED)
#: A release of the e-stop: JSON with the challenge and the run key's signature of it
#: (rl_core.robot.estop; ``rl-bringup estop release``).
ESTOP_RELEASE = Topic("estop/release", "std_msgs/msg/String", (), (SIMULATOR,))
#: An operator's commands (simulator parameter ``teleop``): actions in [-1, 1], and a gamepad's
#: readings through the ``teleop_mapping`` file (rl_core.acting.teleop).
TELEOP_COMMAND = Topic("teleop_command", "std_msgs/msg/Float64MultiArray", (), (SIMULATOR,))
JOY = Topic("joy", "sensor_msgs/msg/Joy", (), (SIMULATOR,))
#: An operator's verdict (boundary parameter ``operator_success``): ``true`` ends the episode in
#: flight as a success.
OPERATOR_SUCCESS = Topic("operator_success", "std_msgs/msg/Bool", (), (SIMULATOR,))
#: A person's inputs, each only where its parameter asks for it (docs/graph.md, "People in the
#: loop").
OPERATOR_TOPICS = (TELEOP_COMMAND, JOY, OPERATOR_SUCCESS)
#: Simulated time (sim_robot with publish_clock; Gazebo through ros_gz_bridge).
CLOCK = Topic("/clock", "rosgraph_msgs/msg/Clock", (SIM_ROBOT,))
#: The boundary's topics, in the order of docs/graph.md ("Robot boundary"), for a controller
#: name (``{controller}`` in the docs).
def boundary_topics(controller: str) -> tuple[Topic, ...]:
    return (ROBOT_JOINT_STATES, command_topic(controller),
            command_topic(controller, "joint_trajectory"), ESTOP, ESTOP_STATE, ESTOP_RELEASE,
            CLOCK)


#: sim_robot's reset: put the joints in a state (the task's start state).
RESET_ROBOT_TYPE = "rl_interfaces/srv/ResetRobot"
#: The boundary's figures on a simulator's /diagnostics, which the trainer copies into
#: result.json (``robots``): latency from a joint state's arrival to the command sent for it,
#: and the achieved control rate.
LATENCY_P50_KEY, LATENCY_P99_KEY = "command latency p50 ms", "command latency p99 ms"
CONTROL_RATE_KEY = "control rate hz"
#: The share of a simulator's steps an operator drove (``teleop``), on its /diagnostics and in
#: result.json's ``robots``.
INTERVENTION_RATE_KEY = "intervention rate"
#: Prefix of the safety layer's intervention counts on /diagnostics.
SAFETY_KEY_PREFIX = "safety "

# --- services ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    """A service: ``name`` as the server creates it, its type and the server's node kind."""

    name: str
    type: str
    server: str


#: What every managed node (rl_nodes.lifecycle) serves and publishes, as rclpy's LifecycleNode
#: names them, beside the parameter services every node has; like those, not in the tables.
LIFECYCLE_SERVICES = ("~/change_state", "~/get_state", "~/get_available_states",
                      "~/get_available_transitions", "~/get_transition_graph")
LIFECYCLE_TRANSITION_EVENT = Topic("~/transition_event", "lifecycle_msgs/msg/TransitionEvent",
                                   (SIMULATOR, POLICY, REPLAY_BUFFER, TRAINER))

#: A container process' component manager (rl_nodes.component_manager), in the namespace its
#: nodes share, with ROS composition's services; like the lifecycle ones, not in the tables.
COMPONENT_MANAGER = "container"
COMPONENT_SERVICES = ("~/_container/load_node", "~/_container/unload_node",
                      "~/_container/list_nodes")

GET_ACTION = Service("~/get_action", "rl_interfaces/srv/GetAction", POLICY)
SAMPLE = Service("~/sample", "rl_interfaces/srv/SampleBatch", REPLAY_BUFFER)
UPDATE_PRIORITIES = Service("~/update_priorities", "rl_interfaces/srv/UpdatePriorities",
                            REPLAY_BUFFER)
SAVE = Service("~/save", "rl_interfaces/srv/BufferFile", REPLAY_BUFFER)
LOAD = Service("~/load", "rl_interfaces/srv/BufferFile", REPLAY_BUFFER)
SERVICES: tuple[Service, ...] = (GET_ACTION, SAMPLE, UPDATE_PRIORITIES, SAVE, LOAD)
#: sim_robot's reset (robot_interface ros2_control): put the joints in the task's start state.
#: Not in the checked graph: only ros2_control deployments with sim_robot have it.
RESET_ROBOT = Service("~/reset", RESET_ROBOT_TYPE, SIM_ROBOT)


# --- resolution (plain name rules in rl_core.names.ros_names) -------------------------------------------


def service_name(service: Service, namespace: str = "/") -> str:
    """Where ``service`` is served by its node in ``namespace``."""
    return resolve(service.name, namespace, service.server)


#: The absolute names every node of a deployment shares (learner topics, /diagnostics and its
#: aggregation, TF, /clock, and the replay buffer's services as the trainer calls them). A
#: deployment under ``namespace:=NS`` remaps each to ``/NS<name>`` in all its processes, so two
#: deployments share a domain without touching each other (nodes resolve every other name in
#: their own namespaces, which the plan puts under NS).
SHARED_NAMES: tuple[str, ...] = (
    *(topic.name for topic in (EXPERIENCE, EPISODES, WEIGHTS, REPLAY_STATUS, DIAGNOSTICS,
                                DIAGNOSTICS_AGG, DIAGNOSTICS_TOPLEVEL, TF, TF_STATIC, CLOCK)),
    *(image_topic(EXPERIENCE, compressed).name for compressed in (False, True)),
    service_name(SAMPLE), service_name(UPDATE_PRIORITIES),
)
