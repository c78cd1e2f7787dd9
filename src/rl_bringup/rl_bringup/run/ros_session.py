"""What the operator tools (``record``, ``status``, ``doctor``) and ``advise`` share.

* the ROS environment a tool attaches with (domain id, discovery), defaulting to loopback-only
  discovery like every other part of the project (docs/architecture.md, "Network safety");
* :class:`RosSession`: a short-lived rclpy context, node and executor, with Ctrl-C (SIGINT) and
  SIGTERM turned into a stop request that the tool's loop polls, so a tool always gets to finish
  its output file or final table.

rclpy is imported inside functions: the CLI imports the tools when it builds its parser, and
``rl-bringup plan`` must not pay for (or need) an rclpy import.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from rl_bringup.plan.discovery import (
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_SERVER_VARIABLE,
    DOMAIN_ID_VARIABLE,
    MAX_INHERITED_DOMAIN_ID,
    discovery_environment,
    parse_domain_id,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

#: Keys every tool accepts: where the deployment is.
ATTACH_KEYS: tuple[str, ...] = ("domain_id", "discovery")
#: The ROS 2 default domain when ROS_DOMAIN_ID is unset.
ROS_DEFAULT_DOMAIN_ID = 0
#: Tool nodes start with '_' so ``ros2 node list`` hides them and the tools ignore each other.
TOOL_NODE_PREFIX = "_rl_bringup_"
SUPER_CLIENT_VARIABLE = "ROS_SUPER_CLIENT"


@dataclass
class AttachSettings:
    """How a tool attaches to a deployment.

    :param domain_id: the ROS domain id the tool joins.
    :param domain_source: ``"argument"``, ``"environment"`` or ``"default"`` (ROS' domain 0).
    :param applied: variables the tool set in its own environment before starting rclpy.
    """

    domain_id: int
    domain_source: str
    applied: dict[str, str] = field(default_factory=dict)


def attach_settings(values: Mapping[str, str],
                    environ: MutableMapping[str, str] | None = None) -> AttachSettings:
    """Choose the domain id and discovery settings of a tool and put them into ``environ``.

    Domain id: ``domain_id:=N``, else ``ROS_DOMAIN_ID``, else ROS' default 0. Discovery:
    ``discovery:=localhost|subnet|server:HOST:PORT`` as for ``rl-bringup launch``; without it the
    caller's ``ROS_AUTOMATIC_DISCOVERY_RANGE`` / ``ROS_DISCOVERY_SERVER`` are kept and, when
    neither is set, ``LOCALHOST`` is used: a tool never multicasts discovery unless asked to.

    :param values: the tool's parsed ``key:=value`` arguments.
    :param environ: environment to read and update (``os.environ`` when ``None``); it must be
        updated before ``rclpy.init`` for the middleware to see it.
    :raises rl_bringup.plan.deployment.PlanError: for a bad domain id or discovery value (exit
        code 2).
    """
    environ = os.environ if environ is None else environ
    if values.get("domain_id", "").strip():
        domain_id, source = parse_domain_id(values["domain_id"]), "argument"
    elif environ.get(DOMAIN_ID_VARIABLE, "").strip():
        # As the launches do: the caller's domain as is, up to the highest id DDS can map.
        domain_id = parse_domain_id(environ[DOMAIN_ID_VARIABLE],
                                    source=f"{DOMAIN_ID_VARIABLE} in the environment",
                                    maximum=MAX_INHERITED_DOMAIN_ID)
        source = "environment"
    else:
        domain_id, source = ROS_DEFAULT_DOMAIN_ID, "default"
    applied: dict[str, str] = {}
    if values.get("discovery", "").strip():
        applied, _ = discovery_environment(values["discovery"], environ)
        if DISCOVERY_SERVER_VARIABLE in applied:
            # A plain discovery-server client only learns about the endpoints it matches;
            # graph introspection (node lists, endpoint info) needs a super client.
            applied[SUPER_CLIENT_VARIABLE] = "TRUE"
        else:
            environ.pop(DISCOVERY_SERVER_VARIABLE, None)
    elif not environ.get(DISCOVERY_RANGE_VARIABLE) and not environ.get(DISCOVERY_SERVER_VARIABLE):
        applied = {DISCOVERY_RANGE_VARIABLE: "LOCALHOST"}
    environ.update(applied)
    return AttachSettings(domain_id=domain_id, domain_source=source, applied=applied)


def qos_policy_name(value: Any) -> str:
    """``ReliabilityPolicy.BEST_EFFORT`` -> ``best_effort`` (rmw's short names)."""
    return str(getattr(value, "name", value)).lower()


def join_name(namespace: str, name: str) -> str:
    """``("/robot_0", "simulator")`` -> ``/robot_0/simulator``; ``("/", "trainer")`` -> ``/trainer``."""
    return namespace.rstrip("/") + "/" + name


def graph_node_names(node: Node) -> list[str]:
    """Full names of the nodes in the graph, tool nodes left out; duplicates kept (a duplicate
    name means two processes run the same node, e.g. two deployments in one domain)."""
    return sorted(join_name(namespace, name)
                  for name, namespace in node.get_node_names_and_namespaces()
                  if not name.startswith(TOOL_NODE_PREFIX))


def graph_topics(node: Node) -> dict[str, list[str]]:
    """``topic -> [types]`` of the graph."""
    return {name: list(types) for name, types in node.get_topic_names_and_types()}


class RosSession:
    """rclpy context + one hidden node + a single-threaded executor, for the life of a tool.

    SIGINT and SIGTERM set :attr:`stop_requested` instead of raising in the middle of a callback;
    the tool's loop (:meth:`spin_for`, :meth:`spin_until`) returns promptly and the tool finishes
    its work. The previous handlers are restored on exit.

    :param tool: tool name, part of the node name (``_rl_bringup_record_<pid>``).
    :param domain_id: ROS domain to join; ``None``: rclpy's default (``ROS_DOMAIN_ID``, else 0).
    """

    def __init__(self, tool: str, domain_id: int | None) -> None:
        self.tool = tool
        self.domain_id = domain_id
        self.stop_requested = threading.Event()
        self._previous_handlers: dict[int, Any] = {}
        self._context: Any = None
        self._node: Node | None = None
        self._executor: SingleThreadedExecutor | None = None

    @property
    def node(self) -> Node:
        assert self._node is not None, "use RosSession as a context manager"
        return self._node

    def __enter__(self) -> RosSession:
        import rclpy  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.signals import SignalHandlerOptions  # noqa: PLC0415

        self._install_signal_handlers()
        try:
            self._context = rclpy.Context()
            rclpy.init(args=[], context=self._context, domain_id=self.domain_id,
                       signal_handler_options=SignalHandlerOptions.NO)
            self._node = rclpy.create_node(
                f"{TOOL_NODE_PREFIX}{self.tool}_{os.getpid()}", context=self._context,
                start_parameter_services=False)
            self._executor = SingleThreadedExecutor(context=self._context)
            self._executor.add_node(self._node)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        import rclpy  # noqa: PLC0415

        if self._executor is not None:
            self._executor.shutdown(timeout_sec=1.0)
        if self._node is not None:
            self._node.destroy_node()
        if self._context is not None:
            rclpy.try_shutdown(context=self._context)
        self._executor = self._node = self._context = None
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread (tests call in-process)

        def request_stop(signum: int, frame: FrameType | None) -> None:
            self.stop_requested.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous_handlers[signum] = signal.signal(signum, request_stop)

    def spin_once(self, timeout_s: float = 0.1) -> None:
        """Run ready callbacks, waiting at most ``timeout_s`` for one."""
        assert self._executor is not None, "use RosSession as a context manager"
        self._executor.spin_once(timeout_sec=timeout_s)

    def spin_for(self, seconds: float, *, every: Callable[[], None] | None = None,
                 every_period_s: float = 1.0) -> bool:
        """Spin for ``seconds``; call ``every`` each ``every_period_s``.

        :return: ``False`` when a stop was requested (Ctrl-C) before the time was up.
        """
        deadline = time.monotonic() + seconds
        next_call = time.monotonic() + every_period_s
        while not self.stop_requested.is_set():
            now = time.monotonic()
            if now >= deadline:
                return True
            if every is not None and now >= next_call:
                every()
                next_call = now + every_period_s
            self.spin_once(min(0.1, max(0.0, deadline - now)))
        return False

    def spin_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Spin until ``condition()`` holds (True), ``timeout_s`` passes or a stop is requested."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.stop_requested.is_set():
                return False
            self.spin_once(min(0.1, remaining))
        return True
