"""How the processes of a run find each other: ROS domain id and DDS discovery.

:func:`run_environment` gives the variables every process of a plan shares: the domain id (the
``domain_id:=`` argument, else the caller's ``ROS_DOMAIN_ID`` as is, else ROS's default 0 for
``ros2 launch`` and a random pick for ``rl-bringup``, whose concurrent runs and comparisons on one
machine stay out of each other's graphs), and the discovery setting of
:func:`discovery_environment` (the ``discovery:=`` argument, else the caller's
``ROS_AUTOMATIC_DISCOVERY_RANGE`` / ``ROS_DISCOVERY_SERVER``, else loopback only; the multi-host
settings add the Fast DDS profile ``config/fastdds_multihost.xml``). The caller's
``RMW_IMPLEMENTATION`` is never changed.

The ``rl-bringup`` tools that attach to a run (doctor, status, compose, k8s) read the same
variable names and checks from here.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shlex
from collections.abc import Mapping

from rl_bringup.plan import paths
from rl_bringup.plan.process_spec import PlanError

DEFAULT_DISCOVERY = "localhost"
#: ``discovery:=environment`` (both front ends' default): the caller's discovery variables, else
#: :data:`DEFAULT_DISCOVERY`.
CALLER_DISCOVERY = "environment"
# 0..101 is the range ROS 2 documents as safe on Linux: higher ids push the DDS ports into the
# ephemeral port range.
MIN_DOMAIN_ID = 0
MAX_DOMAIN_ID = 101
# The highest id DDS can map to UDP ports at all (ROS 2, "About Domain ID"). A caller's
# ROS_DOMAIN_ID is used as is up to it: their other ROS tools run in that domain already.
MAX_INHERITED_DOMAIN_ID = 232
# A per-run pick avoids 0 (the id every unconfigured ROS 2 shell uses) and 101 (the edge).
RANDOM_DOMAIN_ID_RANGE = (1, 100)

DISCOVERY_RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
DISCOVERY_SERVER_VARIABLE = "ROS_DISCOVERY_SERVER"
PROFILES_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
#: Fast DDS profile variables a user may have set (the second is Fast DDS 2's name).
USER_PROFILES_VARIABLES = (PROFILES_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE")
DOMAIN_ID_VARIABLE = "ROS_DOMAIN_ID"
#: ROS 2's domain id where ``ROS_DOMAIN_ID`` is unset.
ROS_DEFAULT_DOMAIN_ID = 0
RMW_VARIABLE = "RMW_IMPLEMENTATION"
#: The middleware rl_ros2 is built and tested on; a caller's other choice is kept, with a note.
RMW_IMPLEMENTATION = "rmw_fastrtps_cpp"

_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_HOST_LABEL}(?:\.{_HOST_LABEL})*$")


def parse_domain_id(value: int | str, source: str = "domain_id",
                    maximum: int = MAX_DOMAIN_ID) -> int:
    """Validate a ROS domain id given as int or text.

    :param value: the value.
    :param source: what the value came from, for the error message.
    :param maximum: the highest id accepted (:data:`MAX_INHERITED_DOMAIN_ID` for the caller's
        ``ROS_DOMAIN_ID``).
    :raises PlanError: when it is not an integer in ``MIN_DOMAIN_ID..maximum``.
    """
    message = f"{source} must be an integer from {MIN_DOMAIN_ID} to {maximum}, got {value!r}"
    if isinstance(value, bool):
        raise PlanError(message)
    try:
        domain_id = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise PlanError(message) from None
    if not MIN_DOMAIN_ID <= domain_id <= maximum:
        raise PlanError(message)
    return domain_id


def discovery_environment(discovery: str, environ: Mapping[str, str] | None = None
                          ) -> tuple[dict[str, str], list[str]]:
    """Environment variables and notes for a discovery setting.

    * ``localhost`` (default): ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; nothing leaves the
      machine (docs/architecture.md, "Network safety").
    * ``subnet``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``; multicast discovery on the local
      subnet, an explicit multi-host choice.
    * ``server:HOST:PORT``: ``ROS_DISCOVERY_SERVER=HOST:PORT`` and the range left to the
      middleware (``SYSTEM_DEFAULT``): Fast DDS then runs as a discovery-server client that
      discovers by unicast to the server only. (In tests across network namespaces a client
      with a ``LOCALHOST`` range still reached the server, but what the range means with a
      discovery server is the middleware's business, so the plan states none.)

    Both multi-host settings also set ``FASTDDS_DEFAULT_PROFILES_FILE`` to
    ``config/fastdds_multihost.xml``: UDPv4 with non-blocking sends, so that a process whose link
    drops keeps running (see the file). A Fast DDS profile the user set in ``environ`` (default
    ``os.environ``) is kept instead, with a note.

    :raises PlanError: naming the valid forms.
    """
    environ = os.environ if environ is None else environ
    valid = (f"valid: {CALLER_DISCOVERY}, localhost, subnet, server:HOST:PORT "
             f"(e.g. server:127.0.0.1:11811)")
    text = discovery.strip()
    lowered = text.lower()
    if lowered == "localhost":
        return {DISCOVERY_RANGE_VARIABLE: "LOCALHOST"}, []
    if lowered == "subnet":
        profile, notes = _multihost_profile(environ)
        return {DISCOVERY_RANGE_VARIABLE: "SUBNET", **profile}, [
            "discovery:=subnet: DDS discovery multicasts on the local subnet (multi-host); "
            "use it only on a network meant for this run", *notes
        ]
    if lowered.startswith("server:"):
        parts = text.split(":")
        if len(parts) != 3:
            raise PlanError(f"bad discovery {discovery!r}: expected server:HOST:PORT; {valid}")
        _, host, port_text = parts
        if not _is_host(host):
            raise PlanError(
                f"bad discovery {discovery!r}: {host!r} is not an IPv4 address or host name; "
                f"{valid}"
            )
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not 1 <= port <= 65535:
            raise PlanError(f"bad discovery {discovery!r}: port must be 1..65535; {valid}")
        profile, notes = _multihost_profile(environ)
        environment = {
            DISCOVERY_SERVER_VARIABLE: f"{host}:{port}",
            DISCOVERY_RANGE_VARIABLE: "SYSTEM_DEFAULT",
            **profile,
        }
        return environment, [
            f"discovery:={text}: start the Fast DDS discovery server first, on {host}: "
            f"{shlex.join(discovery_server_argv(host, port))}",
            f"tools attaching to this run need {DISCOVERY_SERVER_VARIABLE}={host}:{port} "
            f"(and ROS_SUPER_CLIENT=TRUE for ros2 topic list / rqt_graph)",
            *notes,
        ]
    raise PlanError(f"bad discovery {discovery!r}; {valid}")


def caller_discovery(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The discovery of a run given no ``discovery:=``: the caller's
    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` and ``ROS_DISCOVERY_SERVER`` as they are, else the
    loopback (:data:`DEFAULT_DISCOVERY`), said in a note with how to widen it."""
    inherited = {name: environ[name].strip() for name in
                 (DISCOVERY_RANGE_VARIABLE, DISCOVERY_SERVER_VARIABLE)
                 if environ.get(name, "").strip()}
    if inherited:
        kept = " ".join(f"{name}={value}" for name, value in inherited.items())
        return inherited, [f"discovery follows your environment: {kept}"]
    environment, _ = discovery_environment(DEFAULT_DISCOVERY, environ)
    return environment, [
        f"{DISCOVERY_RANGE_VARIABLE} is not set: this run stays on the loopback "
        f"({DISCOVERY_RANGE_VARIABLE}=LOCALHOST); to reach other hosts export "
        f"{DISCOVERY_RANGE_VARIABLE}=SUBNET or give discovery:=subnet|server:HOST:PORT"]


def _multihost_profile(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``FASTDDS_DEFAULT_PROFILES_FILE`` of multi-host discovery settings, or, when ``environ``
    holds a profile of the user's, nothing and a note."""
    try:
        profile = str(paths.fastdds_multihost_profile())
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None
    users = [name for name in USER_PROFILES_VARIABLES if environ.get(name)]
    if not users:
        return {PROFILES_VARIABLE: profile}, []
    return {}, [
        f"{users[0]} is set in your environment: your Fast DDS profile is kept instead of "
        f"{profile}; give its UDP transport <non_blocking_send>true</non_blocking_send>, or a "
        f"robot whose link drops stops inside its next publish until the link returns"
    ]


def discovery_server_argv(listen_address: str, port: int) -> list[str]:
    """The command line of a Fast DDS discovery server (server id 0, the first and only entry of
    ``ROS_DISCOVERY_SERVER``) listening on ``listen_address:port`` over UDP."""
    return ["fastdds", "discovery", "-i", "0", "-l", listen_address, "-p", str(port)]


def _is_host(host: str) -> bool:
    """Whether ``host`` is an IPv4 address or a DNS host name."""
    try:
        ipaddress.IPv4Address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


def _choose_domain_id(
    domain_id: int | str | None, environ: Mapping[str, str], rng: random.Random | None,
    random_domain: bool,
) -> tuple[int, str]:
    """The domain id of a run and where it came from (``argument``, ``environment``, ``random``
    or ``ros_default``)."""
    if domain_id is not None and str(domain_id).strip() != "":
        return parse_domain_id(domain_id), "argument"
    inherited = environ.get(DOMAIN_ID_VARIABLE, "").strip()
    if inherited:
        source = f"{DOMAIN_ID_VARIABLE} in the environment"
        return (parse_domain_id(inherited, source=source, maximum=MAX_INHERITED_DOMAIN_ID),
                "environment")
    if not random_domain:
        return ROS_DEFAULT_DOMAIN_ID, "ros_default"
    # A per-run pick keeps concurrent runs (and CI jobs) on one machine out of each other's graphs.
    picker = rng if rng is not None else random.SystemRandom()
    return picker.randint(*RANDOM_DOMAIN_ID_RANGE), "random"


def run_environment(discovery: str, domain_id: int | str | None, environ: Mapping[str, str],
                    rng: random.Random | None, random_domain: bool = True,
                    ) -> tuple[dict[str, str], int, str, list[str]]:
    """The environment every process shares (domain id, discovery), the chosen domain id and
    where it came from, and the notes the choice raises.

    :param discovery: a setting of :func:`discovery_environment`, or :data:`CALLER_DISCOVERY`
        (:func:`caller_discovery`).
    :param random_domain: with neither ``domain_id`` nor ``ROS_DOMAIN_ID``, pick a domain at
        random (``rl-bringup``) rather than ROS's default 0 (``ros2 launch``).
    """
    text = str(discovery).strip()
    discovery_env, notes = (caller_discovery(environ) if text.lower() == CALLER_DISCOVERY
                            else discovery_environment(text, environ))
    chosen_domain_id, domain_id_source = _choose_domain_id(domain_id, environ, rng,
                                                           random_domain)
    if chosen_domain_id > MAX_DOMAIN_ID:
        notes.append(
            f"{DOMAIN_ID_VARIABLE}={chosen_domain_id} is above {MAX_DOMAIN_ID}: its DDS ports lie "
            f"in Linux's ephemeral port range and may clash with other programs' ports"
        )
    rmw = environ.get(RMW_VARIABLE, "").strip()
    if rmw and rmw != RMW_IMPLEMENTATION:
        notes.append(
            f"{RMW_VARIABLE}={rmw} is kept; rl_ros2 is tested on {RMW_IMPLEMENTATION}, and "
            f"discovery:=subnet|server:HOST:PORT need it (their profile is Fast DDS's)")
    environment: dict[str, str] = {
        DOMAIN_ID_VARIABLE: str(chosen_domain_id),
        # Node output goes through pipes (supervisor) or launch; unbuffered keeps logs timely.
        "PYTHONUNBUFFERED": "1",
        **discovery_env,
    }
    if DISCOVERY_SERVER_VARIABLE not in discovery_env and environ.get(DISCOVERY_SERVER_VARIABLE):
        notes.append(
            f"{DISCOVERY_SERVER_VARIABLE} is set in your environment and is inherited by every "
            f"process; unset it for discovery:={text}"
        )
    return environment, chosen_domain_id, domain_id_source, notes
