"""``model.projection: per_head``: each head's cached keys and values projected only over its own largest
span, against ``shared`` (every head over the layer's band), in float64 for the adaptive and the dynamic
span under both windows; its key off the run id at its default; refused beside ``model.compile``."""

from __future__ import annotations

import pytest
import torch

from repro.config.spec import build_run
from repro.models import adaptive_span as AS


def _model(kind: str, window: str, projection: str) -> AS.Model:
    torch.manual_seed(0)
    cfg = AS.Config(
        layers=2,
        d_model=24,
        d_ff=32,
        heads=3,
        dropout=0.0,
        window=window,
        span=AS.SpanConfig(kind=kind, limit=160, ramp=8, init=0.1, dynamic_bias_init=-1.5),
        projection=projection,
    )
    model = AS.Model(cfg, 13, block=16).double().train()
    if kind == "adaptive":  # heads far apart: one needs a fifth of the band, one all of it
        with torch.no_grad():
            for layer in model.layers:
                layer.attn.z_prime.copy_(torch.tensor([0.05, 0.3, 0.9], dtype=torch.float64))
    return model


@pytest.mark.parametrize("window", ["self_and_past", "past"])
@pytest.mark.parametrize("kind", ["adaptive", "dynamic"])
def test_per_head_projection_equals_shared_over_blocks(kind, window):
    """Three blocks (the cache shorter than the band, then full): outputs, carried caches and every
    gradient agree; and per_head projected fewer cached states than the band holds."""
    shared, per_head = _model(kind, window, "shared"), _model(kind, window, "per_head")
    per_head.load_state_dict(shared.state_dict())
    g = torch.Generator().manual_seed(2)
    blocks = [torch.randint(0, 13, (2, 16), generator=g) for _ in range(3)]
    projected = []
    original = AS.SpanAttention._past_per_head

    def counting(self, lin, past, first):
        projected.append(sum(past.shape[1] - f for f in first) / (self.H * max(1, past.shape[1])))
        return original(self, lin, past, first)

    outs = {}
    for name, model in (("shared", shared), ("per_head", per_head)):
        state, loss = None, 0.0
        AS.SpanAttention._past_per_head = counting if name == "per_head" else original
        try:
            for x in blocks:
                out = model(x, state)
                loss = loss + (out.logits * torch.linspace(-1, 1, out.logits.numel()).view_as(out.logits)).sum()
                if out.aux_loss is not None:
                    loss = loss + out.aux_loss
                state = out.state
        finally:
            AS.SpanAttention._past_per_head = original
        grads = torch.autograd.grad(loss, list(model.parameters()))
        outs[name] = (out.logits, state, grads)
    torch.testing.assert_close(outs["per_head"][0], outs["shared"][0], rtol=1e-10, atol=1e-12)
    for a, b in zip(outs["per_head"][1], outs["shared"][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(outs["per_head"][2], outs["shared"][2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    assert projected and min(projected) < 1.0  # some head skipped cached states


def _spec(**model):
    base = {
        "data": {"name": "wiki-lead8", "block": 64},
        "model": {"family": "adaptive_span", "layers": 1, "d_model": 16, "d_ff": 32, "heads": 2, **model},
        "train": {"steps": 10},
    }
    return build_run("m", "tiny", {}, base)


def test_projection_is_off_the_run_id_at_its_default_and_refused_beside_compile():
    assert _spec(projection="shared").run_id == _spec().run_id and "projection" not in _spec().resolved()["model"]
    assert _spec(projection="per_head").run_id != _spec().run_id
    with pytest.raises(Exception, match="projection.*per_head.*model.compile"):
        _spec(projection="per_head", compile=True)
