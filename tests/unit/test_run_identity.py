"""The run identity of a deployment (rl_bringup.plan.run_key, issue 41 item 7): every process of a
plan, every Kubernetes container and every compose service gets the same ``RL_ROS2_RUN_ID``,
kept with the run directory, so that the weights and status signatures of runs sharing a key
differ. No rclpy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_bringup.plan.deployment import Plan, make_plan
from rl_bringup.plan.run_key import RUN_ID_FILE_NAME, with_weights_key
from rl_bringup.tools.deploy import k8s_objects
from rl_core.security.weights_auth import KEY_VARIABLE, PUBLIC_KEY_VARIABLE, RUN_ID_VARIABLE, SigningKey

pytestmark = pytest.mark.unit

KEY = SigningKey(bytes(range(32)))


def plan_of(output_dir: Path | None, namespace: str | None = None) -> Plan:
    return make_plan("decoupled", 2, output_dir=output_dir, domain_id=7, namespace=namespace,
                     environ={})


def run_ids(plan: Plan) -> set[str]:
    """The run identities of the plan's processes."""
    return {process.env[RUN_ID_VARIABLE] for process in plan.processes}


def test_every_process_of_a_plan_gets_one_run_id_kept_with_its_output_dir(tmp_path: Path) -> None:
    keyed = with_weights_key(plan_of(tmp_path / "run"), None, {})
    (run_id,) = run_ids(keyed)
    assert len(keyed.processes) >= 4 and run_id and keyed.environment[RUN_ID_VARIABLE] == run_id
    token = (tmp_path / "run" / RUN_ID_FILE_NAME).read_text().strip()
    assert run_id == f"{token}@/" and len(token) == 32
    assert any(run_id in note for note in keyed.notes)  # the header prints it for other hosts
    # A restart in the same output_dir keeps it, with the key in the environment too.
    assert run_ids(with_weights_key(plan_of(tmp_path / "run"), None, {})) == {run_id}
    assert run_ids(with_weights_key(plan_of(tmp_path / "run"), None,
                                    {KEY_VARIABLE: "5e" * 32})) == {run_id}
    # Another run directory, or the same one deployed in another namespace, is another run.
    assert run_ids(with_weights_key(plan_of(tmp_path / "other"), None, {})) != {run_id}
    assert run_ids(with_weights_key(plan_of(tmp_path / "run", "lab_a"), None, {})) == \
        {f"{token}@/lab_a"}


def test_the_callers_run_id_wins_and_a_robot_host_without_one_checks_the_unnamed_run(
        tmp_path: Path) -> None:
    given = {KEY_VARIABLE: "5e" * 32, RUN_ID_VARIABLE: "learner-host-run"}
    assert run_ids(with_weights_key(plan_of(tmp_path), None, given)) == {"learner-host-run"}
    assert not (tmp_path / RUN_ID_FILE_NAME).exists()
    robot_host = with_weights_key(plan_of(tmp_path), None, {PUBLIC_KEY_VARIABLE: KEY.public.hex()})
    assert run_ids(robot_host) == {""}
    assert any(RUN_ID_VARIABLE in note and "unnamed run" in note for note in robot_host.notes)
    assert run_ids(with_weights_key(plan_of(tmp_path), None, {
        PUBLIC_KEY_VARIABLE: KEY.public.hex(), RUN_ID_VARIABLE: "learner-host-run"})) == \
        {"learner-host-run"}


def test_without_output_dir_each_launch_is_its_own_run(tmp_path: Path) -> None:
    environ = {KEY_VARIABLE: "5e" * 32}
    first, second = (run_ids(with_weights_key(plan_of(None), None, environ)) for _ in range(2))
    assert len(first) == len(second) == 1 and first != second and "" not in first


def containers(document: Any) -> list[dict[str, Any]]:
    """Every container of a workload document (its init containers included)."""
    if not isinstance(document, dict) or "template" not in document.get("spec", {}):
        return []
    pod = document["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def k8s_run_ids(directory: Path) -> list[dict[str, Any]]:
    """Where every node container of a kustomize directory reads ``RL_ROS2_RUN_ID`` from."""
    found = []
    for name in ("learner.yaml", "robots.yaml"):
        for document in yaml.safe_load_all((directory / name).read_text()):
            for container in containers(document):
                (source,) = [item.get("valueFrom", item.get("value"))
                             for item in container["env"] if item["name"] == RUN_ID_VARIABLE]
                found.append(source)
    return found


@pytest.mark.parametrize("mode", ["decoupled", "hybrid"])
def test_every_k8s_container_reads_the_run_id_kept_in_the_directory(
        run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path, mode: str) -> None:
    """From the public key's ConfigMap, which kustomize makes of the directory's run.id: the
    same for every container, and a new one rolls the pods, as a new key does."""
    code, out, err = run_cli("k8s", mode, "robots:=2", f"output:={tmp_path}")
    assert code == 0, err
    token = (tmp_path / RUN_ID_FILE_NAME).read_text()
    assert f"wrote {tmp_path / RUN_ID_FILE_NAME}" in out and len(token.strip()) == 32
    sources = k8s_run_ids(tmp_path)
    assert len(sources) >= 2 and all(source == {"configMapKeyRef": {
        "name": k8s_objects.WEIGHTS_PUBLIC_KEY_NAME, "key": RUN_ID_FILE_NAME}}
        for source in sources), sources
    kustomization = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    (public,) = [generator for generator in kustomization["configMapGenerator"]
                 if generator["name"] == k8s_objects.WEIGHTS_PUBLIC_KEY_NAME]
    assert RUN_ID_FILE_NAME in public["files"]
    code, _, err = run_cli("k8s", mode, "robots:=3", f"output:={tmp_path}")
    assert code == 0, err
    assert (tmp_path / RUN_ID_FILE_NAME).read_text() == token, "regenerating keeps the run"


def test_every_compose_service_gets_the_run_id_of_the_run_line(
        run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    output = tmp_path / "compose.yaml"
    code, out, err = run_cli("compose", "decoupled", "robots:=2", f"output:={output}")
    assert code == 0, err
    services = yaml.safe_load(output.read_text())["services"]
    assert {service["environment"][RUN_ID_VARIABLE] for service in services.values()} == \
        {f"${{{RUN_ID_VARIABLE}:-}}"}  # one value for all, given at up time
    token = (tmp_path / RUN_ID_FILE_NAME).read_text().strip()
    assert f"run:  {RUN_ID_VARIABLE}={token}@/ " in out
