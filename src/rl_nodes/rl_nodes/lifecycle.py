"""Managed (lifecycle) nodes: what each transition does to an rl_ros2 node.

Every rl_ros2 node is an rclpy ``LifecycleNode`` (REP-2002), so ``ros2 lifecycle nodes|get|set``
and an orchestrator drive it. configure is :meth:`ManagedNode.build` (a bad value fails it);
activate is :meth:`ManagedNode.begin` the first time, later :meth:`ManagedNode.resume`;
deactivate is :meth:`ManagedNode.pause`, which keeps the node's state; cleanup and shutdown are
:meth:`ManagedNode.close`, which writes what must survive (checkpoint, replay snapshot) and then
ends the process with :data:`EXIT_RESTART`, so that its supervisor starts it again and the run
resumes. With ``autostart`` (default true) :mod:`rl_nodes.runtime` configures and activates a
process's nodes itself; nodes built in Python are configured at construction unless
``configure=False``, and :meth:`ManagedNode.start` activates them.

Cleanup and shutdown end the process, rather than being refused, because anyone on the domain
can call ``~/change_state`` and a node cannot be configured again in its process (issue 41);
the table and the reasons: docs/lifecycle.md.
"""

from __future__ import annotations

import traceback
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from rl_core.config import ConfigError
from rl_core.monitoring.heartbeat import EXIT_RESTART
from rl_nodes.intra_process import IntraProcessManager

#: Parameter: bring the node up to active when its process starts.
AUTOSTART = "autostart"
SUCCESS, FAILURE, ERROR = (TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE,
                           TransitionCallbackReturn.ERROR)


class ManagedNode(LifecycleNode):
    """A lifecycle node whose transitions call the hooks subclasses fill in.

    Subclasses call :meth:`configure_now` at the end of their construction where they are to be
    configured at once.
    """

    def __init__(self, name: str, namespace: str = "", **kwargs: Any) -> None:
        super().__init__(name, namespace=namespace, **kwargs)
        self.declare_parameter(AUTOSTART, True, ParameterDescriptor(
            description="Configure and activate this node when its process starts; false "
                        "leaves it unconfigured for an orchestrator (ros2 lifecycle set).",
            read_only=True))
        #: Configured and not yet cleaned up (the hooks' state exists).
        self.configured = False
        #: Active: acting, learning, serving.
        self.active = False
        self._begun = self._closed = False
        #: Why the last configure failed ("" when it did not).
        self.configure_error = ""

    # --- hooks (subclasses) -----------------------------------------------------------------------

    def build(self) -> None:
        """Configure: read parameters, build what the node needs; raise :class:`ConfigError`."""

    def begin(self) -> None:
        """First activation: start work, once every node of the process is configured."""

    def pause(self) -> None:
        """Deactivate: stop work, keep state."""

    def resume(self) -> None:
        """A later activation: go on after :meth:`pause`."""

    def close(self) -> None:
        """Cleanup and shutdown: save what must survive, release resources."""

    # --- driving it from Python ---------------------------------------------------------------------

    @property
    def autostart(self) -> bool:
        return bool(self.get_parameter(AUTOSTART).value)

    def configure_now(self) -> None:
        """Run the configure transition; raise :class:`ConfigError` with the reason when a value
        is bad, ``RuntimeError`` when building failed otherwise (a crash: exit code 1, not 2)."""
        result = self.trigger_configure()
        if result == SUCCESS:
            return
        reason = self.configure_error or f"{self.get_fully_qualified_name()} failed to configure"
        raise (ConfigError if result == FAILURE else RuntimeError)(reason)

    def start(self) -> None:
        """Run the activate transition (after configure)."""
        if self.trigger_activate() != SUCCESS:
            raise RuntimeError(f"{self.get_fully_qualified_name()} failed to activate; see its log")

    def release(self) -> None:
        """Close the node if it is configured (idempotent; the process' last word)."""
        if self.configured and not self._closed:
            self._closed = True
            self.active = self.configured = False
            self.close()

    # --- transitions --------------------------------------------------------------------------------

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._closed:
            self.configure_error = (f"{self.get_fully_qualified_name()} was cleaned up and "
                                    "cannot be configured again in this process; restart it")
            self.get_logger().error(self.configure_error)
            return FAILURE
        try:
            self.build()
        except (ConfigError, ParameterException) as error:
            self.configure_error = str(error)
            self.get_logger().error(f"configure failed: {error}")
            return FAILURE
        except Exception as error:  # noqa: BLE001 - rclpy would swallow it without a word
            self.configure_error = f"{type(error).__name__}: {error}"
            self.get_logger().error(f"configure failed: {traceback.format_exc()}")
            return ERROR
        self.configure_error = ""
        self.configured = True
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._run(self.resume if self._begun else self._begin_once, active=True,
                         what="activate")

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._run(self.pause, active=False, what="deactivate")

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Close the node (checkpoint, snapshot), then end the process to be restarted."""
        return self._end_process(what="cleanup")

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """As cleanup: the node is finalized whatever this returns (rcl_lifecycle)."""
        return self._end_process(what="shutdown")

    def _end_process(self, what: str) -> TransitionCallbackReturn:
        """Release the node, then have the process exit with :data:`EXIT_RESTART` after the
        transition's answer went out (the dispatch loop ends once this callback returned)."""
        result = self._run(self.release, active=False, what=what)
        manager = IntraProcessManager.for_context(self.context)
        if not manager.shutdown_requested:  # a run ending already keeps its exit code
            self.get_logger().warning(
                f"{what} through the lifecycle services: this process ends with exit code "
                f"{EXIT_RESTART} so that its supervisor restarts it (a node cannot be configured "
                "again in its process); the run resumes from its checkpoint and replay snapshot")
            manager.request_shutdown(EXIT_RESTART)
        return result

    def _begin_once(self) -> None:
        self._begun = True
        self.begin()

    def _run(self, hook: Any, active: bool, what: str) -> TransitionCallbackReturn:
        """Run a transition's hook with the node already (in)active as ``active`` says: a
        resuming hook sees the node active, no new work starts while a pausing one runs."""
        self.active = active
        try:
            hook()
        except Exception:  # noqa: BLE001 - rclpy would swallow it without a word
            self.active = False
            self.get_logger().error(f"{what} failed: {traceback.format_exc()}")
            return ERROR
        return SUCCESS

    def destroy_node(self) -> None:
        """Destroy the node and its lifecycle state machine: rclpy's LifecycleNode leaves the
        machine, which holds the rcl node, so the node would stay in the graph until the
        process ends."""
        super().destroy_node()
        self._state_machine.destroy_when_not_in_use()

    def lifecycle_state(self) -> str:
        """``unconfigured``, ``inactive``, ``active`` or ``finalized`` (for diagnostics)."""
        return str(self._state_machine.current_state[1])
