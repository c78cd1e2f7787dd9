"""SAC: updates learn on a fixed batch, checkpoints round-trip exactly, bad input is refused."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.algorithms.sac import SAC
from rl_core.config import ConfigError, SACConfig
from rl_core.runs.checkpoint import (
    actor_to_bytes,
    load_actor,
    load_actor_bytes,
    load_checkpoint,
    save_checkpoint,
)
from rl_core.wire.messages import DEMO_SLOT, Batch, tensors_from_bytes, tensors_to_bytes

pytestmark = pytest.mark.unit


def fixed_batch(rows: int = 64, obs_dim: int = 3, action_dim: int = 2, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(
        obs=rng.normal(size=(rows, obs_dim)).astype(np.float32),
        actions=rng.uniform(-1, 1, (rows, action_dim)).astype(np.float32),
        rewards=rng.normal(size=rows).astype(np.float32),
        next_obs=rng.normal(size=(rows, obs_dim)).astype(np.float32),
        terminated=(rng.uniform(size=rows) < 0.1).astype(np.float32),
        indices=np.arange(rows, dtype=np.int64),
        weights=np.ones(rows, dtype=np.float32),
    )


def small_sac(seed: int = 0, **overrides: object) -> SAC:
    return SAC(3, 2, SACConfig(hidden_sizes=(32, 32), **overrides), seed=seed)


def test_updates_reduce_critic_loss_on_a_fixed_batch() -> None:
    sac = small_sac(critic_lr=3e-3)
    batch = fixed_batch()
    first = np.mean([sac.update(batch)["critic_loss"] for _ in range(5)])
    for _ in range(300):
        metrics = sac.update(batch)
    last = np.mean([sac.update(batch)["critic_loss"] for _ in range(5)])
    assert last < 0.5 * first, (first, last)
    assert set(metrics) >= {"critic_loss", "actor_loss", "alpha", "q_mean", "entropy"}
    assert sac.update_step == 310


def test_entropy_temperature_is_tuned_towards_the_target() -> None:
    sac = small_sac(init_alpha=1.0, alpha_lr=1e-2)
    batch = fixed_batch()
    for _ in range(50):
        sac.update(batch)
    # A fresh policy's entropy exceeds -|A|, so the temperature must fall.
    assert sac.alpha < 1.0
    frozen = small_sac(init_alpha=0.5, autotune_alpha=False)
    for _ in range(5):
        frozen.update(batch)
    assert frozen.alpha == pytest.approx(0.5)


def test_target_networks_follow_slowly() -> None:
    sac = small_sac(tau=0.01)
    before = [p.clone() for p in sac.critic_target.parameters()]
    sac.update(fixed_batch())
    moved = [(p - b).abs().max().item() for p, b in zip(sac.critic_target.parameters(), before)]
    online_moved = max(moved)
    assert 0 < online_moved < 0.01


def test_actions_are_bounded_and_deterministic_mode_is_repeatable() -> None:
    sac = small_sac()
    obs = np.random.default_rng(1).normal(size=(10, 3)).astype(np.float32) * 100
    actions = sac.act(obs)
    assert actions.shape == (10, 2) and actions.dtype == np.float32
    assert np.all(np.abs(actions) <= 1.0)
    np.testing.assert_array_equal(sac.act(obs, deterministic=True), sac.act(obs, deterministic=True))


def test_log_prob_equals_the_tanh_transformed_gaussian_density() -> None:
    torch.manual_seed(0)
    actor = SquashedGaussianActor(2, 2, (16,))
    obs = torch.randn(500, 2)
    actions, log_probs = actor(obs)
    features = torch.relu(actor.body(obs))
    mean = actor.mean(features)
    std = actor.log_std(features).clamp(-5, 2).exp()
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, std), [torch.distributions.TanhTransform()])
    inside = (actions.abs() < 0.999).all(dim=-1)  # atanh is ill-conditioned at the bounds
    expected = reference.log_prob(actions).sum(dim=-1)
    torch.testing.assert_close(log_probs[inside], expected[inside], rtol=1e-3, atol=1e-3)


def test_non_finite_batch_is_refused_with_a_reason() -> None:
    sac = small_sac()
    batch = fixed_batch()
    rewards = batch.rewards.copy()
    rewards[0] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        sac.update(batch._replace(rewards=rewards))


def test_checkpoint_round_trip_restores_learner_and_optimizers(tmp_path) -> None:
    sac = small_sac(seed=3)
    batch = fixed_batch()
    for _ in range(20):
        sac.update(batch)
    save_checkpoint(tmp_path / "ckpt", sac, {"env_steps": 1234})
    restored, meta = load_checkpoint(tmp_path / "ckpt")
    assert meta["counters"] == {"env_steps": 1234}
    assert restored.update_step == sac.update_step
    for name, module in sac.modules().items():
        for key, value in module.state_dict().items():
            torch.testing.assert_close(restored.modules()[name].state_dict()[key], value)
    assert restored.alpha == pytest.approx(sac.alpha)
    # Same state + same noise -> the next update is identical (optimizer moments restored).
    actor, _ = load_actor(tmp_path / "ckpt")
    obs = batch.obs[:5]
    np.testing.assert_allclose(actor.act(obs, deterministic=True),
                               sac.act(obs, deterministic=True), rtol=1e-5)
    torch.manual_seed(7)
    expected = sac.update(batch)
    torch.manual_seed(7)
    got = restored.update(batch)
    assert got == pytest.approx(expected, rel=1e-5)


def test_checkpoint_files_are_not_pickle_and_corruption_is_detected(tmp_path) -> None:
    sac = small_sac()
    directory = save_checkpoint(tmp_path / "ckpt", sac)
    meta = json.loads((directory / "checkpoint.json").read_text())
    assert meta["format_version"] == 2 and meta["algorithm"] == "sac"
    data = bytearray((directory / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (directory / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_checkpoint(directory)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing")


def test_weight_bytes_round_trip_and_reject_mismatches() -> None:
    actor = SquashedGaussianActor(3, 2, (8, 8))
    data, digest, architecture = actor_to_bytes(actor)
    other = SquashedGaussianActor(3, 2, (8, 8))
    load_actor_bytes(other, data, digest, architecture)
    for key, value in actor.state_dict().items():
        torch.testing.assert_close(other.state_dict()[key], value)
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_actor_bytes(other, data[:-1], digest, architecture)
    wider = SquashedGaussianActor(3, 2, (16, 8))
    with pytest.raises(ValueError, match="hidden_sizes"):
        load_actor_bytes(wider, data, digest, architecture)
    blob, blob_digest = tensors_to_bytes({"x": torch.arange(3.0)})
    assert tensors_from_bytes(blob, blob_digest)["x"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="not a valid safetensors"):
        tensors_from_bytes(b"garbage", hashlib.sha256(b"garbage").hexdigest())


def test_constructor_rejects_empty_spaces() -> None:
    with pytest.raises(ValueError, match="positive"):
        SAC(0, 1, SACConfig())


def test_the_ensemble_critic_computes_each_member_as_its_own_network() -> None:
    from rl_core.algorithms.networks import EnsembleQ, mlp

    torch.manual_seed(0)
    ensemble = EnsembleQ(3, 2, (8, 8), members=3)
    obs, actions = torch.randn(5, 3), torch.rand(5, 2)
    q = ensemble(obs, actions)
    assert q.shape == (3, 5)
    for member in range(3):
        network = mlp(5, (8, 8), 1)
        linears = [layer for layer in network if isinstance(layer, torch.nn.Linear)]
        with torch.no_grad():
            for linear, layer in zip(linears, ensemble.layers):
                linear.weight.copy_(layer.weight[member].t())
                linear.bias.copy_(layer.bias[member, 0])
        torch.testing.assert_close(q[member], network(torch.cat([obs, actions], -1)).squeeze(-1))


def test_layer_norm_members_normalise_each_hidden_layer_before_its_relu() -> None:
    from rl_core.algorithms.networks import EnsembleQ

    torch.manual_seed(0)
    ensemble = EnsembleQ(3, 2, (8, 8), members=3, layer_norm=True)
    with torch.no_grad():
        ensemble.norms[0].weight[1].fill_(2.0)
        ensemble.norms[1].bias[2].fill_(0.5)
    obs, actions = torch.randn(5, 3), torch.rand(5, 2)
    for member in range(3):
        hidden = torch.cat([obs, actions], -1)
        for index, layer in enumerate(ensemble.layers[:-1]):
            hidden = hidden @ layer.weight[member] + layer.bias[member]
            norm = ensemble.norms[index]
            hidden = torch.relu(torch.nn.functional.layer_norm(hidden, (8,)) * norm.weight[member]
                                + norm.bias[member])
        last = ensemble.layers[-1]
        expected = (hidden @ last.weight[member] + last.bias[member]).squeeze(-1)
        torch.testing.assert_close(ensemble(obs, actions)[member], expected)
    assert EnsembleQ(3, 2, (8, 8)).norms is None  # off by default: SAC's critics as before


def test_an_ensemble_of_critics_with_layer_norm_learns_a_fixed_batch() -> None:
    sac = small_sac(critic_lr=3e-3, critics=5, critic_layer_norm=True)
    assert sac.critic(torch.zeros(4, 3), torch.zeros(4, 2)).shape == (5, 4)
    assert any(name.startswith("norms.") for name in sac.critic.state_dict())
    batch = fixed_batch()
    first = np.mean([sac.update(batch)["critic_loss"] for _ in range(5)])
    for _ in range(300):
        metrics = sac.update(batch)
    assert np.isfinite(list(metrics.values())).all()
    assert np.mean([sac.update(batch)["critic_loss"] for _ in range(5)]) < 0.5 * first


def test_updates_leave_every_gradient_in_its_parameters_layout() -> None:
    """Fused Adam on the CPU steps non-contiguous gradients wrongly (torch 2.13)."""
    sac = SAC(3, 2, SACConfig(hidden_sizes=(8, 8)), seed=0)
    sac.update(fixed_batch())
    for optimizer in sac.optimizers().values():
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                assert parameter.grad is not None and parameter.grad.is_contiguous()


def demonstration_batch(demo_action: np.ndarray, rows: int = 64) -> Batch:
    """Half demonstrations (``DEMO_SLOT`` rows, always ``demo_action``, reward 1), half online
    rows of random actions with reward -1, on the same observations."""
    batch = fixed_batch(rows)
    demo = np.arange(rows) < rows // 2
    actions = batch.actions.copy()
    actions[demo] = demo_action
    return batch._replace(actions=actions, rewards=np.where(demo, 1.0, -1.0).astype(np.float32),
                          indices=np.where(demo, DEMO_SLOT, np.arange(rows)).astype(np.int64))


def test_behaviour_cloning_pulls_the_policy_to_the_demonstrated_actions() -> None:
    # The demonstrations' reward teaches plain SAC their action too; cloning gets there sooner.
    demo_action = np.array([0.6, -0.4], dtype=np.float32)
    batch = demonstration_batch(demo_action)
    demo_obs = batch.obs[batch.indices == DEMO_SLOT]
    distances, bc_losses = {}, {}
    for weight in (0.0, 5.0):
        sac = small_sac(demo_bc_weight=weight, actor_lr=1e-3, critic_lr=1e-3)
        bc_losses[weight] = [sac.update(batch)["bc_loss"] for _ in range(50)]
        distances[weight] = float(np.abs(sac.act(demo_obs, deterministic=True)
                                         - demo_action).mean())
    assert bc_losses[0.0] == [0.0] * 50
    assert min(bc_losses[5.0]) >= 0.0 and max(bc_losses[5.0]) > 0.0
    # Measured: 0.18 with cloning, 0.47 without (seeds 0 and 1 alike).
    assert distances[5.0] < 0.5 * distances[0.0], distances


def test_behaviour_cloning_needs_demonstration_rows_and_a_weight() -> None:
    online = fixed_batch()  # no DEMO_SLOT rows: the same updates with or without the weight
    runs = []
    for overrides in ({}, {"demo_bc_weight": 1.0}):
        sac = small_sac(**overrides)  # seeds torch's generator, which updates sample from
        runs.append([sac.update(online) for _ in range(3)])
    assert runs[0] == runs[1]


def test_the_q_filter_clones_only_actions_the_critics_value_above_the_policys() -> None:
    sac = small_sac(demo_bc_weight=1.0)
    best = torch.tensor([0.5, 0.5])
    # Critics that value an action by its closeness to ``best`` (two members, as twin critics).
    sac._critic_heads = lambda features, actions: -(actions - best).pow(2).sum(1).expand(2, -1)
    features = torch.as_tensor(fixed_batch(4).obs)
    policy, _ = sac.actor(features, deterministic=True)
    q_policy = sac._value(sac._critic_heads(features, policy)).detach()
    demo_rows = sac._demo_mask(np.full(4, DEMO_SLOT))
    worse = sac._cloning_loss(demo_rows, features, torch.full((4, 2), -1.0), q_policy)
    better = sac._cloning_loss(demo_rows, features, best.expand(4, 2), q_policy)
    assert float(worse) == 0.0
    # The mean squared distance to the demonstrations, scaled by the mean |Q| and the weight.
    expected = q_policy.abs().mean() * (policy - best).pow(2).mean(1).mean()
    assert float(better) == pytest.approx(float(expected))
    better.backward()
    assert all(p.grad is not None for p in sac.actor.mean.parameters())


def parameters(*modules: torch.nn.Module) -> torch.Tensor:
    """The parameters of ``modules`` as one flat tensor."""
    return torch.cat([p.detach().flatten() for module in modules for p in module.parameters()])


def learner_state(sac: SAC) -> torch.Tensor:
    """Every parameter and optimizer moment of ``sac`` as one flat tensor."""
    tensors = [parameters(*sac.modules().values())]
    for optimizer in sac.optimizers().values():
        for _, state in sorted(optimizer.state_dict()["state"].items()):
            tensors += [state[key].flatten() for key in ("step", "exp_avg", "exp_avg_sq")]
    return torch.cat([*tensors, sac.log_alpha.detach().flatten()])


def test_a_compiled_update_computes_what_the_eager_one_does(tmp_path) -> None:
    """``compile_update``: the same seed gives the same updates, ensemble, temperature and
    cloning included (the step's random numbers are drawn before the graph, from torch's
    generator, as the eager step draws them); its optimizer state is a checkpoint's, new
    learning rates reach it, and a step whose loss is not finite changes what the eager step
    changes before it raises."""
    from torch._dynamo.utils import counters
    counters.clear()
    batch, other = (demonstration_batch(np.array([0.6, -0.4], dtype=np.float32)),
                    fixed_batch(seed=1))
    runs = {}
    for flag in (False, True):  # each learner seeds torch's generator as it is built
        sac = small_sac(compile_update=flag, critics=3, demo_bc_weight=1.0)
        metrics = [sac.update(batch) for _ in range(3)]
        sac.set_learning_rates(1e-2, 2e-2, 3e-2)
        metrics.append(sac.update(other))  # no demonstration rows
        runs[sac] = metrics, learner_state(sac)
    eager, compiled = runs
    # The whole gradient step compiled as one graph: nothing in it falls back to Python.
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], counters
    for eager_metrics, compiled_metrics in zip(runs[eager][0], runs[compiled][0]):
        assert compiled_metrics == pytest.approx(eager_metrics, rel=1e-4, abs=1e-6)
    torch.testing.assert_close(runs[compiled][1], runs[eager][1], rtol=1e-4, atol=1e-5)

    # The compiled learner's checkpoint resumes compiled, and its next update is the eager's.
    save_checkpoint(tmp_path / "ckpt", compiled, {})
    resumed, _ = load_checkpoint(tmp_path / "ckpt")
    assert resumed.config.compile_update
    for sac in (eager, resumed):
        torch.manual_seed(5)
        runs[sac] = sac.update(batch), learner_state(sac)
    assert runs[resumed][0] == pytest.approx(runs[eager][0], rel=1e-4, abs=1e-6)
    torch.testing.assert_close(runs[resumed][1], runs[eager][1], rtol=1e-4, atol=1e-5)

    # Losses that are not finite: refused as the eager step refuses them, with its effects.
    rewards = other.rewards.copy()
    rewards[0] = np.nan
    for sac in (eager, resumed):
        before, steps = learner_state(sac), sac.update_step
        with pytest.raises(ValueError, match="critic loss is not finite"):
            sac.update(other._replace(rewards=rewards))
        torch.testing.assert_close(learner_state(sac), before, rtol=0, atol=0)  # nothing
        kept = (sac.actor, sac.critic_target)  # not stepped when the actor's loss fails
        kept_values = parameters(*kept)
        alpha = sac.alpha
        sac.set_learning_rates(critic_lr=1e38)  # critics stepped to overflow the actor's loss
        with pytest.raises(ValueError, match="actor or temperature loss is not finite"):
            sac.update(other)
        torch.testing.assert_close(parameters(*kept), kept_values, rtol=0, atol=0)
        assert sac.update_step == steps
        assert sac.alpha == alpha  # the temperature is not stepped either


def test_compiling_the_update_of_image_observations_is_refused() -> None:
    with pytest.raises(ConfigError, match="compile_update.*state-vector"):
        SAC((2, 16, 16, 3), 1, SACConfig(hidden_sizes=(8,), compile_update=True))


def product_dtypes(sac: SAC, batch: Batch) -> set[torch.dtype]:
    """The dtypes of the matrix products one update of ``sac`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode
    products = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}
    seen: set[torch.dtype] = set()

    class Products(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func in products:
                seen.update(arg.dtype for arg in args if isinstance(arg, torch.Tensor))
            return func(*args, **(kwargs or {}))

    with Products():
        sac.update(batch)
    return seen


def test_mixed_precision_multiplies_in_bfloat16_and_keeps_the_rest_in_float32() -> None:
    """``update_precision: bfloat16``: the hidden layers' products run in bfloat16, the
    output layers' in float32 (Q values and the policy's mean keep their resolution); the
    parameters and the optimizer state stay float32, the step is the float32 step within
    bfloat16's rounding, and a fixed batch is still learnt."""
    batch = fixed_batch()
    assert product_dtypes(small_sac(), batch) == {torch.float32}
    assert product_dtypes(small_sac(update_precision="bfloat16"), batch) == {
        torch.float32, torch.bfloat16}
    full, mixed = small_sac(), small_sac(update_precision="bfloat16")
    metrics = {}
    for sac in (full, mixed):
        torch.manual_seed(1)  # the same draws
        metrics[sac] = sac.update(batch)
    assert metrics[mixed] == pytest.approx(metrics[full], rel=0.02, abs=1e-3)
    # An Adam step moves a parameter by about the learning rate (3e-4) whatever its
    # gradient's size, so where rounding turns a gradient near zero around the two steps
    # differ by twice that; nowhere more.
    torch.testing.assert_close(parameters(*mixed.modules().values()),
                               parameters(*full.modules().values()), rtol=0, atol=6.5e-4)
    assert {t.dtype for t in mixed.critic.state_dict().values()} == {torch.float32}
    assert {state["exp_avg"].dtype for state in mixed.critic_optimizer.state.values()} == {
        torch.float32}

    # The actor's loss sees the critics after their step: with a large critic step, bfloat16
    # copies of the critics cached from before it (autocast's cache) would give about -1.5
    # here instead of float32's -3.2.
    full, mixed = (small_sac(critic_lr=0.1, update_precision=precision)
                   for precision in ("float32", "bfloat16"))
    for sac in (full, mixed):
        torch.manual_seed(1)
        metrics[sac] = sac.update(batch)
    assert metrics[mixed]["actor_loss"] == pytest.approx(metrics[full]["actor_loss"], rel=0.02)

    sac = small_sac(critic_lr=3e-3, update_precision="bfloat16")
    first = np.mean([sac.update(batch)["critic_loss"] for _ in range(5)])
    for _ in range(300):
        sac.update(batch)
    assert np.mean([sac.update(batch)["critic_loss"] for _ in range(5)]) < 0.5 * first


def test_a_compiled_mixed_precision_update_computes_what_the_eager_one_does() -> None:
    """``compile_update`` with ``update_precision: bfloat16``: one graph, no graph breaks, and
    the eager mixed-precision step's results within bfloat16's rounding."""
    from torch._dynamo.utils import counters
    counters.clear()
    batch = fixed_batch()
    eager, compiled = (small_sac(update_precision="bfloat16", compile_update=flag)
                       for flag in (False, True))
    for step in range(3):
        metrics = {}
        for sac in (eager, compiled):
            torch.manual_seed(step)  # the same draws
            metrics[sac] = sac.update(batch)
        assert metrics[compiled] == pytest.approx(metrics[eager], rel=0.02, abs=1e-3)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], counters
    # Three steps, each within twice the learning rate (as above).
    torch.testing.assert_close(parameters(*compiled.modules().values()),
                               parameters(*eager.modules().values()), rtol=0, atol=2e-3)


def test_an_unknown_update_precision_is_refused() -> None:
    with pytest.raises(ConfigError, match="update_precision must be one of float32, bfloat16"):
        SACConfig(update_precision="float16")
