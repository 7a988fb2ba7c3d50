"""The frontier's backbone and its attentions, each against dense attention under its own mask, in float64."""

from __future__ import annotations

import math
import re
import sys
import types
from pathlib import Path

import pytest
import torch

from repro.config import manifest as manifests
from repro.config.families import ATTENTIONS, FrontierConfig, SpanConfig, SparseTransformerConfig
from repro.models import attentions
from repro.models import patterns as P
from repro.models.frontier import Model
from repro.models.span import soft_mask
from repro.models.sparse_transformer import Model as SparseModel
from repro.registry import Plugin

B, H, T, DH = 2, 2, 37, 8
t = torch.arange(T)[:, None]
j = torch.arange(T)[None]
CAUSAL = j <= t


def dense_reference(q, k, v, allowed, m=None):
    """softmax over the allowed keys, weights times the soft mask m, renormalised (eq. 5)."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    w = torch.exp(s - s.max(-1, keepdim=True).values) * allowed
    w = w * m if m is not None else w
    return (w / w.sum(-1, keepdim=True)) @ v


CASES = {
    "dense": ({}, lambda a: (CAUSAL, None)),
    "window": ({"span": SpanConfig(limit=10)}, lambda a: (CAUSAL & (t - j < 10), None)),
    "adaptive": (
        {"span": SpanConfig(limit=20, ramp=4, init=0.3)},
        lambda a: (CAUSAL, soft_mask((t - j).double(), 20 * a.z_prime.detach().clamp(0, 1)[:, None, None], 4)),
    ),
    "longformer": ({"span": SpanConfig(limit=6), "globals": 3}, lambda a: (CAUSAL & ((t - j < 6) | (j < 3)), None)),
    "strided": ({"stride": 6}, lambda a: (torch.from_numpy(P.layer_mask("strided", T, 6, None, H, "merged")), None)),
    "fixed": ({"stride": 6, "c": 2}, lambda a: (torch.from_numpy(P.layer_mask("fixed", T, 6, 2, H, "merged")), None)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_attention_is_dense_attention_under_its_own_mask(name):
    torch.manual_seed(0)
    keys, expected = CASES[name]
    cfg = FrontierConfig(attention=name, heads=H, d_model=H * DH, **keys)
    attention = attentions.build(cfg, 0).double()
    q, k, v = (torch.randn(B, H, T, DH, dtype=torch.float64, requires_grad=True) for _ in range(3))
    x = torch.randn(B, T, H * DH, dtype=torch.float64)
    allowed, m = expected(attention)
    out, ref = attention(q, k, v, x), dense_reference(q, k, v, allowed.double(), m)
    assert torch.allclose(out, ref, atol=1e-12)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    assert all(
        torch.allclose(g, r, atol=1e-10) for g, r in zip(grads, torch.autograd.grad(ref.square().sum(), (q, k, v)))
    )
    if m is None:  # the FLOPs count the keys the mask allows
        assert attention.keys_per_query(T) == pytest.approx(float(allowed.double().sum(-1).mean()))


def test_the_dynamic_span_masks_each_query_by_its_own_span():
    torch.manual_seed(1)
    cfg = FrontierConfig(attention="dynamic", heads=H, d_model=H * DH, span=SpanConfig(limit=16, ramp=4))
    attention = attentions.build(cfg, 0).double()
    torch.nn.init.normal_(attention.span_proj.weight, 0.0, 1.0)
    q, k, v = (torch.randn(B, H, T, DH, dtype=torch.float64) for _ in range(3))
    x = torch.randn(B, T, H * DH, dtype=torch.float64)
    z = 16 * torch.sigmoid(attention.span_proj(x)).transpose(1, 2)  # (B, H, T)
    m = soft_mask((t - j).double(), z[..., None], 4)
    within_s = CAUSAL & (t - j < 16)  # the window is S: the ramp beyond it is cut
    assert torch.allclose(attention(q, k, v, x), dense_reference(q, k, v, within_s.double(), m), atol=1e-12)


@pytest.mark.parametrize("name", ATTENTIONS)
def test_the_backbone_is_causal_and_only_the_attention_differs(name):
    torch.manual_seed(0)
    cfg = FrontierConfig(
        attention=name, layers=2, heads=2, d_model=16, span=SpanConfig(limit=16, ramp=4), stride=8, c=2, globals=2
    )
    model = Model(cfg, vocab_size=11, block=48).double()
    x = torch.randint(0, 11, (2, 48))
    y = x.clone()
    y[:, 30:] = (y[:, 30:] + 1) % 11  # the future changes: the logits before it may not
    assert torch.equal(model(x).logits[:, :30], model(y).logits[:, :30])
    dense = Model(cfg.model_copy(update={"attention": "dense"}), vocab_size=11, block=48)
    own = {n for n, _ in model.named_parameters() if ".attn." in n}
    assert {n for n, _ in model.named_parameters()} - own == {n for n, _ in dense.named_parameters()}
    stats = model.stats()
    assert stats["flops_per_token"] == model.flops_per_token() > 0
    if name in ("window", "adaptive", "dynamic"):
        assert 0 < stats["avg_span"] <= 16 and len(stats["spans"]) == 2


def test_an_attention_is_a_file_and_its_entry():
    """Every file of repro/models/attentions/ is registered, by its name, and every entry is a file there
    (what the dense-reference tests above cover: every registered attention)."""
    folder = Path(attentions.__file__).parent
    assert sorted(p.stem for p in folder.glob("[a-z]*.py")) == sorted(ATTENTIONS)
    assert all(entry.module == f"repro.models.attentions.{name}" for name, entry in ATTENTIONS.items())
    assert set(ATTENTIONS) == {*CASES, "dynamic"}


class Own(torch.nn.Module):
    """One more attention, the smallest: each query sees only itself."""

    loss = None

    def __init__(self, cfg, layer):
        super().__init__()

    def forward(self, q, k, v, x):
        return v

    def keys_per_query(self, T):
        return 1.0

    def spans(self):
        return None


def test_one_more_attention_is_one_entry_and_the_frontier_manifest_runs_it(monkeypatch):
    """Registered (here for the test's duration: a module of its own), an attention is a variant of the
    frontier manifest at every scale, which is not touched, and the registered attentions' cells keep their
    run ids."""
    module = types.ModuleType("one_more_attention")
    module.Attention = Own
    monkeypatch.setitem(sys.modules, module.__name__, module)
    path = Path(__file__).parents[2] / "experiments" / "suite" / "frontier.yaml"
    before = {s: [r.run_id for r in manifests.load(path).expand(s, seeds=1)] for s in ("tiny", "cpu")}
    registered = len(ATTENTIONS)
    with ATTENTIONS.added(Plugin("own", module.__name__)):
        manifest = manifests.load(path)
        for scale in ("tiny", "cpu"):
            runs = manifest.expand(scale, seeds=1)
            assert [r.cell["variant"] for r in runs][-1] == "own" and runs[-1].model.attention == "own"
            assert [r.run_id for r in runs[:-1]] == before[scale] and len(runs) == len(ATTENTIONS) == registered + 1
        spec = manifest.expand("tiny", seeds=1)[-1]
        model = Model(spec.model, vocab_size=11, block=16)
        assert model.keys_per_query() == 1.0 and model(torch.zeros(1, 16, dtype=torch.long)).logits.shape == (1, 16, 11)
    assert "own" not in ATTENTIONS and len(manifests.load(path).expand("tiny", seeds=1)) == registered


def test_factorized_positions_make_the_fixed_cell_the_sparse_transformer():
    """With ``positions: factorized`` the frontier's fixed attention is the Sparse Transformer family's fixed
    model: the same function of the same weights (q, k, v fused), so the positions cell of
    experiments/suite/frontier-positions.yaml compares the two schemes and nothing else."""
    torch.manual_seed(0)
    dims = {"layers": 2, "d_model": 16, "heads": 2, "stride": 8, "c": 2, "combine": "merged"}
    frontier = Model(FrontierConfig(attention="fixed", positions="factorized", **dims), vocab_size=11, block=44)
    st = SparseModel(SparseTransformerConfig(pattern="fixed", **dims), vocab_size=11, block=44)
    theirs = st.state_dict()
    ours = {"rows.weight": theirs.pop("pos.0.weight"), "cols.weight": theirs.pop("pos.1.weight")}
    for i in range(dims["layers"]):
        a = f"blocks.{i}.attn."
        for p in ("weight", "bias"):
            ours[f"blocks.{i}.qkv.{p}"] = torch.cat([theirs.pop(f"{a}{n}.{p}") for n in "qkv"])
            ours[f"blocks.{i}.proj.{p}"] = theirs.pop(f"{a}proj.{p}")
    frontier.load_state_dict({**theirs, **ours})
    x = torch.randint(0, 11, (2, 44))
    assert torch.allclose(frontier.double()(x).logits, st.double()(x).logits, atol=1e-12)
    absolute = Model(FrontierConfig(attention="fixed", **dims), vocab_size=11, block=44)
    assert {n for n, _ in absolute.named_parameters()} ^ set(frontier.state_dict()) == {
        "pos.weight",
        "rows.weight",
        "cols.weight",
    }


@pytest.mark.parametrize(
    "axis, error",
    [
        ("{each: model.bogus}", "grid.variant: expected {each: KEY, with: {NAME: {key: value}}}, KEY one of"),
        ("{each: model.attention, with: {nope: {}}}", "grid.variant: with: expected a mapping of dense, window,"),
        ("{name: x}", "grid.variant: expected a list of mappings, each with a name"),
    ],
)
def test_a_variant_axis_over_the_registry_is_checked(tmp_path, axis, error):
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: m\ntitle: t\npaper: suite\nbase:\n  data: {name: linux-doc, block: 64}\n"
        f"  model: {{family: frontier, layers: 1, d_model: 16, heads: 2}}\ngrid:\n  variant: {axis}\n"
    )
    with pytest.raises(manifests.ManifestError, match=re.escape(error)):
        manifests.load(path)
