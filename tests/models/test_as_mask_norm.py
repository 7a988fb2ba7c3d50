"""``model.mask_norm: official``: the official code's order (softmax over the band, then the mask, then
renormalised with + 1e-8) against eq. 5 written over every pair in that order (float64), and where it
differs from ``eq5``."""

from __future__ import annotations

import pytest
import torch

from repro.config.families import AdaptiveSpanConfig
from repro.config.fields import SpecError, build
from repro.models import adaptive_span as AS
from repro.models.span_reference import dense_logits

torch.set_num_threads(1)


def model(mask_norm: str, z: float, seed: int = 0, S: int = 64) -> AS.Model:
    torch.manual_seed(seed)
    cfg = AS.Config(
        layers=2,
        d_model=16,
        d_ff=32,
        heads=2,
        dropout=0.0,
        window="past",
        mask_norm=mask_norm,
        span=AS.SpanConfig(kind="adaptive", limit=S, ramp=8),
    )
    m = AS.Model(cfg, 11, block=32).double().eval()
    with torch.no_grad():
        for layer in m.layers:
            layer.attn.z_prime.fill_(z)
    return m


def blocks(m: AS.Model, x: torch.Tensor, block: int) -> torch.Tensor:
    state, outs = None, []
    for i in range(0, x.shape[1], block):
        out = m(x[:, i : i + block], state)
        state, outs = out.state, [*outs, out.logits]
    return torch.cat(outs, 1)


@pytest.mark.parametrize("z", [0.0, 0.3, 1.0])
def test_official_order_equals_the_pairwise_reference(z):
    """Untrimmed (the band's softmax over the S keys the reference normalises over), block by block with
    the cache, against the reference over the whole stream."""
    m = model("official", z)
    m.trim = False
    x = torch.randint(0, 11, (2, 96))
    assert (blocks(m, x, 32) - dense_logits(m, x)).abs().max().item() < 1e-9


def test_official_and_eq5_differ_where_the_masked_mass_is_small():
    """A zero span (the mask reaches R = 8 of S = 64 distances) and position embeddings that pull the
    softmax far beyond it: sum m p is small and the + 1e-8 shows; eq. 5 ignores it."""
    official, eq5 = model("official", 0.0), model("eq5", 0.0)
    with torch.no_grad():
        for m in (official, eq5):
            m.pe[:, 8:] = 0.0
            m.pe[:, 8:] += 40.0 * m.layers[0].attn.q.weight.new_ones(())  # far keys: large scores
            m.trim = False
    x = torch.randint(0, 11, (2, 64))
    gap = (blocks(official, x, 32) - blocks(eq5, x, 32)).abs().max().item()
    assert gap > 1e-6
    assert (blocks(official, x, 32) - dense_logits(official, x)).abs().max().item() < 1e-9


def test_official_normalisation_refused_for_the_dynamic_span():
    with pytest.raises(SpecError, match="mask_norm: got 'official'"):
        build(AdaptiveSpanConfig, {"mask_norm": "official", "span": {"kind": "dynamic"}}, "model")


def test_the_default_stays_out_of_the_resolved_spec():
    """eq5 is what every stored run trained with: a later key, absent from their specs and ids."""
    from repro.config.fields import plain

    assert "mask_norm" not in plain(AdaptiveSpanConfig())
    assert plain(AdaptiveSpanConfig(mask_norm="official"))["mask_norm"] == "official"
