"""``rl-bringup estop``: engage a robot's e-stop, release it with the run's key, or show it.

``rl-bringup estop engage robot:=0`` publishes ``true`` on ``/robot_0/estop`` (anyone may stop a
robot). ``rl-bringup estop release robot:=0 run:=RUN`` reads the robot's latched
``estop/state``, signs its challenge with the run's private key (``RUN/weights.key``, or
``key:=FILE``, or ``RL_ROS2_WEIGHTS_KEY`` / ``_FILE``) and publishes the release; it then waits
until the robot reports it released. ``rl-bringup estop status robot:=0`` prints the state.
How the release is proven: rl_core.robot.estop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rl_bringup.run.ros_session import ATTACH_KEYS, RosSession, attach_settings
from rl_bringup.tools.subcommand import EXIT_FAILURE, CliError, SubparsersAction, ToolError, add_tool
from rl_core.robot import estop
from rl_core.security import weights_auth

ACTIONS = ("engage", "release", "status")
KEYS = ("robot", "namespace", "run", "key", "timeout", *ATTACH_KEYS)
#: Seconds to wait for the robot's state (and, after a release, for it to say released).
DEFAULT_TIMEOUT_S = 10.0


def _namespace(values: dict[str, str]) -> str:
    if values.get("namespace"):
        return "/" + values["namespace"].strip("/")
    robot = values.get("robot", "0")
    if not robot.isdigit():
        raise CliError(f"robot must be a robot index (0, 1, ...), got {robot!r}")
    from rl_nodes import graph

    return graph.robot_namespace(int(robot))


def _signing_key(values: dict[str, str]) -> weights_auth.SigningKey:
    """The run's private key: ``key:=FILE``, ``run:=DIR`` (its weights.key), or the
    environment's."""
    environ = dict(os.environ)
    if values.get("key"):
        environ[weights_auth.KEY_FILE_VARIABLE] = values["key"]
        environ.pop(weights_auth.KEY_VARIABLE, None)
    elif values.get("run"):
        environ[weights_auth.KEY_FILE_VARIABLE] = str(Path(values["run"]) /
                                                      weights_auth.KEY_FILE_NAME)
        environ.pop(weights_auth.KEY_VARIABLE, None)
    try:
        key = weights_auth.load_key(environ)
    except weights_auth.WeightsKeyError as error:
        raise ToolError(str(error)) from None
    if key is None:
        raise CliError("a release needs the run's key: run:=RUN_DIRECTORY (its weights.key) or "
                       "key:=FILE")
    return key


def run(values: dict[str, str]) -> int:
    action = values.get("mode", "")
    if action not in ACTIONS:
        raise CliError(f"say one of {', '.join(ACTIONS)}: rl-bringup estop release robot:=0 "
                       "run:=RUN")
    namespace = _namespace(values)
    key = _signing_key(values) if action == "release" else None
    timeout = float(values.get("timeout", DEFAULT_TIMEOUT_S))
    settings = attach_settings(values)
    with RosSession("estop", settings.domain_id) as session:
        return _act(session, action, namespace, key, timeout)


def _act(session: RosSession, action: str, namespace: str,
         key: weights_auth.SigningKey | None, timeout: float) -> int:
    from std_msgs.msg import Bool, String

    from rl_nodes import graph

    node = session.node
    states: list[tuple[bool, str, str]] = []
    node.create_subscription(String, graph.resolve(graph.ESTOP_STATE.name, namespace),
                             lambda msg: states.append(estop.parse_state(msg.data)),
                             graph.ESTOP_STATE.qos.profile())
    if action == "engage":
        publisher: Any = node.create_publisher(Bool, graph.resolve(graph.ESTOP.name, namespace),
                                               graph.ESTOP.qos.profile())
        if not session.spin_until(lambda: publisher.get_subscription_count() > 0, timeout):
            raise ToolError(f"no robot listens on {namespace}/estop", EXIT_FAILURE)
        publisher.publish(Bool(data=True))
        engaged = session.spin_until(lambda: bool(states) and states[-1][0], timeout)
        print(f"{namespace}: e-stop {'engaged' if engaged else 'sent (no state seen yet)'}")
        return 0 if engaged else EXIT_FAILURE
    if not session.spin_until(lambda: bool(states), timeout):
        raise ToolError(f"no e-stop state from {namespace} (is its simulator running?)",
                        EXIT_FAILURE)
    engaged, challenge, reason = states[-1]
    if action == "status" or not engaged:
        print(f"{namespace}: e-stop {'engaged: ' + reason if engaged else 'released'}")
        return 0
    assert key is not None
    publisher = node.create_publisher(String, graph.resolve(graph.ESTOP_RELEASE.name, namespace),
                                      graph.ESTOP_RELEASE.qos.profile())
    session.spin_until(lambda: publisher.get_subscription_count() > 0, timeout)
    publisher.publish(String(data=estop.release_text(key, namespace, challenge)))
    if session.spin_until(lambda: not states[-1][0], timeout):
        print(f"{namespace}: e-stop released")
        return 0
    raise ToolError(f"{namespace} did not release (is this the run's key? the simulator logs "
                    "why it refused)", EXIT_FAILURE)


def register(subparsers: SubparsersAction) -> None:
    add_tool(subparsers, "estop", run, keys=KEYS, takes_mode=True,
             help="engage, release (signed with the run's key) or show a robot's e-stop",
             description="engage|release|status robot:=K [run:=RUN | key:=FILE]: a robot's "
                         "e-stop; a release is signed with the run's key (docs/robots.md)")
