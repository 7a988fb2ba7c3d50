"""Adagrad with per-tensor gradient clipping, as the adaptive-span code that produced the paper's numbers.

The paper (section 4.1) trains with Adagrad, lr 0.07, and "gradient clipping" of 0.03 per parameter
tensor. In the official implementation the clip does not rescale the gradient: it scales that tensor's
*learning rate*, and the Adagrad accumulator sees the unclipped gradient. For each parameter tensor p
with gradient g (plus ``weight_decay * p``):

    G   <- G + g * g                                       (accumulator of unclipped squares)
    lr' <- lr * clip / (||g||_2 + 1e-10)  if ||g||_2 > clip, else lr
    p   <- p - lr' * g / (sqrt(G) + 1e-10)

Clipping the gradient first and handing it to ``torch.optim.Adagrad`` is *not* the same: Adagrad
divides by the root of the accumulated clipped squares, so the clip cancels and the first step moves
every element by the full lr whatever its gradient (measured: a tiny adaptive-span model stays at the
unigram level, every span z at 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

EPS = 1e-10  # both epsilons of the official code: in the clip's denominator and added to sqrt(G)


class AdagradClip(torch.optim.Optimizer):
    """Adagrad whose per-tensor clip scales each tensor's learning rate (``clip <= 0``: plain Adagrad
    with the official epsilon)."""

    def __init__(self, params: Iterable, lr: float, clip: float, weight_decay: float = 0.0):
        if lr < 0 or clip < 0 or weight_decay < 0:
            raise ValueError(f"lr, clip and weight_decay must be >= 0, got {lr}, {clip}, {weight_decay}")
        super().__init__(params, {"lr": lr, "clip": clip, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if group["weight_decay"]:
                grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
            for p in params:
                state = self.state[p]
                if not state:
                    state["sum"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["step"] = torch.zeros((), dtype=torch.float32)
            sums = [self.state[p]["sum"] for p in params]
            torch._foreach_add_([self.state[p]["step"] for p in params], 1)
            torch._foreach_addcmul_(sums, grads, grads)
            std = torch._foreach_sqrt(sums)
            torch._foreach_add_(std, EPS)
            update = torch._foreach_div(grads, std)
            lr, clip = group["lr"], group["clip"]
            if clip > 0:
                norms = torch.stack(torch._foreach_norm(grads))  # one rate per tensor, computed at once
                rates = torch.where(norms > clip, clip / (norms + EPS), 1.0).mul_(-lr)
                torch._foreach_mul_(update, list(rates.unbind()))
            else:
                torch._foreach_mul_(update, -lr)
            torch._foreach_add_(params, update)
        return loss
