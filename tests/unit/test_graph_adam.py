"""Adam's step as tensor operations (``rl_core.algorithms.graph_adam``), against torch.optim."""

from __future__ import annotations

import pytest
import torch

from rl_core.algorithms.graph_adam import adam_step_, adam_tensors

pytestmark = pytest.mark.unit


def parameters(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator))
            for shape in ((3, 5, 4), (3, 1, 4), (7,), ())]


def test_the_tensor_step_is_torch_adams_step_and_keeps_its_state() -> None:
    ours, reference = parameters(0), parameters(0)
    ours_optimizer = torch.optim.Adam(ours, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, fused=True)
    reference_optimizer = torch.optim.Adam(reference, lr=1e-2, betas=(0.8, 0.99), eps=1e-6,
                                           fused=True)
    for step in range(5):
        grads = [torch.randn_like(p) for p in ours]
        lr = 1e-2 / (step + 1)  # a schedule: the rate is an input of every step
        for p, g in zip(reference, grads):
            p.grad = g.clone()
        reference_optimizer.param_groups[0]["lr"] = lr
        reference_optimizer.step()
        adam_step_(adam_tensors(ours_optimizer), grads, torch.tensor(lr), torch.tensor(True))
        for mine, theirs in zip(ours, reference):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
    # The state is torch's, under its names: either optimizer resumes from the other's.
    mine, theirs = ours_optimizer.state_dict()["state"], reference_optimizer.state_dict()["state"]
    assert mine.keys() == theirs.keys()
    for index in mine:
        assert mine[index].keys() == theirs[index].keys() == {"step", "exp_avg", "exp_avg_sq"}
        for key in mine[index]:
            assert mine[index][key].dtype == theirs[index][key].dtype
            torch.testing.assert_close(mine[index][key], theirs[index][key], rtol=1e-5,
                                       atol=1e-6)


def test_a_step_not_applied_changes_nothing_even_with_nan_gradients() -> None:
    params = parameters(1)
    optimizer = torch.optim.Adam(params, lr=1e-2)
    tensors = adam_tensors(optimizer)
    adam_step_(tensors, [torch.ones_like(p) for p in params], torch.tensor(1e-2),
               torch.tensor(True))
    before = [t.clone() for t in [*params, *tensors.exp_avgs, *tensors.exp_avg_sqs,
                                  *tensors.steps]]
    adam_step_(tensors, [torch.full_like(p, float("nan")) for p in params], torch.tensor(1e-2),
               torch.tensor(False))
    after = [*params, *tensors.exp_avgs, *tensors.exp_avg_sqs, *tensors.steps]
    for old, new in zip(before, after):
        torch.testing.assert_close(new, old, rtol=0, atol=0)
    assert float(tensors.steps[0]) == 1.0


@pytest.mark.parametrize("option", [{"weight_decay": 0.1}, {"amsgrad": True},
                                    {"maximize": True}])
def test_options_the_tensor_step_does_not_implement_are_refused(option: dict) -> None:
    with pytest.raises(ValueError, match="plain Adam only"):
        adam_tensors(torch.optim.Adam(parameters(2), **option))
