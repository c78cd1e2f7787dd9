"""The ``key:=value`` arguments of a deployment, shared by both front ends.

``ros2 launch rl_bringup MODE.launch.py key:=value ...`` (through :mod:`rl_bringup.launch_helpers`)
and ``rl-bringup launch|train|plan MODE key:=value ...`` (:mod:`rl_bringup.cli`) take the same
arguments and turn them into a plan with :func:`plan_from_arguments`:

* the deployment arguments of :data:`DEPLOYMENT_ARGUMENTS` (robots, config, domain, ...);
* any node parameter (:data:`PARAMETER_KEYS`, e.g. ``total_env_steps:=20000``), parsed as YAML
  as ``ros2 launch`` and rcl do, which overrides the scenario file for every node that declares it.

An empty value means "not given" in both front ends: launch arguments cannot be left out, so the
launch files declare every key with an empty default.

Leaf module: it imports neither ``launch`` nor the CLI.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

import yaml

from rl_bringup.plan.autoscale import KEY_PREFIX as AUTOSCALE_KEY_PREFIX
from rl_bringup.plan.autoscale import TUNING_FIELDS as AUTOSCALE_FIELDS
from rl_bringup.plan.deployment import DEFAULT_CONFIG, MAX_ROBOTS, MIN_ROBOTS, Plan, make_plan
from rl_bringup.plan.discovery import CALLER_DISCOVERY, MAX_DOMAIN_ID, MIN_DOMAIN_ID
from rl_bringup.plan.layouts import DEFAULT_POLICY_LAYOUT, POLICY_LAYOUTS
from rl_core.config import NODE_CONFIGS, RENAMED_PARAMETERS, renamed

# name -> (default value, description). Defaults are text: launch arguments are substitutions.
DEPLOYMENT_ARGUMENTS: dict[str, tuple[str, str]] = {
    "robots": (
        "1",
        f"Number of robots ({MIN_ROBOTS}..{MAX_ROBOTS}); robot k runs in namespace /robot_k. "
        "rl-bringup launch also takes auto: elastic robots (hybrid; docs/elastic.md).",
    ),
    "config": (
        DEFAULT_CONFIG,
        "Parameter file: a path, or a name in rl_bringup's config folder (cartpole, kuka_reach).",
    ),
    "output_dir": (
        "",
        "Folder for the trainer's checkpoints and results (trainer parameter output_dir); "
        "empty: the trainer's default.",
    ),
    "domain_id": (
        "",
        f"ROS_DOMAIN_ID of the run ({MIN_DOMAIN_ID}..{MAX_DOMAIN_ID}); empty: the caller's "
        f"ROS_DOMAIN_ID as is, else ROS's default 0 (ros2 launch) or a random pick in 1..100 "
        f"(rl-bringup, which prints it with the line to attach ros2/rviz/rqt).",
    ),
    "discovery": (
        CALLER_DISCOVERY,
        f"DDS discovery: {CALLER_DISCOVERY} (your ROS_AUTOMATIC_DISCOVERY_RANGE / "
        "ROS_DISCOVERY_SERVER; where neither is set, localhost), localhost (nothing leaves the "
        "machine), subnet (multicast on the local subnet), or server:HOST:PORT (Fast DDS "
        "discovery server).",
    ),
    "cpus": (
        "",
        "CPU sets per node kind: auto (acting and learning nodes on separate halves of the "
        "cores), none, or 'KIND=LIST;...' (e.g. 'simulator=0;policy=0;replay_buffer=1;"
        "trainer=1'); empty: the config's /rl_bringup block, else none.",
    ),
    "policy_layout": (
        DEFAULT_POLICY_LAYOUT,
        f"Where inference runs ({', '.join(POLICY_LAYOUTS)}): per_robot, a policy node in each "
        "robot's namespace; central, one policy node /policy serving every robot with one "
        "batched forward pass (get_action at /policy/get_action).",
    ),
    "robot_interface": (
        "",
        "How simulators reach their robots: in_process (step gymnasium envs in the node, the "
        "fastest path) or ros2_control (joint_states in, a ros2_control controller's commands "
        "out; docs/robots.md); empty: the config's, else in_process.",
    ),
    "sim_robot": (
        "true",
        "With robot_interface:=ros2_control: start a pybullet sim_robot per robot behind "
        "ros2_control's topics (true), or bring your own robots (false: mock hardware, Gazebo, "
        "real arms).",
    ),
    "task": (
        "",
        "What every node learns (their env_id): a gymnasium id, 'module:Id', or a task's entry "
        "point 'my_package.tasks:Reach' (robot_interface:=ros2_control); empty: the config's.",
    ),
    "use_sim_time": (
        "false",
        "Every node follows /clock (robot 0's sim_robot, or Gazebo through ros_gz_bridge).",
    ),
    "autostart": (
        "true",
        "Every node configures and activates itself at start (lifecycle nodes); false leaves "
        "them unconfigured for an orchestrator or `ros2 lifecycle set` (docs/lifecycle.md).",
    ),
    "namespace": (
        "",
        "Namespace of the whole deployment: robot k in /NAMESPACE/robot_k, the learner nodes in "
        "/NAMESPACE, and the shared topics (/experience, /policy_weights, /diagnostics, /tf, ...) "
        "remapped under it, so that deployments share a domain; empty: none. ros2 launch adds a "
        "namespace pushed by an including launch file (PushRosNamespace) in front.",
    ),
    "log_level": (
        "",
        "Log level of every node: debug, info, warn, error or fatal; empty: rcl's default (info).",
    ),
    "params_file": (
        "",
        "A parameter file of yours (ros__parameters blocks per node, /** for all), layered over "
        "the config's; NAME:=VALUE arguments still win. Empty: none.",
    ),
    "weights_key": (
        "",
        "File holding the hex key that signs the policy weights (give every host of a multi-host "
        "run the same); empty: RL_ROS2_WEIGHTS_KEY(_FILE) from the environment, else a fresh "
        "key per run.",
    ),
}
DEPLOYMENT_KEYS: tuple[str, ...] = tuple(DEPLOYMENT_ARGUMENTS)
#: With ``robots:=auto`` (``rl-bringup launch|plan`` only: ``ros2 launch`` cannot scale): the
#: elastic range and the autoscaler's settings (:class:`.autoscale.AutoscaleSettings`).
ELASTIC_KEYS: tuple[str, ...] = ("min_robots", "max_robots",
                                 *(AUTOSCALE_KEY_PREFIX + name for name in AUTOSCALE_FIELDS))

#: Node parameters the plan sets itself (from ``robots``); not overridable.
PLAN_PARAMETERS: frozenset[str] = frozenset({"deployment_robots"})


def _parameter_fields() -> dict[str, list[tuple[str, dataclasses.Field[Any]]]]:
    """``name -> [(node kind, field), ...]`` of every node parameter."""
    fields: dict[str, list[tuple[str, dataclasses.Field[Any]]]] = {}
    for kind, classes in NODE_CONFIGS.items():
        for cls in classes:
            for field in dataclasses.fields(cls):
                fields.setdefault(field.name, []).append((kind, field))
    return fields


_PARAMETER_FIELDS = _parameter_fields()
#: Node parameters that may be overridden as ``name:=value`` (``total_env_steps:=2000``).
#: Former names (RENAMED_PARAMETERS) still work, with a warning.
PARAMETER_KEYS: tuple[str, ...] = tuple(sorted(
    set(_PARAMETER_FIELDS) - set(DEPLOYMENT_KEYS) - set(ELASTIC_KEYS) - PLAN_PARAMETERS)
    + sorted(RENAMED_PARAMETERS))


def parameter_keys_by_node() -> tuple[str, ...]:
    """:data:`PARAMETER_KEYS` grouped by the first node kind that declares each (simulator,
    policy, replay_buffer, trainer, ... in :data:`rl_core.config.NODE_CONFIGS` order), sorted
    within a kind; the former names last (``--show-args``)."""
    kinds = list(NODE_CONFIGS)
    current = [name for name in PARAMETER_KEYS if name not in RENAMED_PARAMETERS]
    current.sort(key=lambda name: (kinds.index(_PARAMETER_FIELDS[name][0][0]), name))
    return (*current, *sorted(RENAMED_PARAMETERS))


def parameter_description(name: str) -> str:
    """What ``--show-args`` says about the override of node parameter ``name``."""
    if name in RENAMED_PARAMETERS:
        return f"Deprecated: renamed to {RENAMED_PARAMETERS[name]}."
    entries = _PARAMETER_FIELDS[name]
    kinds = ", ".join(dict.fromkeys(kind for kind, _ in entries))
    description = entries[0][1].metadata.get("description", "").rstrip(".")
    return (f"Node parameter ({kinds}): {description}. Empty: the value in the config file "
            f"(or the node's default).")


def parse_parameter_value(name: str, text: str) -> Any:
    """Parse ``name:=text`` as YAML, as ros2 launch does, with ints widened for float parameters
    (ROS parameters are strictly typed: ``max_rate_hz:=50`` must reach the node as 50.0)."""
    value = yaml.safe_load(text)
    defaults = [field.default for _, field in _PARAMETER_FIELDS.get(name, [])]
    if (any(isinstance(default, float) for default in defaults) and isinstance(value, int)
            and not isinstance(value, bool)):
        return float(value)
    return value


def default_output_dir(mode: str) -> str:
    """The run directory of a launch that names none: ``runs/<mode>-<time>-<pid>`` in the
    working directory. Every launch has one, so the trainer's checkpoints and the replay
    buffer's snapshots (crash safety) are never off; a respawned node finds them there."""
    return os.path.abspath(f"runs/{mode}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")


def plan_from_arguments(mode: str, values: Mapping[str, str], random_domain: bool = True
                        ) -> Plan:
    """Build the plan of ``MODE key:=value ...``.

    :param mode: the deployment mode.
    :param values: text values by key: deployment arguments, elastic settings and node
        parameters; other keys are ignored (the caller decides whether they are errors), and so
        are empty values.
    :raises rl_bringup.plan.deployment.PlanError: for invalid values.
    """
    given = {key: value for key, value in values.items() if str(value).strip() != ""}
    overrides = renamed({key: value for key, value in given.items() if key in PARAMETER_KEYS})
    overrides = {key: parse_parameter_value(key, value) for key, value in overrides.items()}
    return make_plan(
        mode,
        robots=given.get("robots", DEPLOYMENT_ARGUMENTS["robots"][0]),
        config=given.get("config", DEFAULT_CONFIG),
        output_dir=given.get("output_dir") or default_output_dir(mode),
        domain_id=given.get("domain_id"),
        discovery=given.get("discovery", CALLER_DISCOVERY),
        extra_parameters=overrides or None,
        cpus=given.get("cpus"),
        policy_layout=given.get("policy_layout", DEFAULT_POLICY_LAYOUT),
        autoscale={key: given[key] for key in ELASTIC_KEYS if key in given} or None,
        robot_interface=given.get("robot_interface"),
        sim_robot=given.get("sim_robot", "true"),
        task=given.get("task"),
        use_sim_time=given.get("use_sim_time", "false"),
        namespace=given.get("namespace"),
        log_level=given.get("log_level"),
        params_file=given.get("params_file"),
        autostart=given.get("autostart", "true"),
        random_domain=random_domain,
    )
