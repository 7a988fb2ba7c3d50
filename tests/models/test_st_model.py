"""Sparse Transformer model family: shapes, causality, init scaling, FLOPs, checkpointing, sampling."""

import math

import pytest
import torch

from repro.models import patterns as P
from repro.models.base import ModelOutput
from repro.models.sparse_transformer import Config, Model, gelu_sigmoid

COMBOS = [
    ("dense", "merged"),
    ("strided", "merged"),
    ("strided", "interleaved"),
    ("strided", "multihead"),
    ("fixed", "merged"),
    ("fixed", "interleaved"),
    ("fixed", "multihead"),
]


def small(pattern="dense", combine="merged", **kw):
    base = dict(layers=2, d_model=32, heads=4, pattern=pattern, stride=4, c=1, combine=combine, impl="blocked")
    base.update(kw)
    return Config(**base)


@pytest.mark.parametrize("pattern,combine", COMBOS)
def test_st_forward_shapes_and_causality(pattern, combine):
    torch.manual_seed(0)
    m = Model(small(pattern, combine), vocab_size=256, block=24).double().eval()
    x = torch.randint(0, 257, (2, 24))  # may contain the start token id 256
    out = m(x)
    assert isinstance(out, ModelOutput) and out.state is None and out.aux_loss is None
    assert out.logits.shape == (2, 24, 256)
    t = 13
    x2 = x.clone()
    x2[:, t] = (x2[:, t] + 1) % 256
    out2 = m(x2)
    assert torch.allclose(out.logits[:, :t], out2.logits[:, :t], atol=1e-12)
    assert not torch.allclose(out.logits[:, t:], out2.logits[:, t:])


def test_st_dense_state_contract():
    m = Model(small(), 256, 16)
    assert m.init_state(3, torch.device("cpu")) is None
    out = m(torch.randint(0, 256, (1, 16)), state="ignored")
    assert out.state is None
    s = m.stats()
    assert s["params"] == sum(p.numel() for p in m.parameters())


def test_st_init_scaling_and_gelu():
    torch.manual_seed(0)
    cfg = Config(layers=8, d_model=256, heads=4, init_std=0.02)
    m = Model(cfg, 256, 64)
    b = m.blocks[0]
    target = 0.02 / math.sqrt(2 * 8)
    assert abs(b.w2.weight.std().item() - target) / target < 0.05
    assert abs(b.attn.proj.weight.std().item() - target) / target < 0.05
    assert abs(b.w1.weight.std().item() - 0.02) / 0.02 < 0.05
    assert m.tok.num_embeddings == 257 and m.out.out_features == 256
    x = torch.linspace(-4, 4, 50)
    assert torch.allclose(gelu_sigmoid(x), x * torch.sigmoid(1.702 * x))


@pytest.mark.parametrize("embedding,shape,n_emb", [("attn", None, 2), ("data", (8, 8, 3), 3)])
def test_st_paper_init_statistics(embedding, shape, n_emb):
    """Section 6: token embedding N(0, 0.125/sqrt(d)), position embeddings N(0, 0.125/sqrt(d n_emb)), attention
    and feed-forward weights N(0, 0.125/sqrt(d_in)) (W2, Wp further / sqrt(2N)), biases 0, logits' weight 0."""
    torch.manual_seed(0)
    d, N = 256, 6
    m = Model(
        Config(layers=N, d_model=d, heads=4, ff_mult=4.0, qk_mult=0.5, stride=16, init="paper", embedding=embedding),
        256,
        192,
        shape=shape,
    )

    def close(t, std):
        assert abs(t.mean().item()) < 0.05 * std and abs(t.std().item() - std) / std < 0.03

    close(m.tok.weight, 0.125 / math.sqrt(d))
    assert len(m.pos) == n_emb
    close(torch.cat([e.weight.flatten() for e in m.pos]), 0.125 / math.sqrt(d * n_emb))
    for b in m.blocks:
        for lin in (b.attn.q, b.attn.k, b.attn.v, b.w1):
            close(lin.weight, 0.125 / math.sqrt(lin.in_features))
        close(b.attn.proj.weight, 0.125 / math.sqrt(d) / math.sqrt(2 * N))
        close(b.w2.weight, 0.125 / math.sqrt(4 * d) / math.sqrt(2 * N))
        assert all((lin.bias == 0).all() for lin in (b.attn.q, b.attn.k, b.attn.v, b.attn.proj, b.w1, b.w2))
    assert (m.out.weight == 0).all() and (m.out.bias == 0).all()
    x = torch.randint(0, 256, (2, 192))
    assert torch.equal(m(x).logits, torch.zeros(2, 192, 256))  # a uniform first prediction, as the paper's


def test_st_dropout_only_at_the_end_of_residual_branches():
    """With ``dropout_embedding`` off nothing but the residual branches is dropped: with the branches'
    output weights zeroed, training and evaluation agree; with it on (the default) they do not."""
    x = torch.randint(0, 256, (2, 24))

    def train_vs_eval(**kw):
        torch.manual_seed(0)
        m = Model(small(dropout=0.5, **kw), 256, 24)
        with torch.no_grad():
            for b in m.blocks:
                b.w2.weight.zero_(), b.w2.bias.zero_(), b.attn.proj.weight.zero_(), b.attn.proj.bias.zero_()
        return torch.equal(m.train()(x).logits, m.eval()(x).logits)

    assert train_vs_eval(dropout_embedding=False)
    assert not train_vs_eval()
    torch.manual_seed(0)
    m = Model(small(dropout=0.5, dropout_embedding=False), 256, 24)
    assert not torch.equal(m.train()(x).logits, m.eval()(x).logits)  # the branches themselves are dropped


def test_st_data_embedding_and_qk_mult():
    cfg = small("strided", embedding="data", qk_mult=0.5, ff_mult=2.0)
    m = Model(cfg, 256, 48, shape=(4, 4, 3))
    assert len(m.pos) == 3 and m.blocks[0].attn.q.out_features == 16 and m.blocks[0].w1.out_features == 64
    assert m(torch.randint(0, 256, (2, 48))).logits.shape == (2, 48, 256)
    with pytest.raises(ValueError):
        Model(cfg, 256, 48, shape=None)


def test_st_flops_per_token():
    cfg = small("fixed", "merged", layers=3, d_model=32, c=2, stride=8)
    m = Model(cfg, 256, 64)
    mean_keys = P.allowed("fixed", 64, 8, 2).sum(1).mean()  # head 0; heads 1.. use other sub-blocks
    keys = sum(P.allowed("fixed", 64, 8, 2, head=h).sum(1).mean() for h in range(4)) / 4
    assert keys == pytest.approx(mean_keys)  # same count per head
    dense = 3 * (2 * 32 * 32 + 2 * 32 * 32 + 2 * 32 * 128) + 32 * 256
    assert m.flops_per_token() == pytest.approx(2 * (dense + 3 * keys * 64))
    md = Model(small("dense", layers=3, c=2, stride=8), 256, 64)
    assert md.flops_per_token() > m.flops_per_token()


def test_st_checkpointing_same_gradients():
    torch.manual_seed(0)
    x = torch.randint(0, 256, (2, 16))
    grads = []
    for ck in (False, True):
        torch.manual_seed(1)
        m = Model(small("strided", checkpointing=ck), 256, 16).double().train()
        m(x).logits.sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    assert torch.allclose(grads[0], grads[1])


@pytest.mark.parametrize("pattern,combine", COMBOS)
def test_st_incremental_step_equals_forward(pattern, combine):
    torch.manual_seed(0)
    m = Model(small(pattern, combine), 256, 20).double().eval()
    x = torch.randint(0, 257, (2, 20))
    full = m(x).logits
    cache = None
    for t in range(20):
        logits, cache = m.step(x[:, t], cache, t)
        assert torch.allclose(logits, full[:, t], atol=1e-10), t


def test_st_bf16_autocast():
    m = Model(small("fixed"), 256, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(torch.randint(0, 256, (2, 16)))
    out.logits.float().sum().backward()
    assert torch.isfinite(out.logits.float()).all()
