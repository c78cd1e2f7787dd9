"""Run one or several rl_ros2 nodes in a process: one thread (the main thread) drains the
zero-copy dispatch queue and drives the rclpy executor (timers, services, parameters, DDS), so a
message from DDS reaches its callback without a thread hand-off.

Every node executable and the colocated container go through :func:`run_nodes`, so a node's code
is the same whether it runs alone (decoupled) or beside others (colocated, hybrid).

SIGINT and SIGTERM end the spin loop, not the rcl context: rclpy's own handler would shut the
context down at once, so what a node publishes while it closes (a retiring robot's last
experience) could not go out, nor could the process wait for its reliable readers to acknowledge
it. The context ends after the nodes closed and their publishers were flushed.
"""

from __future__ import annotations

import atexit
import faulthandler
import importlib
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import rclpy
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from rl_core.config import ConfigError
from rl_core.names import node_kinds
from rl_nodes.base import RLNode
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.process_settings import apply_process_settings, end_with_supervisor

#: Node kinds and their classes (imported lazily, so a process loads only what it runs).
NODE_CLASSES = node_kinds.NODE_CLASSES
#: The order in which a process activates its nodes: the learning side first, acting last.
ACTIVATION_ORDER = (node_kinds.REPLAY_BUFFER, node_kinds.TRAINER, node_kinds.POLICY,
                    node_kinds.SIMULATOR)
#: Signals that stop a node process gracefully (a launch, the supervisor and k8s send them).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds a closing process waits, over all its reliable publishers, for their readers to
#: acknowledge what was published (a reader that died unannounced costs this once).
FLUSH_TIMEOUT_S = 1.0
#: Seconds a stopped process may take to end before it prints every thread's stack
#: (``ros2 launch`` escalates to SIGTERM after 5; the close takes about 0.1).
CLOSE_WATCH_S = 3.0


def node_class(kind: str) -> type[RLNode]:
    """The class of node ``kind``; unknown kinds raise ``ValueError`` listing the valid ones.

    Every class takes ``namespace=`` and has ``start()`` and ``close()``: the learning nodes are
    :class:`RLNode`s, the diagnostics aggregator a plain rclpy node with the same three."""
    if kind not in NODE_CLASSES:
        raise ValueError(f"unknown node kind {kind!r}; valid kinds: {', '.join(NODE_CLASSES)}")
    module_name, class_name = NODE_CLASSES[kind].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def ensure_network_defaults() -> None:
    """Default to loopback-only discovery (network-safety rule) unless the caller chose a range."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


class CallbackErrors:
    """Counts what callbacks could not handle, per source, and logs it at most once a second
    per source (a failing callback must neither stop the process nor flood the log)."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger
        self.counts: dict[str, int] = {}
        self._last_log: dict[str, float] = {}

    def report(self, source: str, error: BaseException) -> None:
        self.counts[source] = self.counts.get(source, 0) + 1
        now = time.monotonic()
        if now - self._last_log.get(source, -math.inf) < 1.0:
            return
        self._last_log[source] = now
        text = "".join(traceback.format_exception(error)).rstrip()
        message = f"{source} failed ({self.counts[source]} so far), the node keeps running: {text}"
        if self.logger is not None:
            self.logger.error(message)
        else:
            print(message, file=sys.stderr)


def run_nodes(specs: Sequence[tuple[str, str | None]], args: Sequence[str] | None = None,
              serve: Callable[[SingleThreadedExecutor, list[Any]], object] | None = None) -> int:
    """Create the nodes ``[(kind, namespace or None)]`` in this process and run until shutdown.

    :param args: command line with ROS arguments (``--ros-args --params-file F -p k:=v``).
    :param serve: called with the executor and the nodes once they are up, before spinning:
        what the process serves beside its nodes (a container's composition services,
        rl_nodes.component_manager; chosen by the container, so this module needs no import of
        it).
    :returns: the process exit code (0 normal, 2 bad configuration, 1 a node failed).
    """
    ensure_network_defaults()
    # A native crash (rclpy, DDS, pybullet, torch) prints every thread's Python stack to stderr,
    # which the launch log keeps: without it a respawn is all that shows.
    faulthandler.enable()
    # CPU set and torch threads from the plan (RL_ROS2_CPUS, RL_ROS2_TORCH_THREADS); without
    # them one torch thread: acting needs no intra-op parallelism (tiny batches), and idle OpenMP
    # workers spin against the other processes of a deployment on small machines. The trainer's
    # torch_threads parameter, when set, wins.
    end_with_supervisor()
    try:
        apply_process_settings()
    except ValueError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    rclpy.init(args=list(args) if args is not None else sys.argv,
               signal_handler_options=SignalHandlerOptions.NO)
    manager = IntraProcessManager.for_context(rclpy.get_default_context())

    def stop() -> None:
        # Not ended CLOSE_WATCH_S later: every thread's stack to stderr, before a launch's SIGTERM.
        faulthandler.dump_traceback_later(CLOSE_WATCH_S)
        manager.request_shutdown(0)

    signals = SignalStop(stop)
    executor = SingleThreadedExecutor()
    nodes: list[Any] = []
    code = 0
    try:
        for kind, namespace in specs:
            nodes.append(make_node(kind, **({"namespace": namespace} if namespace else {})))
        for node in nodes:
            executor.add_node(node)
        autostart(nodes)
        if serve is not None:
            serve(executor, nodes)
        errors = CallbackErrors(nodes[0].get_logger() if nodes else None)
        code = manager.spin(on_error=errors.report, executor=executor)
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 0
    finally:
        for node in closing_order(nodes):
            try:
                getattr(node, "release", node.close)()
            except Exception as error:  # noqa: BLE001 - closing one node must not skip the others
                print(f"error while closing {node.get_name()}: {error}", file=sys.stderr)
        flush_publishers(nodes, FLUSH_TIMEOUT_S)
        executor.shutdown(timeout_sec=1.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        signals.restore()
    return code


def make_node(kind: str, **options: Any) -> Any:
    """A node of ``kind`` built with ``options`` (rclpy Node keywords), not yet configured: the
    caller drives its lifecycle (:func:`autostart`)."""
    cls = node_class(kind)
    return cls(configure=False, **options) if issubclass(cls, RLNode) else cls(**options)


def autostart(nodes: Sequence[Any]) -> None:
    """Bring the managed nodes whose ``autostart`` is on to active (rl_nodes.lifecycle): all
    configured first, then activated in the order the graph needs, the learning side (replay
    buffer, trainer) before the policies, the simulators last. Others stay unconfigured for an
    orchestrator; a plain node (the diagnostics aggregator) just gets ``start()``.

    :raises ConfigError: with the reason, when a node fails to configure.
    """
    managed = [node for node in nodes if isinstance(node, RLNode) and node.autostart]
    for node in managed:
        node.configure_now()
    for node in sorted(managed, key=activation_rank):
        node.start()
    for node in nodes:
        if not isinstance(node, RLNode):
            node.start()


def activation_rank(node: Any) -> int:
    """Where ``node`` comes in :data:`ACTIVATION_ORDER` (nodes not in it come after)."""
    name = node.get_name()
    return ACTIVATION_ORDER.index(name) if name in ACTIVATION_ORDER else len(ACTIVATION_ORDER)


def closing_order(nodes: Sequence[Any]) -> list[Any]:
    """``nodes`` in the reverse of their activation: the simulators first, so that a robot is
    held before the rest of its process closes (a policy's close takes tens of milliseconds)."""
    return sorted(nodes, key=activation_rank, reverse=True)


class SignalStop:
    """Calls ``stop`` on SIGINT and SIGTERM (main thread only, as Python allows), at once.

    Python runs a signal's handler on the main thread when that returns to the interpreter, and
    the main thread may sit in rclpy's wait for up to 0.1 s: a robot would then be held that
    much later than the signal (issue 41 measured 105 ms). So the signal also writes its number
    to a pipe (``signal.set_wakeup_fd``), whose reader thread calls ``stop`` (which wakes the
    wait) as soon as the signal arrives."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._handlers: dict[int, Any] = {}
        self._wakeup_fd: int | None = None
        if threading.current_thread() is not threading.main_thread():
            return
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(read_fd, True)
        self._pipe = (read_fd, write_fd)
        self._wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._handlers = {signum: signal.signal(signum, lambda _signum, _frame: stop())
                          for signum in STOP_SIGNALS}
        threading.Thread(target=self._wake, args=(read_fd, stop), name="signal-wakeup",
                         daemon=True).start()

    @staticmethod
    def _wake(read_fd: int, stop: Callable[[], None]) -> None:
        try:
            while data := os.read(read_fd, 64):
                if any(number in STOP_SIGNALS for number in data):
                    stop()
        except OSError:  # the pipe was closed: restored
            return

    def restore(self) -> None:
        """Put back the handlers and wake-up descriptor found, and end the reader thread."""
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        if self._wakeup_fd is not None:
            signal.set_wakeup_fd(self._wakeup_fd)
            for fd in reversed(self._pipe):  # the writer first: the reader sees end of file
                os.close(fd)
        self._handlers, self._wakeup_fd = {}, None


def flush_publishers(nodes: Sequence[Any], timeout_s: float) -> bool:
    """Wait until every reliable publisher of ``nodes`` has its messages acknowledged by its
    readers, ``timeout_s`` for all together; False when time ran out (or rcl refused)."""
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        for publisher in list(node.publishers):
            if publisher.qos_profile.reliability != ReliabilityPolicy.RELIABLE:
                continue
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not publisher.wait_for_all_acked(
                        Duration(nanoseconds=int(left * 1e9))):
                    return False
            except Exception:  # noqa: BLE001 - a publisher already gone: nothing left to flush
                continue
    return True


def spin_plain_node(make: Callable[[], Any], config_errors: tuple[type[Exception], ...],
                    args: list[str] | None = None) -> int:
    """Run one plain rclpy node (not an :class:`RLNode`: sim_robot) until shutdown; exit code
    0, or 2 with the reason when ``make`` raises a configuration error.
    A node's ``close()``, where it has one, runs before it is destroyed."""
    ensure_network_defaults()
    rclpy.init(args=args if args is not None else sys.argv)
    node: Any = None
    try:
        node = make()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except config_errors as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def main_for(kind: str) -> int:
    """Entry point body of a single-node executable."""
    return end_process(run_nodes([(kind, None)]))


def end_process(code: int) -> NoReturn:
    """End this node process with ``code``, its nodes closed: the DDS participant leaves, atexit
    functions run, and ``os._exit`` skips the interpreter's teardown of torch, pybullet and DDS
    (1 s on an idle machine, past a launch's 5 s grace on a loaded one, as a CI run saw)."""
    rclpy.get_default_context().destroy()
    atexit._run_exitfuncs()  # CPython's own: what ``sys.exit`` would run first
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
