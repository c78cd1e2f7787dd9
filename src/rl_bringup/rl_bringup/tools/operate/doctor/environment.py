"""Checks of the environment ``rl-bringup doctor`` runs in: rclpy and the RMW,
``ROS_DOMAIN_ID``, the discovery range, ``/dev/shm``. Only :func:`check_rclpy` imports rclpy; the
others read a mapping of variables, so they are tested without ROS.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rl_bringup.plan.deployment import PlanError
from rl_bringup.plan.discovery import (
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_SERVER_VARIABLE,
    DOMAIN_ID_VARIABLE,
    MAX_DOMAIN_ID,
    MAX_INHERITED_DOMAIN_ID,
    RMW_IMPLEMENTATION,
    parse_domain_id,
)
from rl_bringup.run.ros_session import SUPER_CLIENT_VARIABLE
from rl_bringup.tools.operate.doctor.report import Check, Level

#: Below this much free space in /dev/shm large messages may not fit Fast DDS' segments.
MIN_SHM_FREE_BYTES = 64 * 1024 * 1024
SHM_PATH = "/dev/shm"


def check_rclpy() -> tuple[list[Check], str | None]:
    """Rclpy imports and an RMW implementation loads; returns the checks and the RMW name."""
    try:
        import rclpy  # noqa: F401, PLC0415
        from rclpy.utilities import get_rmw_implementation_identifier  # noqa: PLC0415

        identifier = get_rmw_implementation_identifier()
    except Exception as error:  # noqa: BLE001 - ImportError, or rmw_implementation failing to load the RMW
        return [Check(Level.FAIL, "rclpy", f"cannot import rclpy or load the RMW: {error}",
                      "install the project into a virtualenv (scripts/setup.sh) and use its "
                      "python, or source your ROS 2 install (source /opt/ros/kilted/setup.bash); "
                      "if RMW_IMPLEMENTATION names an RMW that is not installed, unset it")], None
    return [Check(Level.PASS, "rclpy", f"rclpy imports, RMW {identifier} loads")], identifier


def check_rmw(environ: Mapping[str, str], identifier: str | None) -> Check:
    """``RMW_IMPLEMENTATION``: deployments keep the caller's, and rl_ros2 is tested on
    rmw_fastrtps_cpp; mixing RMWs breaks discovery of some endpoints and shared memory."""
    chosen = environ.get("RMW_IMPLEMENTATION", "")
    effective = chosen or identifier or "the default"
    if effective == RMW_IMPLEMENTATION:
        source = "RMW_IMPLEMENTATION" if chosen else "the default RMW"
        return Check(Level.PASS, "rmw", f"{source} is {RMW_IMPLEMENTATION}, the RMW rl_ros2 is "
                     f"tested on")
    return Check(Level.WARN, "rmw", f"this shell uses {effective}; rl_ros2 is tested on "
                 f"{RMW_IMPLEMENTATION}, and a run started with another RMW does not reliably "
                 f"talk to this shell's tools",
                 f"export RMW_IMPLEMENTATION={RMW_IMPLEMENTATION}")


def check_domain_id(values: Mapping[str, str], environ: Mapping[str, str]) -> Check:
    """``ROS_DOMAIN_ID`` set (or ``domain_id:=`` given) and in 0..101 (102..232 work, with a
    warning: the launches use the caller's domain as is)."""
    if values.get("domain_id", "").strip():
        return Check(Level.PASS, "domain id", f"domain_id:={values['domain_id']} given")
    text = environ.get(DOMAIN_ID_VARIABLE, "").strip()
    if not text:
        return Check(Level.WARN, "domain id",
                     f"{DOMAIN_ID_VARIABLE} is not set: this shell uses domain 0, while "
                     f"rl-bringup launch picks a random domain for each run unless given one",
                     "run the 'export ROS_DOMAIN_ID=...' line the launch header prints, or pass "
                     "domain_id:=N (to the launch and to the tools)")
    fix = (f"export {DOMAIN_ID_VARIABLE}=N with N from 0 to {MAX_DOMAIN_ID} (higher ids push DDS "
           f"ports into the ephemeral range)")
    try:
        domain_id = parse_domain_id(text, source=DOMAIN_ID_VARIABLE,
                                    maximum=MAX_INHERITED_DOMAIN_ID)
    except PlanError as error:
        return Check(Level.FAIL, "domain id", str(error), fix)
    if domain_id > MAX_DOMAIN_ID:
        # The launches use the caller's domain as is, so this one works, with a risk.
        return Check(Level.WARN, "domain id", f"{DOMAIN_ID_VARIABLE}={domain_id} is above "
                     f"{MAX_DOMAIN_ID}: its DDS ports lie in the ephemeral port range", fix)
    return Check(Level.PASS, "domain id", f"{DOMAIN_ID_VARIABLE}={domain_id}")


def check_discovery(values: Mapping[str, str], environ: Mapping[str, str]) -> list[Check]:
    """Discovery stays on this machine unless multi-host was chosen explicitly."""
    localhost_fix = (f"export {DISCOVERY_RANGE_VARIABLE}=LOCALHOST (the default of rl-bringup "
                     f"launch and tools); for several hosts choose discovery:=subnet or a "
                     f"discovery server explicitly (docs/multihost.md)")
    if values.get("discovery", "").strip():
        return [Check(Level.PASS, "discovery", f"discovery:={values['discovery']} given "
                      f"(an explicit choice)")]
    checks: list[Check] = []
    if environ.get("ROS_LOCALHOST_ONLY"):
        checks.append(Check(Level.WARN, "discovery", "ROS_LOCALHOST_ONLY is set; it is "
                            f"deprecated and overridden by {DISCOVERY_RANGE_VARIABLE}",
                            "unset ROS_LOCALHOST_ONLY; " + localhost_fix))
    server = environ.get(DISCOVERY_SERVER_VARIABLE, "")
    value = environ.get(DISCOVERY_RANGE_VARIABLE, "")
    if server:
        checks.append(Check(Level.PASS, "discovery", f"{DISCOVERY_SERVER_VARIABLE}={server} "
                            f"(discovery server: an explicit multi-host choice)"))
        if environ.get(SUPER_CLIENT_VARIABLE, "").upper() != "TRUE":
            checks.append(Check(Level.WARN, "discovery", f"{SUPER_CLIENT_VARIABLE} is not TRUE: "
                                f"a plain discovery-server client does not see the whole graph "
                                f"(node and topic lists stay incomplete)",
                                f"export {SUPER_CLIENT_VARIABLE}=TRUE for introspection tools, "
                                f"or pass discovery:=server:HOST:PORT to the rl-bringup tools"))
        return checks
    if value == "LOCALHOST":
        checks.append(Check(Level.PASS, "discovery", f"{DISCOVERY_RANGE_VARIABLE}=LOCALHOST"))
    elif not value:
        checks.append(Check(Level.WARN, "discovery",
                            f"{DISCOVERY_RANGE_VARIABLE} is not set: other ROS 2 programs in "
                            f"this shell multicast discovery on the subnet (ROS 2's default); "
                            f"rl-bringup tools use LOCALHOST", localhost_fix))
    elif value in ("SUBNET", "SYSTEM_DEFAULT"):
        checks.append(Check(Level.WARN, "discovery",
                            f"{DISCOVERY_RANGE_VARIABLE}={value}: DDS discovery multicasts out "
                            f"of every interface", localhost_fix))
    elif value == "OFF":
        checks.append(Check(Level.FAIL, "discovery", f"{DISCOVERY_RANGE_VARIABLE}=OFF: no "
                            f"discovery at all, not even on this machine", localhost_fix))
    else:
        checks.append(Check(Level.FAIL, "discovery", f"{DISCOVERY_RANGE_VARIABLE}={value!r} is "
                            f"not one of LOCALHOST, SUBNET, OFF, SYSTEM_DEFAULT", localhost_fix))
    return checks


def check_shared_memory(path: str = SHM_PATH) -> Check:
    """``/dev/shm`` exists, is writable and has room (Fast DDS' shared-memory transport)."""
    fix_container = ("in a container run it with --shm-size=1g (or --ipc=host); on a host, "
                     "mount a tmpfs on /dev/shm")
    folder = Path(path)
    if not folder.is_dir():
        return Check(Level.FAIL, "shared memory", f"{path} does not exist: Fast DDS cannot use "
                     f"its shared-memory transport", fix_container)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix="rl_bringup_doctor_") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
    except OSError as error:
        return Check(Level.FAIL, "shared memory", f"{path} is not writable ({error}): Fast DDS "
                     f"falls back to UDP and large messages slow down or fail",
                     f"make {path} writable for this user (mode 1777); {fix_container}")
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    if free < MIN_SHM_FREE_BYTES:
        return Check(Level.WARN, "shared memory", f"{path} has only {free / 2**20:.0f} MiB free: "
                     f"policy weights and experience batches may not fit Fast DDS' segments",
                     f"{fix_container}; remove stale segments with 'fastdds shm clean'")
    return Check(Level.PASS, "shared memory", f"{path} writable, {free / 2**20:.0f} MiB free")
