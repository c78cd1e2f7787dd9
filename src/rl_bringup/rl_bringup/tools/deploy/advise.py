"""``rl-bringup advise``: measure a scenario's costs and recommend a deployment mode.

Usage::

    rl-bringup advise [config:=cartpole] [samples:=2000] [robots:=1] [elastic:=false] [dds:=true]
                      [compare:=FILE]

It measures, on this machine and for the scenario's ``env_id``, ``num_envs`` and
``hidden_sizes``, the environment step time per env, the policy inference time per batch and
(unless ``dds:=false``) the round trip of a small message over DDS, and applies the selection
rule of the mode table in docs/architecture.md (:func:`recommend`). Where a measured comparison
of the modes exists for the scenario (``rl-bringup compare``'s ``compare.json``: by default
``config/compare_<config>.json``, or ``compare:=FILE``), the recommendation comes from it instead
(:func:`recommend_from_comparison`): the mode that finished the budget soonest while learning as
well as the bare loop. How each figure is measured: docs/tools.md, "advise".
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from rl_bringup.plan.deployment import DEFAULT_CONFIG
from rl_bringup.plan.discovery import DISCOVERY_RANGE_VARIABLE
from rl_bringup.run.ros_session import TOOL_NODE_PREFIX, RosSession
from rl_bringup.tools.common import format_duration, load_config, silence_native_stdout
from rl_bringup.tools.subcommand import SubparsersAction, ToolError, add_tool, bool_value, int_value

COMMAND = "advise"
KEYS: tuple[str, ...] = ("config", "samples", "robots", "elastic", "dds", "compare")
#: A mode counts as learning as well as the bare loop at this fraction of its evaluation return.
MIN_SAMPLE_EFFICIENCY = 0.9
DEFAULT_SAMPLES = 2000
#: Costs this many times apart or more count as "orders of magnitude apart" (one order = 10x).
DEFAULT_RATIO_THRESHOLD = 10.0
#: Most ping-pongs the DDS measurement makes; each takes about a millisecond.
MAX_DDS_SAMPLES = 200
DDS_TIMEOUT_S = 5.0
MODES = ("colocated", "decoupled", "hybrid")


@dataclass(frozen=True)
class Recommendation:
    """A deployment mode and why it fits.

    :param mode: ``colocated``, ``decoupled`` or ``hybrid``.
    :param reason: one or two sentences with the figures that decided it.
    """

    mode: str
    reason: str


def cost_ratio(first_s: float, second_s: float) -> float:
    """How many times the larger of two positive durations is the smaller (>= 1)."""
    return max(first_s, second_s) / min(first_s, second_s)


def format_ratio(ratio: float) -> str:
    """``6.4x``, ``10.9x``, ``1,000x``: three significant digits, never exponent notation."""
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def recommend(env_step_s: float, inference_s: float, robots: int = 1, *, num_envs: int = 1,
              elastic: bool = False, dds_round_trip_s: float | None = None,
              ratio_threshold: float = DEFAULT_RATIO_THRESHOLD) -> Recommendation:
    """Pick a deployment mode by the selection rule of docs/architecture.md's mode table.

    One robot's step costs ``env_step_s * num_envs`` in the simulator and ``inference_s`` in the
    policy. The rule:

    * ``elastic`` (robots, policies or learners added and moved across hosts at run time) ->
      decoupled;
    * the two costs ``ratio_threshold`` times apart or more (orders of magnitude) -> decoupled:
      the expensive side gets its own process and hardware (e.g. batched inference on a GPU host);
    * the same order of magnitude and one robot -> colocated: one process, zero-copy hand-off,
      lowest latency;
    * the same order of magnitude and several robots -> hybrid: each robot keeps simulator and
      policy in one process (no DDS message per step) and all feed one central learner.

    :param env_step_s: seconds per environment step of one env.
    :param inference_s: seconds per policy forward pass over a batch of ``num_envs``.
    :param robots: how many robots (simulators) the run has or will have.
    :param num_envs: environments per simulator, i.e. the inference batch.
    :param elastic: whether the deployment must scale elastically.
    :param dds_round_trip_s: a measured DDS round trip, quoted in the reason when given.
    :param ratio_threshold: the cost ratio from which the costs count as orders apart.
    :raises ValueError: on non-positive or non-finite durations, ``robots`` or ``num_envs`` < 1,
        or ``ratio_threshold`` <= 1.
    """
    for name, value in (("env_step_s", env_step_s), ("inference_s", inference_s)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive duration in seconds, got {value!r}")
    if dds_round_trip_s is not None and not (math.isfinite(dds_round_trip_s)
                                             and dds_round_trip_s > 0):
        raise ValueError(f"dds_round_trip_s must be positive or None, got {dds_round_trip_s!r}")
    if robots < 1 or num_envs < 1:
        raise ValueError(f"robots and num_envs must be >= 1, got {robots} and {num_envs}")
    if not ratio_threshold > 1:
        raise ValueError(f"ratio_threshold must be > 1, got {ratio_threshold!r}")

    simulator_s = env_step_s * num_envs
    ratio = cost_ratio(simulator_s, inference_s)
    times = format_ratio(ratio)
    envs = f"{num_envs} env{'s' if num_envs != 1 else ''}"
    costs = (f"simulator step {format_duration(simulator_s)} per batch of {envs}, inference "
             f"{format_duration(inference_s)} per batch")
    robots_text = f"{robots} robot{'s' if robots != 1 else ''}"
    dds_note = ""
    if dds_round_trip_s is not None:
        dds_note = (f" A DDS round trip ({format_duration(dds_round_trip_s)}) costs "
                    f"{dds_round_trip_s / (simulator_s + inference_s):.1f}x the work of one step")

    def with_dds(ending: str) -> str:
        return dds_note + ending if dds_note else ""

    if elastic:
        return Recommendation("decoupled", (
            f"elastic scale asked for ({robots_text}; {costs}): one process per node lets "
            "simulators, policies and learners be added, moved to other hosts or restarted "
            "independently." + with_dds("; batch envs per message to amortise it.")))
    if ratio >= ratio_threshold:
        slower = "inference" if inference_s > simulator_s else "the simulator step"
        return Recommendation("decoupled", (
            f"{costs}: {slower} costs {times} the other ({math.log10(ratio):.1f} orders of "
            f"magnitude, threshold {format_ratio(ratio_threshold)}), so run each node in its own "
            f"process and give {slower} its own hardware or more instances ({robots_text})."
            + with_dds("; batch envs per message to amortise it.")))
    if robots > 1:
        return Recommendation("hybrid", (
            f"{robots_text} with one central learner, and per robot {costs}: the same order of "
            f"magnitude ({times}). Keep each robot's simulator and policy in one process "
            "(zero-copy, no DDS message per step) and share one replay buffer + trainer process "
            "over DDS (Ape-X / IMPALA shape)." + with_dds(", paid per step if decoupled.")))
    return Recommendation("colocated", (
        f"{costs}: the same order of magnitude ({times}), so neither side waits long for the "
        "other and one process with the zero-copy hand-off is fastest (lowest latency, one "
        "machine)." + with_dds(", which colocated mode never pays per step.")))


def recommend_from_comparison(document: dict[str, Any], robots: int = 1) -> Recommendation | None:
    """Pick the mode a measured comparison (``compare.json``) shows to be best.

    Among the ROS modes whose evaluation return reached ``MIN_SAMPLE_EFFICIENCY`` of the bare
    loop's, the one with the shortest wall time for the budget wins; colocated stands for one
    robot only, so with ``robots > 1`` it competes only when nothing else qualifies.

    :returns: None when the document holds no qualifying row.
    """
    rows = [row for row in document.get("rows", []) if row.get("mode") in MODES
            and row.get("wall_time_s") is not None and row.get("completed")]
    good = [row for row in rows if (row.get("sample_efficiency") or 0.0) >= MIN_SAMPLE_EFFICIENCY]
    if robots > 1:
        good = [row for row in good if row["mode"] != "colocated"] or good
    if not good:
        return None
    best = min(good, key=lambda row: row["wall_time_s"])
    figures = "; ".join(
        f"{row['mode']} (robots {row.get('robots', 1)}): {row['wall_time_s']:.0f} s, eval "
        f"{(row.get('eval_return') or float('nan')):.0f}, x bare "
        f"{(row.get('wall_time_x_bare') or float('nan')):.2f}" for row in rows)
    return Recommendation(best["mode"], (
        f"measured (rl-bringup compare, {document.get('settings', {}).get('total_env_steps', '?')} "
        f"env steps per run): {best['mode']} finished the budget soonest among the modes that "
        f"learned as well as the bare loop ({figures})."))


def load_comparison(path: str) -> dict[str, Any]:
    """Read a ``compare.json``; a missing or malformed file is a ToolError naming it."""
    import json

    try:
        document = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as error:
        raise ToolError(f"compare:={path}: cannot read a comparison ({error}); run "
                        "rl-bringup compare json:=FILE first") from error
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list):
        raise ToolError(f"compare:={path} is not a compare.json (no 'rows' list)")
    return document


def default_comparison(config_value: str) -> str | None:
    """The shipped comparison for a scenario (``config/compare_<name>.json``), if any."""
    from rl_bringup.plan.paths import config_directory

    name = os.path.splitext(os.path.basename(config_value))[0]
    try:
        path = config_directory() / f"compare_{name}.json"
    except FileNotFoundError:
        return None
    return str(path) if path.is_file() else None


# --- measurements --------------------------------------------------------------------------------


def measure_env_step(env_id: str, num_envs: int, samples: int, seed: int = 0) -> float:
    """Mean seconds per environment step of one env, stepping ``num_envs`` envs together.

    :param samples: timed vector steps (after ``samples // 10`` untimed warm-up steps).
    """
    import numpy as np

    from rl_core.envs import VectorEnv
    from rl_core.envs.spaces import random_actions

    warm_up = max(1, samples // 10)
    with silence_native_stdout():  # pybullet prints "argv[0]=" for every client it connects
        envs = VectorEnv(env_id, num_envs)
    with envs:
        actions = random_actions(np.random.default_rng(seed),
                                 (warm_up + samples, num_envs, *envs.action_shape), envs.choices)
        envs.reset(seed=seed)
        for index in range(warm_up):
            envs.step(actions[index])
        start = time.perf_counter()
        for index in range(warm_up, warm_up + samples):
            envs.step(actions[index])
        elapsed = time.perf_counter() - start
    return elapsed / (samples * num_envs)


def measure_inference(obs_dim: int, action_dim: int, hidden_sizes: tuple[int, ...], batch: int,
                      samples: int, deterministic: bool = False, seed: int = 0) -> float:
    """Median seconds of one ``actor.act`` on a batch of ``batch`` observations.

    :param samples: timed calls (after ``samples // 10`` untimed warm-up calls).
    """
    import numpy as np
    import torch

    from rl_core.algorithms.networks import SquashedGaussianActor

    torch.manual_seed(seed)
    actor = SquashedGaussianActor(obs_dim, action_dim, hidden_sizes)
    obs = np.random.default_rng(seed).standard_normal((batch, obs_dim)).astype(np.float32)
    for _ in range(max(1, samples // 10)):
        actor.act(obs, deterministic=deterministic)
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        actor.act(obs, deterministic=deterministic)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


class DdsUnavailable(Exception):
    """The DDS round trip could not be measured; the message says why."""


def measure_dds_round_trip(samples: int, timeout_s: float = DDS_TIMEOUT_S) -> float:
    """Median round trip of a small message over DDS inside this process (rclpy ping-pong).

    One node (a :class:`~rl_bringup.run.ros_session.RosSession`'s) publishes ``ping``, its
    subscription echoes each message to ``pong``, and the time until the echo arrives is taken.
    Topic names carry this process id, and discovery stays on this host
    (``ROS_AUTOMATIC_DISCOVERY_RANGE`` is ``LOCALHOST`` while the session lives, as everywhere
    this project starts ROS; the caller's value is restored afterwards).

    :raises DdsUnavailable: when rclpy is not installed, the endpoints do not match or a message
        does not come back within ``timeout_s``.
    :raises KeyboardInterrupt: on Ctrl-C (the session turns it into a stop request).
    """
    try:
        from std_msgs.msg import Int64
    except ImportError as error:
        raise DdsUnavailable(f"rclpy is not installed ({error})") from error

    previous_range = os.environ.get(DISCOVERY_RANGE_VARIABLE)
    os.environ[DISCOVERY_RANGE_VARIABLE] = "LOCALHOST"
    try:
        # domain_id None: rclpy's default, the caller's ROS_DOMAIN_ID (else 0).
        with RosSession(COMMAND, domain_id=None) as session:
            return _ping_pong(session, Int64, samples, timeout_s)
    except (DdsUnavailable, KeyboardInterrupt):
        raise
    except Exception as error:  # rclpy raises several RCL/RMW error types; all mean "no DDS here"
        raise DdsUnavailable(f"{type(error).__name__}: {error}") from error
    finally:
        if previous_range is None:
            os.environ.pop(DISCOVERY_RANGE_VARIABLE, None)
        else:
            os.environ[DISCOVERY_RANGE_VARIABLE] = previous_range


def _ping_pong(session: RosSession, message_type: Any, samples: int, timeout_s: float) -> float:
    """The measurement of :func:`measure_dds_round_trip` inside its session."""
    node = session.node
    prefix = f"/{TOOL_NODE_PREFIX}{COMMAND}_{os.getpid()}"
    pong_publisher = node.create_publisher(message_type, prefix + "/pong", 10)
    node.create_subscription(message_type, prefix + "/ping", pong_publisher.publish, 10)
    last = [-1]

    def on_pong(message: Any) -> None:
        last[0] = message.data

    node.create_subscription(message_type, prefix + "/pong", on_pong, 10)
    ping_publisher = node.create_publisher(message_type, prefix + "/ping", 10)

    def interrupted() -> bool:
        return session.stop_requested.is_set()

    matched = session.spin_until(lambda: ping_publisher.get_subscription_count() >= 1
                                 and pong_publisher.get_subscription_count() >= 1, timeout_s)
    if interrupted():
        raise KeyboardInterrupt
    if not matched:
        raise DdsUnavailable(f"ping/pong endpoints did not match within {timeout_s:g} s")
    timings = []
    warm_up = max(1, samples // 10)
    for sequence in range(warm_up + samples):
        start = time.perf_counter()
        ping_publisher.publish(message_type(data=sequence))
        returned = session.spin_until(lambda sequence=sequence: last[0] == sequence, timeout_s)
        elapsed = time.perf_counter() - start
        if interrupted():
            raise KeyboardInterrupt
        if not returned:
            raise DdsUnavailable(f"ping {sequence} did not come back within {timeout_s:g} s")
        if sequence >= warm_up:
            timings.append(elapsed)
    return statistics.median(timings)


# --- the subcommand ------------------------------------------------------------------------------


def _run_command(mode: str, robots: int, config_value: str) -> str:
    """The command line that starts the recommended deployment."""
    config = "" if config_value == DEFAULT_CONFIG else f" config:={config_value}"
    robots_text = f" robots:={robots}" if robots != 1 else ""
    return f"rl-bringup train {mode}{robots_text}{config}"


def advise(values: dict[str, str]) -> int:
    """``rl-bringup advise [config:=NAME] [samples:=N] [robots:=N] [elastic:=B] [dds:=B]``.

    :param values: the parsed ``key:=value`` arguments.
    :return: the exit code.
    :raises ToolError: for bad arguments (exit code 2).
    """
    config_value = values.get("config", DEFAULT_CONFIG)
    samples = int_value(values, "samples", DEFAULT_SAMPLES, 1, 10**7)
    robots = int_value(values, "robots", 1, 1, 64)
    elastic = bool_value(values, "elastic", False)
    with_dds = bool_value(values, "dds", True)
    path, run_config = load_config(config_value)

    from rl_core.robot.tasks import space_shapes

    simulator, sac = run_config.simulator, run_config.sac
    env_id, num_envs, hidden_sizes = simulator.env_id, simulator.num_envs, sac.hidden_sizes
    try:
        with silence_native_stdout():
            obs_shape, action_shape = space_shapes(env_id)
    except ValueError as error:
        raise ToolError(f"config {path}: {error}") from error
    if len(obs_shape) != 1 or len(action_shape) != 1:
        raise ToolError(f"{env_id} has non-flat spaces {obs_shape}, {action_shape}")

    out = sys.stdout
    print(f"[rl-bringup {COMMAND}] config {path}: {env_id}, num_envs {num_envs}, hidden sizes "
          f"{list(hidden_sizes)}, robots {robots}; measuring ({samples} samples) ...", file=out)
    out.flush()
    env_step_s = measure_env_step(env_id, num_envs, samples, seed=simulator.seed)
    inference_s = measure_inference(obs_shape[0], action_shape[0], hidden_sizes, num_envs,
                                    samples, deterministic=run_config.policy.deterministic)
    import torch

    batch_text = f"batch of {num_envs}"
    print(f"env step        {format_duration(env_step_s)} per env (mean of {samples} steps of "
          f"{num_envs} env{'s' if num_envs != 1 else ''}, random actions)", file=out)
    print(f"simulator step  {format_duration(env_step_s * num_envs)} per {batch_text}", file=out)
    print(f"inference       {format_duration(inference_s)} per {batch_text} (median of {samples}, "
          f"torch CPU, {torch.get_num_threads()} threads)", file=out)
    dds_s: float | None = None
    if with_dds:
        dds_samples = min(samples, MAX_DDS_SAMPLES)
        try:
            dds_s = measure_dds_round_trip(dds_samples)
            print(f"DDS round trip  {format_duration(dds_s)} (median of {dds_samples} ping-pongs, "
                  "rclpy in one process, loopback)", file=out)
        except DdsUnavailable as error:
            print(f"DDS round trip  not measured: {error}", file=out)
    else:
        print("DDS round trip  skipped (dds:=false)", file=out)
    ratio = cost_ratio(env_step_s * num_envs, inference_s)
    slower = "inference" if inference_s > env_step_s * num_envs else "simulator"
    print(f"ratio           {format_ratio(ratio)} ({slower} slower)", file=out)
    recommendation = recommend(env_step_s, inference_s, robots, num_envs=num_envs,
                               elastic=elastic, dds_round_trip_s=dds_s)
    comparison = values.get("compare") or default_comparison(config_value)
    if comparison and comparison != "none" and not elastic:
        measured = recommend_from_comparison(load_comparison(comparison), robots)
        print(f"cost rule       {recommendation.mode} ({recommendation.reason})", file=out)
        if measured is not None:
            print(f"comparison      {comparison}", file=out)
            recommendation = measured
    print(f"recommendation  {recommendation.mode}", file=out)
    print(f"reason          {recommendation.reason}", file=out)
    print(f"run it with     {_run_command(recommendation.mode, robots, config_value)}", file=out)
    return 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``advise`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, COMMAND, advise, keys=KEYS,
        help="measure env step and inference time and recommend colocated/decoupled/hybrid",
        description="Measure this machine's environment step time (per env) and policy inference "
        "time (per batch) for a scenario, and a DDS round trip, then recommend a deployment mode "
        "by the selection rule of docs/architecture.md. key:=value arguments: config:=NAME|PATH (default "
        f"{DEFAULT_CONFIG}), samples:=N (default {DEFAULT_SAMPLES}), robots:=N (planned robots, "
        "default 1), elastic:=true|false (robots/learners added at run time; default false), "
        "dds:=true|false (measure the DDS round trip; default true), compare:=FILE (a "
        "compare.json of rl-bringup compare to base the recommendation on; default the shipped "
        "config/compare_<config>.json when it exists; none = the cost rule only).",
    )
