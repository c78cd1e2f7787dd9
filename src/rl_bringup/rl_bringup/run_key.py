"""The per-run weights key of a deployment (see rl_core.weights_auth), for both front ends.

Before a run starts, :func:`with_weights_key` makes sure every process gets the same key:

* a key the caller already set (``RL_ROS2_WEIGHTS_KEY`` or ``RL_ROS2_WEIGHTS_KEY_FILE`` in the
  environment, e.g. the same key on every host of a multi-host run) is inherited as is;
* ``weights_key:=FILE`` names a key file to use;
* otherwise a fresh key is written (mode 0600) into the run directory (``output_dir``, or a new
  private temporary folder) and passed as ``RL_ROS2_WEIGHTS_KEY_FILE``.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rl_bringup.plan import Plan, PlanError
from rl_core import weights_auth


def with_weights_key(plan: Plan, key_file: str | None = None,
                     environ: Mapping[str, str] | None = None) -> Plan:
    """The plan with the run's weights key in every process' environment.

    :raises PlanError: when ``key_file`` does not hold a usable key.
    """
    environ = os.environ if environ is None else environ
    if not key_file and (environ.get(weights_auth.KEY_VARIABLE)
                         or environ.get(weights_auth.KEY_FILE_VARIABLE)):
        return plan  # the caller's key reaches every process through the environment
    if key_file:
        path = Path(key_file).expanduser().resolve()
        try:
            weights_auth.load_key({weights_auth.KEY_FILE_VARIABLE: str(path)})
        except weights_auth.WeightsKeyError as error:
            raise PlanError(f"weights_key:={key_file}: {error}") from None
        note = f"policy weights are signed with the key in {path}"
    else:
        directory = next((process.parameters["output_dir"] for process in plan.processes
                          if "output_dir" in process.parameters), None)
        directory = directory or tempfile.mkdtemp(prefix="rl_ros2_run_")
        path = weights_auth.create_key_file(directory)
        note = (f"policy weights are signed with a per-run key ({path}); give other hosts the "
                f"same key with weights_key:={path} or {weights_auth.KEY_VARIABLE}")
    environment = {**plan.environment, weights_auth.KEY_FILE_VARIABLE: str(path)}
    processes = [dataclasses.replace(process, env={**process.env,
                                                   weights_auth.KEY_FILE_VARIABLE: str(path)})
                 for process in plan.processes]
    return dataclasses.replace(plan, environment=environment, processes=processes,
                               notes=[*plan.notes, note])
