"""Adam's step as tensor operations, for a gradient step compiled into one graph.

``torch.optim.Adam.step`` is Python around one fused kernel: at the cart-pole sizes the Python
costs about twice the kernel, three times per SAC update. Written as tensor operations, the same
arithmetic compiles into the update's graph (``compile_update``) and fuses with it.

The state stays in the ``torch.optim.Adam`` objects, under the names and dtypes their
``state_dict`` uses (``step``, ``exp_avg``, ``exp_avg_sq`` per parameter), so a checkpoint is
the same whether its updates were compiled or not, and either kind resumes from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AdamTensors:
    """An Adam optimizer as lists of tensors: what one step reads and writes. Built afresh
    for each step, so that a loaded ``state_dict`` is what steps."""

    params: list[torch.Tensor]
    exp_avgs: list[torch.Tensor]
    exp_avg_sqs: list[torch.Tensor]
    steps: list[torch.Tensor]
    betas: tuple[float, float]
    eps: float


def adam_tensors(optimizer: torch.optim.Adam) -> AdamTensors:
    """The tensors of ``optimizer`` (one parameter group), creating the state that
    ``torch.optim.Adam`` creates at its first step where there is none yet.

    :raises ValueError: for several parameter groups or for options the tensor step does not
        implement (weight decay, AMSGrad, maximisation), rather than stepping differently from
        ``torch.optim.Adam``.
    """
    (group,) = optimizer.param_groups
    if group["weight_decay"] or group["amsgrad"] or group["maximize"]:
        raise ValueError("the compiled Adam step implements plain Adam only (no weight decay, "
                         "AMSGrad or maximize)")
    states = []
    for param in group["params"]:
        state = optimizer.state[param]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        states.append(state)
    return AdamTensors(list(group["params"]), [state["exp_avg"] for state in states],
                       [state["exp_avg_sq"] for state in states],
                       [state["step"] for state in states], tuple(group["betas"]),
                       float(group["eps"]))


@torch.no_grad()
def adam_step_(group: AdamTensors, grads: list[torch.Tensor] | tuple[torch.Tensor, ...],
               lr: torch.Tensor, apply: torch.Tensor) -> None:
    """One step of ``torch.optim.Adam``'s arithmetic on ``group`` in place, where ``apply`` (a
    boolean scalar) is true; where it is false, parameters and state keep their values, even
    when ``grads`` hold NaN (a check that runs inside the graph, before anything changes).

    :param lr: the learning rate, a scalar tensor (a graph input, so that changing it does not
        recompile).
    """
    beta1, beta2 = group.betas
    for param, grad, exp_avg, exp_avg_sq, step in zip(group.params, grads, group.exp_avgs,
                                                      group.exp_avg_sqs, group.steps):
        new_step = step + 1
        new_avg = exp_avg.lerp(grad, 1 - beta1)
        new_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
        denominator = new_avg_sq.sqrt() / (1 - beta2 ** new_step).sqrt() + group.eps
        new_param = param - (lr / (1 - beta1 ** new_step)) * new_avg / denominator
        step.copy_(torch.where(apply, new_step, step))
        exp_avg.copy_(torch.where(apply, new_avg, exp_avg))
        exp_avg_sq.copy_(torch.where(apply, new_avg_sq, exp_avg_sq))
        param.copy_(torch.where(apply, new_param, param))
