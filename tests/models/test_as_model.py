"""Correctness of the adaptive-span model family against naive references (float64)."""

from __future__ import annotations

import typing

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from repro.models import adaptive_span as AS
from repro.models.relative_attention import as_band, band_attention, band_scores, bucketed_attention, chunk_size
from repro.models.span import soft_mask
from repro.models.span_reference import dense_logits

torch.set_num_threads(1)


def make(
    kind="adaptive",
    S=64,
    R=8,
    layers=2,
    d=16,
    heads=2,
    d_ff=32,
    vocab=11,
    dropout=0.0,
    z=None,
    seed=0,
    window="self_and_past",
    **span,
):
    torch.manual_seed(seed)
    cfg = AS.Config(
        layers=layers,
        d_model=d,
        d_ff=d_ff,
        heads=heads,
        dropout=dropout,
        window=window,
        span=AS.SpanConfig(kind=kind, limit=S, ramp=R, **span),
    )
    m = AS.Model(cfg, vocab, block=32).double().eval()
    if z is not None:
        with torch.no_grad():
            for layer, zl in zip(m.layers, z):
                layer.attn.z_prime.copy_(torch.tensor(zl, dtype=torch.float64))
    return m


def run_blocks(model, x, block):
    state, outs = model.init_state(x.shape[0], x.device), []
    for i in range(0, x.shape[1], block):
        o = model(x[:, i : i + block], state)
        state = o.state
        outs.append(o.logits)
    return torch.cat(outs, 1), state


# ---- tests -------------------------------------------------------------------------------------------


def test_soft_mask_matches_formula_and_broadcasts():
    R = 8.0
    x = torch.arange(0, 60, dtype=torch.float64)
    for z in [0.0, 3.5, 20.0, 50.25]:
        m = soft_mask(x, torch.tensor(z, dtype=torch.float64), R)
        want = [1.0 if xi <= z else (0.0 if xi >= z + R else (R + z - xi) / R) for xi in x.tolist()]
        assert torch.allclose(m, torch.tensor(want, dtype=torch.float64))
    z = torch.tensor([0.0, 10.0, 30.0])[:, None, None]
    assert soft_mask(torch.arange(5.0)[None, None, :], z, 4).shape == (3, 1, 5)


def test_soft_mask_gradient_wrt_z_is_one_over_R_on_the_ramp():
    z = torch.tensor(10.3, dtype=torch.float64, requires_grad=True)
    x = torch.arange(30, dtype=torch.float64)
    soft_mask(x, z, 8.0).sum().backward()
    # ramp covers x in (z, z + R) = 11..18: 8 points, each with slope 1/R
    assert z.grad.item() == pytest.approx(8 / 8.0)


def test_model_gradient_to_z_matches_finite_differences():
    model = make("adaptive", S=96, R=8, z=[[0.13, 0.41], [0.07, 0.29]])
    x = torch.randint(0, 12, (2, 48))
    w = torch.randn(2, 16, 11, dtype=torch.float64)

    with torch.no_grad():
        _, state = run_blocks(model, x[:, :32], 16)  # a cache (no gradient flows into it, as in TXL)

    def loss():
        last = model(x[:, 32:], state)
        first = model(x[:, :16])  # also one block with an empty cache
        return (last.logits * w).sum() + (first.logits * w).sum() + last.aux_loss * 1e3

    model.zero_grad()
    loss().backward()
    for layer in model.layers:
        zp = layer.attn.z_prime
        for h in range(zp.numel()):
            eps = 1e-6
            with torch.no_grad():
                zp[h] += eps
                up = loss().item()
                zp[h] -= 2 * eps
                down = loss().item()
                zp[h] += eps
            fd = (up - down) / (2 * eps)
            assert zp.grad[h].item() == pytest.approx(fd, rel=1e-5, abs=1e-7)
            assert abs(fd) > 1e-3  # the mask really depends on z


@pytest.mark.parametrize("window", ["self_and_past", "past"])
@pytest.mark.parametrize("kind", ["adaptive", "dynamic"])
def test_trimmed_and_untrimmed_attention_agree(kind, window):
    model = make(kind, S=300, R=16, z=[[0.05, 0.2], [0.1, 0.02]] if kind == "adaptive" else None, window=window)
    x = torch.randint(0, 12, (2, 8 * 40))
    trimmed, st = run_blocks(model, x, 40)
    assert all(w < 300 for _, w in model.latest_spans)  # it did trim
    kept = 299 + (window == "past")  # the past window (eq. 5) reaches one state further back
    if kind == "adaptive":
        assert all(s.shape[1] < kept for s in st)  # and kept a shorter cache
    model.trim = False
    full, st_full = run_blocks(model, x, 40)
    assert all(w == 300 for _, w in model.latest_spans)
    assert all(s.shape[1] == kept for s in st_full)
    assert (trimmed - full).abs().max().item() < 1e-6


@pytest.mark.parametrize("window", ["self_and_past", "past"])
@pytest.mark.parametrize("kind", ["fixed", "adaptive", "dynamic"])
def test_block_by_block_with_cache_equals_all_at_once(kind, window):
    model = make(kind, S=100, R=16, z=[[0.3, 0.6], [0.1, 0.9]] if kind == "adaptive" else None, window=window)
    x = torch.randint(0, 12, (3, 160))
    blocks, _ = run_blocks(model, x, 32)
    once = model(x).logits
    assert (blocks - once).abs().max().item() < 1e-9


@pytest.mark.parametrize("window", ["self_and_past", "past"])
@pytest.mark.parametrize("kind", ["fixed", "adaptive", "dynamic"])
def test_attention_equals_dense_reference(kind, window):
    """The fast paths (band, trimming, per-query buckets, block by block with the cache) against eq. 5 over
    every pair (repro.models.span_reference): fixed, a band of the last S tokens (the past window: the S
    before the query, zero states before the stream); adaptive/dynamic, m exp(s)."""
    model = make(kind, S=24, R=8, z=[[0.2, 0.7], [0.45, 0.0]] if kind == "adaptive" else None, window=window)
    x = torch.randint(0, 12, (2, 80))
    blocks, _ = run_blocks(model, x, 16)
    assert (blocks - dense_logits(model, x)).abs().max().item() < 1e-9


@pytest.mark.parametrize("M,P,chunk", [(12, 0, 4), (12, 5, 3), (10, 7, 4), (9, 20, 9), (16, 16, 1)])
def test_relative_scores_equal_naive_pair_loop(M, P, chunk):
    B, H, dh, W = 2, 3, 4, P + 1
    q = torch.randn(B, H, M, dh, dtype=torch.float64)
    k = torch.randn(B, H, P + M, dh, dtype=torch.float64)
    p = torch.randn(dh, W, dtype=torch.float64)  # p[:, x] embeds distance x
    s = as_band(band_scores(q, k, p.flip(-1), chunk=chunk))[:, :, :M]
    for i in range(M):  # query i is key P + i
        for x in range(W):
            want = (q[:, :, i] * (k[:, :, P + i - x] + p[:, x])).sum(-1)  # q_t . (k_r + p_{t-r})
            assert torch.allclose(s[:, :, i, W - 1 - x], want)


@pytest.mark.parametrize(
    "M,W,n_invalid,tile", [(12, 20, 0, 3), (10, 33, 5, 4), (16, 40, 30, 16), (1, 17, 0, 2), (7, 64, 9, 5)]
)
def test_bucketed_attention_equals_one_band(M, W, n_invalid, tile):
    """Per-query spans: the buckets (each query over the distances its span needs, in tiles of one
    sequence and head) give the one band's outputs and every gradient, z included."""
    B, H, dh, R = 2, 3, 4, 8.0
    g = torch.Generator().manual_seed(M * W)

    def leaf(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)

    q, k, v, pe = leaf(B, H, M, dh), leaf(B, H, W - 1 + M, dh), leaf(B, H, W - 1 + M, dh), leaf(dh, W)
    z = (torch.rand(B, H, M, generator=g, dtype=torch.float64) ** 3 * W).requires_grad_()  # mostly short
    x = torch.arange(W - 1, -1, -1, dtype=torch.float64)
    weights = torch.randn(B, H, M, dh, generator=g, dtype=torch.float64)
    one = band_attention(
        q, k, v, pe, chunk=chunk_size(M, W, 4), mask=soft_mask(x, z[..., None], R), n_invalid=n_invalid
    )
    need = (z.detach() + R).ceil().clamp(1, W)
    bucketed = bucketed_attention(
        q,
        k,
        v,
        pe,
        need=need,
        mask_of=lambda x, rows: soft_mask(x, z.reshape(-1)[rows][..., None], R),
        n_invalid=n_invalid,
        base=4,
        tile=tile,
    )
    assert torch.allclose(bucketed, one, atol=1e-12)
    inputs = (q, k, v, pe, z)
    for a, b in zip(
        torch.autograd.grad((one * weights).sum(), inputs), torch.autograd.grad((bucketed * weights).sum(), inputs)
    ):
        assert torch.allclose(a, b, atol=1e-12)


def test_the_self_and_past_window_sees_exactly_the_last_S_tokens_itself_included():
    S = 8
    model = make("fixed", S=S, layers=1)
    x = torch.randint(0, 11, (1, 40))
    base = model(x).logits
    x2 = x.clone()
    x2[0, 40 - S - 1] = (x2[0, 40 - S - 1] + 1) % 11  # distance S from the last token: out of reach
    assert torch.allclose(model(x2).logits[0, -1], base[0, -1])
    x3 = x.clone()
    x3[0, 40 - S] = (x3[0, 40 - S] + 1) % 11  # distance S - 1: inside
    assert not torch.allclose(model(x3).logits[0, -1], base[0, -1])


def test_the_past_window_sees_eq5s_S_previous_tokens_not_itself():
    S = 8
    model = make("fixed", S=S, layers=1, window="past")
    x = torch.randint(0, 11, (1, 40))
    base = model(x).logits
    for distance, reached in ((S + 1, False), (S, True)):  # self_and_past reaches S - 1 at most
        x2 = x.clone()
        x2[0, 39 - distance] = (x2[0, 39 - distance] + 1) % 11
        assert torch.allclose(model(x2).logits[0, -1], base[0, -1]) is not reached
    attn = model.layers[0].attn  # the query's own key and value do not enter: only its q does
    h = model.emb(x)
    with torch.no_grad():
        attn.k.weight[:] = 0  # every key 0: uniform weights over the S states before the query
    flat = attn(h, h.new_zeros(1, 0, 16), model.pe.detach() * 0).out
    v = attn.v(h)
    assert torch.allclose(flat[0, 20], attn.o(v[0, 20 - S : 20].mean(0)))  # t - S .. t - 1, not t


def test_dynamic_span_gradients_reach_v_and_b():
    model = make("dynamic", S=64, R=8, dropout=0.0)
    model.train()
    x = torch.randint(0, 12, (2, 48))
    out = model(x)
    nll = F.cross_entropy(out.logits.reshape(-1, 11), torch.randint(0, 11, (96,)))
    nll.backward(retain_graph=True)
    for layer in model.layers:
        v, b = layer.attn.span_proj.weight.grad, layer.attn.span_proj.bias.grad
        assert v.abs().sum() > 0 and b.abs().sum() > 0  # through the mask
        assert torch.isfinite(v).all() and torch.isfinite(b).all()
    model.zero_grad()
    out.aux_loss.backward()  # and through the span penalty, which pushes z_t (so b) down
    assert all((layer.attn.span_proj.bias.grad > 0).all() for layer in model.layers)
    # the initial bias: z_t = S sigmoid(-4) on average
    model2 = make("dynamic", S=64, R=8)
    assert model2.layers[0].attn.span_proj.bias.tolist() == [-4.0, -4.0]


def test_span_loss_modes():
    z = [[0.25, 0.5], [0.0, 1.0]]
    S, lam = 64, 1e-3
    m = make("adaptive", S=S, z=z, loss_coef=lam)
    want_mean = lam * sum(S * np.mean(zl) for zl in z)
    assert m(torch.randint(0, 11, (1, 8))).aux_loss.item() == pytest.approx(want_mean)
    m = make("adaptive", S=S, z=z, loss_coef=lam, loss_mode="sum")
    assert m(torch.randint(0, 11, (1, 8))).aux_loss.item() == pytest.approx(lam * S * sum(map(sum, z)))
    assert make("fixed")(torch.randint(0, 11, (1, 8))).aux_loss is None


def test_contract_state_stats_and_clamp():
    S = 200
    m = make("adaptive", S=S, R=32, vocab=11, z=[[0.0, 0.1], [0.5, 1.3]])
    st = m.init_state(3, torch.device("cpu"))
    assert [s.shape for s in st] == [(3, 0, 16), (3, 0, 16)]
    x = torch.full((3, 10), 11)  # the start token id = vocab_size is a valid input
    out = m(x, st)
    assert out.logits.shape == (3, 10, 11)
    m.after_optimizer_step()
    assert m.layers[1].attn.z_prime.tolist() == [0.5, 1.0]
    out = m(x, out.state)
    # layer 0: z + R = 20 + 32 -> band 64, cache 63 + 64 = 127 (only 20 seen so far); layer 1: S - 1
    assert [s.shape[1] for s in out.state] == [20, 20]
    stats = m.stats()
    assert stats["spans"] == [[0.0, 20.0], [100.0, 200.0]]
    assert stats["effective_spans"] == [[32.0, 52.0], [132.0, 200.0]]
    assert stats["avg_span"] == pytest.approx((32 + 52 + 132 + 200) / 4)
    assert stats["attention_window"] == [64, 200]
    assert stats["flops_per_token"] == m.flops_per_token() > 0
    assert m.layers[0].attn.cache_len() == 127 and m.layers[1].attn.cache_len() == S - 1


def test_config_fields_use_manifest_types():
    allowed = {int, float, bool, str}
    for cls in (AS.Config, AS.SpanConfig):
        for info in cls.model_fields.values():
            t = info.annotation
            assert t in allowed or typing.get_origin(t) is typing.Literal or issubclass(t, AS.SpanConfig)
    cfg = AS.Config()
    assert (cfg.span.kind, cfg.span.ramp, cfg.span.loss_mode, cfg.span.init) == ("adaptive", 32, "mean_times_S", 0.0)
    m = AS.Model({"layers": 1, "d_model": 8, "heads": 2, "d_ff": 8, "span": {"kind": "fixed", "limit": 16}}, 5, 8)
    assert m.cfg.span.kind == "fixed" and m.cfg.span.limit == 16
