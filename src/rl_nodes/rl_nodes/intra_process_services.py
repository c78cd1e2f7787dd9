"""Services of rl_nodes.intra_process: a real rclpy service whose handler a client in the same
process calls directly (no serialisation), and the client that does so or goes over DDS.

rclpy has no intra-process services; the manager (``IntraProcessManager``) keeps the handlers of
this process' services by name, and a client looks its service up there before each call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rclpy.node import Node

from rl_nodes.service_types import ServiceType

if TYPE_CHECKING:
    from rl_nodes.intra_process import IntraProcessManager


class ServiceUnavailable(RuntimeError):
    """No server answered in time; the message says which service and what to check."""


def create_service(manager: IntraProcessManager, node: Node, service_type: ServiceType[Any],
                   name: str, handler: Callable[[Any], Any]) -> Any:
    """A real rclpy service whose handler local clients call directly (no serialisation).

    The handler runs on the caller's thread for local calls and on the executor thread for DDS
    calls, so it must be thread-safe.
    """

    def on_request(request: Any, response: Any) -> Any:
        try:
            return service_type.response_to_msg(handler(service_type.request_from_msg(request)))
        except Exception as error:  # noqa: BLE001 - answer the client instead of leaving it waiting
            manager.report_error(f"service {name}", error)
            if hasattr(response, "success"):
                response.success = False
            if hasattr(response, "message"):
                response.message = f"request failed: {type(error).__name__}: {error}"
            return response

    service = node.create_service(service_type.srv_type, name, on_request)
    manager.add_local_service(service.service_name, handler)
    return service


class IntraProcessClient:
    """Calls a service: directly when its server lives in this process, else over DDS."""

    def __init__(self, manager: IntraProcessManager, node: Node, service_type: ServiceType[Any],
                 name: str) -> None:
        self.manager = manager
        self.service_type = service_type
        self.client = node.create_client(service_type.srv_type, name)
        self.name: str = self.client.service_name

    @property
    def is_local(self) -> bool:
        return self.manager.local_service(self.name) is not None

    def call(self, request: Any, timeout_s: float = 5.0) -> Any:
        """Send ``request`` and return the response object.

        :raises ServiceUnavailable: when no server answers within ``timeout_s``.
        """
        handler = self.manager.local_service(self.name)
        if handler is not None:
            return handler(request)
        if not self.client.wait_for_service(timeout_sec=timeout_s):
            raise ServiceUnavailable(f"service {self.name} is not available; check that its node "
                                     "runs, with the same ROS_DOMAIN_ID and discovery settings")
        done = threading.Event()
        future = self.client.call_async(self.service_type.request_to_msg(request))
        future.add_done_callback(lambda _: done.set())
        if not self.manager.wait_on_dispatch_thread(done, timeout_s):
            self.client.remove_pending_request(future)
            raise ServiceUnavailable(f"service {self.name} did not answer within {timeout_s} s")
        return self.service_type.response_from_msg(future.result())
