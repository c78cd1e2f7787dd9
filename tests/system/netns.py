"""Private test networks made of Linux network namespaces: several "hosts" on one bridge.

Layout built by :func:`bridged_hosts` for hosts ``a, b, ...`` and subnet ``S``::

    netns <prefix>-br   : bridge "br0" (up, multicast snooping off so DDS multicast floods)
    netns <prefix>-a    : lo up, "eth0" = 10.213.S.1/24  <-veth->  "v-a" in the bridge namespace
    netns <prefix>-b    : lo up, "eth0" = 10.213.S.2/24  <-veth->  "v-b" ...

Every interface is created inside a namespace of ours (never in the caller's namespace), the
addresses exist only there, and no namespace has a default route: the only route besides the
subnet is 224.0.0.0/4 on eth0, so DDS multicast has an interface to leave from. Nothing can reach
outside. Deleting a namespace destroys its interfaces and their veth peers, so teardown is
``ip netns delete`` of every namespace created, in a ``finally`` even when setup fails half way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

SUBNET_PREFIX = "10.213"
COMMAND_TIMEOUT_S = 10.0


class NamespaceUnavailable(RuntimeError):
    """This process may not create network namespaces (not root, no ``ip``, no CAP_NET_ADMIN)."""


def ip(*args: str, namespace: str | None = None) -> str:
    """Run ``ip [-n NAMESPACE] ARGS``; raise ``RuntimeError`` with its stderr when it fails."""
    argv = ["ip", *(["-n", namespace] if namespace else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def check_rights() -> None:
    """Raise :class:`NamespaceUnavailable` with the reason when namespaces cannot be made here."""
    if shutil.which("ip") is None:
        raise NamespaceUnavailable("no 'ip' binary (iproute2) on PATH")
    if os.geteuid() != 0:
        raise NamespaceUnavailable(f"not root (euid {os.geteuid()}); 'ip netns add' needs "
                                   "CAP_SYS_ADMIN and CAP_NET_ADMIN")
    probe = f"rlprobe-{os.getpid()}"
    try:
        ip("netns", "add", probe)
    except RuntimeError as error:
        raise NamespaceUnavailable(str(error)) from error
    finally:
        subprocess.run(["ip", "netns", "delete", probe], capture_output=True,
                       timeout=COMMAND_TIMEOUT_S)


@dataclass
class Network:
    """Namespaces of one private network; ``hosts`` maps a host name to its namespace."""

    subnet: int
    bridge_namespace: str
    hosts: dict[str, str] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)

    def address(self, host: str) -> str:
        """IPv4 address of ``host`` on the bridge (no prefix length)."""
        return self.addresses[host]

    def exec_argv(self, host: str, argv: Sequence[str],
                  env: Mapping[str, str] | None = None) -> list[str]:
        """Command line running ``argv`` inside ``host``'s namespace with exactly ``env``.

        ``ip netns exec`` execs the command in place, so the PID of the started process is the
        PID of ``argv`` itself (stopping it by PID/process group works as usual).
        """
        env_args = ["env", "-i", *(f"{key}={value}" for key, value in (env or {}).items())]
        return ["ip", "netns", "exec", self.hosts[host], *env_args, *argv]

    def set_link(self, host: str, up: bool) -> None:
        """Cut (``up=False``) or restore ``host``'s cable at the bridge."""
        ip("link", "set", _bridge_port(host), "up" if up else "down",
           namespace=self.bridge_namespace)


def _bridge_port(host: str) -> str:
    name = f"v-{host}"
    if len(name) > 15:  # IFNAMSIZ - 1
        raise ValueError(f"host name {host!r} is too long for an interface name (max 13 chars)")
    return name


@contextmanager
def bridged_hosts(hosts: Sequence[str], subnet: int, tag: str) -> Iterator[Network]:
    """Create one namespace per host on a private bridge; remove every namespace afterwards.

    :param hosts: host names (short, distinct); host ``i`` gets address ``10.213.<subnet>.<i+1>``.
    :param subnet: third octet of the private /24 (0-255).
    :param tag: unique per run (for example the pytest pid), so parallel runs never clash.
    :raises NamespaceUnavailable: when namespaces cannot be created here (nothing is left behind).
    """
    if not 0 <= subnet <= 255 or len(set(hosts)) != len(hosts) or not 0 < len(hosts) < 254:
        raise ValueError(f"need distinct hosts (1..253) and subnet 0..255, got {hosts}, {subnet}")
    check_rights()
    prefix = f"rl{tag}"
    network = Network(subnet, f"{prefix}-br")
    created: list[str] = []
    body_failed = True
    try:
        ip("netns", "add", network.bridge_namespace)
        created.append(network.bridge_namespace)
        ip("link", "set", "lo", "up", namespace=network.bridge_namespace)
        ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0",
           namespace=network.bridge_namespace)
        ip("link", "set", "br0", "up", namespace=network.bridge_namespace)
        for index, host in enumerate(hosts, start=1):
            namespace = f"{prefix}-{host}"
            port = _bridge_port(host)
            address = f"{SUBNET_PREFIX}.{subnet}.{index}"
            ip("netns", "add", namespace)
            created.append(namespace)
            network.hosts[host] = namespace
            network.addresses[host] = address
            # Both ends are born inside namespaces of ours: nothing appears in the caller's.
            ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace,
               namespace=network.bridge_namespace)
            ip("link", "set", port, "master", "br0", namespace=network.bridge_namespace)
            ip("link", "set", port, "up", namespace=network.bridge_namespace)
            ip("link", "set", "lo", "up", namespace=namespace)
            ip("link", "set", "eth0", "multicast", "on", namespace=namespace)
            ip("address", "add", f"{address}/24", "dev", "eth0", namespace=namespace)
            ip("link", "set", "eth0", "up", namespace=namespace)
            ip("route", "add", "224.0.0.0/4", "dev", "eth0", namespace=namespace)
        yield network
        body_failed = False
    finally:
        errors = []
        for namespace in reversed(created):
            done = subprocess.run(["ip", "netns", "delete", namespace], capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S)
            if done.returncode != 0:
                errors.append(f"{namespace}: {done.stderr.strip()}")
        if errors:
            message = "could not remove network namespaces: " + "; ".join(errors)
            if not body_failed:
                raise RuntimeError(message)
            # Keep the original failure as the one reported; still say what was left behind.
            print(message, file=sys.stderr)


def namespaces_with_prefix(tag: str) -> list[str]:
    """Names of the existing namespaces a :func:`bridged_hosts` call with ``tag`` would create."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=COMMAND_TIMEOUT_S).stdout
    return [line.split()[0] for line in listing.splitlines()
            if line.split() and line.split()[0].startswith(f"rl{tag}-")]
