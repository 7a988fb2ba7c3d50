"""The optimisers: Adagrad with the official adaptive-span per-tensor clipping, and global-norm clipping."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from repro.config.spec import RunSpec, SpecError, build_run
from repro.models import adaptive_span as AS
from repro.train.module import LMModule
from repro.train.optim import AdagradClip

LR, CLIP = 0.07, 0.03


def by_hand(p0: np.ndarray, grads: list[np.ndarray], lr: float, clip: float) -> np.ndarray:
    """The official update written out with numpy, one step per gradient."""
    p, acc = p0.copy(), np.zeros_like(p0)
    for g in grads:
        acc += g * g
        norm = np.sqrt((g * g).sum())
        clr = lr * clip / (norm + 1e-10) if norm > clip else lr
        p -= clr * g / (np.sqrt(acc) + 1e-10)
    return p


def test_one_and_two_steps_match_the_formula():
    rng = np.random.default_rng(0)
    big0, small0 = rng.normal(size=(3, 4)), rng.normal(size=5)
    big = torch.nn.Parameter(torch.tensor(big0))
    small = torch.nn.Parameter(torch.tensor(small0))
    opt = AdagradClip([big, small], lr=LR, clip=CLIP)
    g_big = [rng.normal(size=(3, 4)), 2.0 * rng.normal(size=(3, 4))]  # norms ~3.5, ~7: clipped
    g_small = [np.full(5, 0.004), np.array([0.01, -0.002, 0.0, 0.003, 0.001])]  # norms < 0.03: not clipped
    assert all(np.linalg.norm(g) > CLIP for g in g_big) and all(np.linalg.norm(g) < CLIP for g in g_small)
    for step in range(2):
        big.grad, small.grad = torch.tensor(g_big[step]), torch.tensor(g_small[step])
        opt.step()
        np.testing.assert_allclose(big.detach().numpy(), by_hand(big0, g_big[: step + 1], LR, CLIP), rtol=1e-12)
        np.testing.assert_allclose(small.detach().numpy(), by_hand(small0, g_small[: step + 1], LR, CLIP), rtol=1e-12)
    # The clipped tensor moved by ~lr * clip / ||g|| per element on the first step, not by the full lr
    # (which is what clipping the gradient before torch's Adagrad does).
    first = by_hand(big0, g_big[:1], LR, CLIP) - big0
    assert np.abs(first).max() < LR * CLIP / np.linalg.norm(g_big[0]) * 1.0001


def test_clipping_before_torch_adagrad_is_not_the_same():
    g = torch.tensor([3.0, -4.0])  # norm 5
    p_ours = torch.nn.Parameter(torch.zeros(2))
    p_ours.grad = g.clone()
    AdagradClip([p_ours], lr=LR, clip=CLIP).step()
    p_torch = torch.nn.Parameter(torch.zeros(2))
    p_torch.grad = g * (CLIP / 5.0)
    torch.optim.Adagrad([p_torch], lr=LR).step()
    assert torch.allclose(p_torch.detach().abs(), torch.full((2,), LR), atol=1e-6)  # the clip cancelled
    assert torch.allclose(p_ours.detach().abs(), torch.full((2,), LR * CLIP / 5.0), rtol=1e-6)


def test_state_round_trips_and_weight_decay_enters_the_gradient():
    torch.manual_seed(0)
    a, b = (torch.nn.Parameter(torch.randn(4, dtype=torch.float64)) for _ in range(2))
    b.data.copy_(a.data)
    initial = a.detach().clone()
    opt_a = AdagradClip([a], lr=0.1, clip=0.5, weight_decay=0.01)
    g0, g1 = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    a.grad = g0.clone()
    opt_a.step()
    opt_b = AdagradClip([b], lr=0.1, clip=0.5, weight_decay=0.01)
    b.data.copy_(a.data)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))  # as a checkpoint would: not shared
    a.grad, b.grad = g1.clone(), g1.clone()
    before = a.detach().clone()
    opt_a.step()
    opt_b.step()
    assert torch.equal(a, b)
    # Second step by hand from step one's accumulator: weight decay enters the gradient (and the clip).
    g0w = g0 + 0.01 * initial
    g1w = g1 + 0.01 * before
    acc = g0w * g0w + g1w * g1w
    norm = g1w.norm()
    clr = 0.1 * (0.5 / (norm + 1e-10) if norm > 0.5 else 1.0)
    expected = before - clr * g1w / (acc.sqrt() + 1e-10)
    assert torch.allclose(a.detach(), expected, rtol=1e-12)


def spec(optimizer: str, clip_mode: str, clip: float = 0.01, **train) -> RunSpec:
    return build_run(
        "t",
        "tiny",
        {},
        {
            "data": {"name": "wiki-lead8", "block": 16},
            "model": {
                "family": "adaptive_span",
                "layers": 1,
                "d_model": 16,
                "d_ff": 32,
                "heads": 2,
                "dropout": 0.0,
                "span": {"kind": "adaptive", "limit": 32, "ramp": 8},
            },
            "train": {"optimizer": optimizer, "lr": 0.05, "clip": clip, "clip_mode": clip_mode, **train},
        },
    )


def test_the_trainer_uses_the_official_optimiser_for_adagrad_per_tensor():
    module = LMModule(spec("adagrad", "per_tensor"), vocab_size=11, shape=None)
    opt = module.configure_optimizers()["optimizer"]
    assert isinstance(opt, AdagradClip) and opt.param_groups[0]["clip"] == 0.01
    module = LMModule(spec("adagrad", "global_norm"), vocab_size=11, shape=None)
    assert module.configure_optimizers()["optimizer"].param_groups[0]["clip"] == 0.0  # clipped globally


def test_per_tensor_clipping_is_refused_with_adam():
    with pytest.raises(SpecError, match="train.clip_mode.*global_norm"):
        spec("adam", "per_tensor")


def test_global_norm_clipping_happens_before_the_optimiser_step():
    """Lightning calls configure_gradient_clipping between backward and step: the optimiser sees a
    global gradient norm of at most `clip` (the Sparse Transformer recipe), and the step still happens."""
    import lightning.pytorch as pl

    s = spec("adam", "global_norm", clip=1e-3, steps=3)
    module = LMModule(s, vocab_size=11, shape=None)
    seen: list[float] = []  # the global norm of the gradients the step used (the closure runs inside step)
    data = torch.randint(0, 11, (4, 17))
    loader = torch.utils.data.DataLoader([(data[i, :-1], data[i, 1:]) for i in range(4)], batch_size=2)
    trainer = pl.Trainer(
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    orig = module.configure_optimizers

    def configure():
        out = orig()
        out["optimizer"].register_step_post_hook(
            lambda opt, *_: seen.append(
                float(
                    torch.linalg.vector_norm(
                        torch.stack(
                            [p.grad.norm() for g in opt.param_groups for p in g["params"] if p.grad is not None]
                        )
                    )
                )
            )
        )
        return out

    module.configure_optimizers = configure
    trainer.fit(module, loader)
    assert len(seen) == 3 and all(n <= 1e-3 * (1 + 1e-5) for n in seen)


def test_init_official_and_paper():
    d, H = 64, 4
    for init, bound in (("official", 1 / math.sqrt(d)), ("paper", 1 / math.sqrt(d // H))):
        torch.manual_seed(0)
        cfg = AS.Config(layers=2, d_model=d, d_ff=128, heads=H, init=init)
        model = AS.Model(cfg, vocab_size=11, block=16)
        for layer in model.layers:
            for lin in (layer.attn.q, layer.attn.k, layer.attn.v, layer.attn.o):
                w = lin.weight.detach()
                assert w.abs().max() <= bound
                assert w.abs().max() > 0.95 * bound  # uniform on the whole interval, not a narrower one
                assert abs(float(w.std()) - bound / math.sqrt(3)) < 0.05 * bound
