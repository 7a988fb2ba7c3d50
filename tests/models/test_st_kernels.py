"""Every attention kernel (blocked on CPU, flex where it runs, and the dense masked reference) equals dense
attention under the paper's pattern as written out in ``paper_patterns`` (independent of
repro's predicates, parts and plans), values and gradients in float64; the FlexAttention forward is
checked on CPU, its values and gradients on CUDA when one is available. Seeds are fixed."""

import functools
import warnings

import numpy as np
import paper_patterns as paper
import pytest
import torch

from repro.models import patterns as P
from repro.models.kernels import attend
from repro.models.kernels import blocked as BK
from repro.models.kernels.plan import plan, window

CASES = [  # pattern, combine, n, stride, c, heads
    ("strided", "merged", 24, 4, None, 2),
    ("strided", "merged", 29, 5, None, 1),
    ("strided", "multihead", 24, 4, None, 4),
    ("strided", "multihead", 18, 6, None, 3),
    ("strided", "multihead", 23, 5, None, 2),
    ("strided", "merged", 4, 4, None, 2),  # one block: no whole window beyond the first block's
    ("strided", "interleaved", 3, 4, None, 4),  # shorter than a block (a prompt)
    ("fixed", "merged", 24, 4, 1, 3),
    ("fixed", "merged", 30, 8, 2, 5),
    ("fixed", "merged", 26, 4, 4, 2),
    ("fixed", "multihead", 24, 4, 1, 4),
    ("fixed", "multihead", 32, 8, 2, 6),
    ("local", "merged", 21, 4, None, 2),
    ("local", "merged", 15, 3, None, 1),
    ("stride", "merged", 21, 4, None, 2),
    ("block", "merged", 21, 7, None, 2),
    ("summary", "merged", 24, 6, 2, 3),
    ("summary", "merged", 22, 4, 2, 3),
    ("dense", "merged", 19, 4, None, 2),
]


def _blocked(q, k, v, *, pattern, c):
    return attend(q, k, v, pattern, 4, c, impl="blocked")


def rand(B, H, n, d, device="cpu", dtype=torch.float64, grad=True):
    return [torch.randn(B, H, n, d, device=device, dtype=dtype, requires_grad=grad) for _ in range(3)]


def paper_attention(q, k, v, pattern, l, c, combine="merged"):
    """Dense attention under the paper's pattern (``paper_patterns``), for q's heads and length."""
    return paper.attention(q, k, v, paper.layer_mask(pattern, combine, q.shape[2], l, c, q.shape[1]))


def assert_matches_paper(o, q, k, v, pattern, l, c, combine="merged", atol=1e-12, grad_atol=1e-11):
    """``o`` (computed from q, k, v) equals dense attention under the paper's pattern, and so do its
    gradients with respect to q, k and v (where they require grad) for a random output gradient."""
    r = paper_attention(q, k, v, pattern, l, c, combine)
    assert o.shape == r.shape and torch.allclose(o, r, atol=atol), (o - r).abs().max()
    if not o.requires_grad:
        return
    g = torch.randn_like(o)
    for a, b in zip(torch.autograd.grad(o, (q, k, v), g), torch.autograd.grad(r, (q, k, v), g)):
        assert torch.allclose(a, b, atol=grad_atol), (a - b).abs().max()


@pytest.mark.parametrize("impl,chunk", [("blocked", 300), ("blocked", 2**20), ("masked", None)])
@pytest.mark.parametrize("pattern,combine,n,l,c,H", CASES)
def test_st_kernel_equals_the_papers_pattern(impl, chunk, pattern, combine, n, l, c, H, monkeypatch):
    """The CPU kernel in small chunks (300: several per part, one query block per summary call) and in one,
    and the masked reference that the model's ``impl: masked`` runs."""
    torch.manual_seed(0)
    if chunk:
        monkeypatch.setattr(BK, "CHUNK_ELEMENTS", chunk)
    if chunk == 300:  # residue classes through the fused kernel (else, at these few blocks, by offsets)
        monkeypatch.setattr(BK, "SMALL_RESIDUE", 0)
    q, k, v = rand(2, H, n, 6)
    assert_matches_paper(attend(q, k, v, pattern, l, c, combine=combine, impl=impl), q, k, v, pattern, l, c, combine)


def test_st_paper_patterns_are_the_papers_sets():
    """The test's own definition, on the paper's examples: strided l = 3 at query 7, the local half the last
    l keys (the project's choice; the paper's A1 also holds i - l, which the stride half holds anyway), fixed
    l = 4, c = 1 at query 9, the second summary head one position earlier, heads wrapping modulo l // c."""
    rows = lambda *a, **kw: np.nonzero(paper.mask(*a, **kw)[-1])[0].tolist()  # noqa: E731
    assert rows("strided", 8, 3) == [1, 4, 5, 6, 7]
    assert rows("local", 8, 3) == [5, 6, 7] and rows("local", 8, 3, local_keys=4) == [4, 5, 6, 7]
    assert (paper.mask("strided", 40, 5) == paper.mask("strided", 40, 5, local_keys=6)).all()
    assert rows("fixed", 10, 4, 1) == [3, 7, 8, 9] and rows("fixed", 10, 4, 1, 1) == [2, 6, 8, 9]
    assert rows("summary", 10, 4, 2, 0) == [2, 3, 6, 7] and rows("summary", 10, 4, 2, 2) == rows("summary", 10, 4, 2)
    assert paper.heads("fixed", "multihead", 5) == [
        ("block", 0),
        ("block", 1),
        ("block", 2),
        ("summary", 0),
        ("summary", 1),
    ]


def test_st_kernel_gradcheck():
    torch.manual_seed(0)
    q, k, v = rand(1, 2, 12, 3)
    for pattern, c in (("strided", None), ("fixed", 1), ("summary", 2)):
        assert torch.autograd.gradcheck(functools.partial(_blocked, pattern=pattern, c=c), (q, k, v))


def test_st_kernel_qk_width_differs_from_v():
    torch.manual_seed(0)
    q, k = (torch.randn(1, 2, 16, 3, dtype=torch.float64) for _ in range(2))
    v = torch.randn(1, 2, 16, 5, dtype=torch.float64)
    for p, c in (("strided", None), ("fixed", 2)):
        assert_matches_paper(attend(q, k, v, p, 4, c, impl="blocked"), q, k, v, p, 4, c)


def test_st_blocked_takes_the_models_layout():
    """Heads split off a projection, (B, n, H, d) transposed, as the model passes them."""
    torch.manual_seed(0)
    for B in (1, 2):
        q, k, v = (torch.randn(B, 32, 2, 4, dtype=torch.float64).transpose(1, 2) for _ in range(3))
        for p, c in (("strided", None), ("fixed", 2), ("local", None)):
            assert_matches_paper(attend(q, k, v, p, 8, c, impl="blocked"), q, k, v, p, 8, c)


def test_st_blocked_is_the_cpu_kernel():
    q = torch.empty(1, 2, 16, 4, device="meta")
    with pytest.raises(ValueError, match="runs on CPU"):
        attend(q, q, q, "strided", 4, impl="blocked")


def test_st_kernel_half_precision_runs():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 8, dtype=torch.bfloat16) for _ in range(3))
    o = attend(q, k, v, "fixed", 8, 2, impl="blocked")
    assert o.dtype == torch.bfloat16
    assert_matches_paper(o.float(), q.float(), k.float(), v.float(), "fixed", 8, 2, atol=3e-2)


@pytest.mark.parametrize("pattern,c", [("strided", None), ("fixed", 4), ("summary", 4), ("local", None)])
def test_st_blocked_computes_about_the_patterns_scores(pattern, c, monkeypatch):
    """Every fused call is far smaller than n x n, and all calls together score at most 1.6 times the keys
    the pattern allows (a causal call counts its triangle), forward and backward alike."""
    n, l, H = 1024, 32, 2
    work = {"fwd": 0.0, "bwd": 0.0}
    biggest = []

    def spy(kind, op):
        def call(*args, **kw):
            q, k = args[:2] if kind == "fwd" else args[1:3]
            causal = args[4] if kind == "fwd" else args[7]
            rect = q.shape[-2] * k.shape[-2]
            biggest.append(rect)
            work[kind] += q.shape[0] * q.shape[1] * (q.shape[-2] * (k.shape[-2] + 1) / 2 if causal else rect)
            return op(*args, **kw)

        return call

    monkeypatch.setattr(BK, "ROWS_PER_CALL", 256)  # summary calls: 8 query blocks each
    monkeypatch.setattr(BK, "_FWD", spy("fwd", BK._FWD))
    monkeypatch.setattr(BK, "_BWD", spy("bwd", BK._BWD))
    q, k, v = (torch.randn(1, H, n, 8, requires_grad=True) for _ in range(3))
    attend(q, k, v, pattern, l, c, impl="blocked").sum().backward()
    allowed = sum(P.keys_per_query(pattern, n, l, c, h).sum() for h in range(H))
    assert max(biggest) <= n * n // 16
    assert allowed <= work["fwd"] <= 1.6 * allowed and allowed <= work["bwd"] <= 1.6 * allowed


def test_st_plans_read_from_the_table():
    """What each part of the table becomes in its layout; a part that does not fit its layout is refused."""
    pl = lambda part, pattern, c=None: plan(part, pattern, 8, c, (0, 1), 5)  # noqa: E731
    own, prev, res = (pl(p, "strided") for p in P.parts("strided"))
    assert (own.kind, prev.kind, res.kind, res.shift) == ("masked", "masked", "shift", 0)
    assert (own.mask[0] == np.tril(np.ones((8, 8), bool), -1)).all()  # key offset s < r: the diagonal is stride's
    assert (prev.mask[0] == np.triu(np.ones((8, 8), bool), 1)).all()  # key offset s > query offset r
    assert pl(P.Part("residue", "stride", minus="local"), "strided").shift == 1
    earlier = pl(P.parts("fixed")[1], "fixed", 2)
    assert earlier.kind == "full" and earlier.offsets.tolist() == [[6, 7], [4, 5]]
    own_summary = pl(P.parts("summary")[1], "summary", 2)
    assert own_summary.kind == "masked" and own_summary.mask.shape == (2, 8, 8)
    assert own_summary.empty_rows[0].tolist() == [True] * 6 + [False] * 2
    for bad in (P.Part("residue", "local"), P.Part("earlier", "stride"), P.Part("causal", "local")):
        with pytest.raises(ValueError):
            pl(bad, "strided")


def test_st_window_plans_own_and_previous_together():
    """strided's own and previous parts as one mask on every tile of l/2 queries and the 3l/2 keys ending
    with it: key distances 1..l-1; none for an odd l, a block whose two tiles differ, or keys outside."""
    own, prev = P.parts("strided")[:2]
    w = window((own, prev), "strided", 8, None, (0, 1))
    dist = 8 + np.arange(4)[:, None] - np.arange(12)[None, :]
    assert w.layout == "window" and w.mask.shape == (1, 4, 12)
    assert (w.mask[0] == ((dist >= 1) & (dist < 8))).all()
    assert window((own, prev), "strided", 7, None, (0,)) is None
    assert window((P.Part("own", "block"),), "block", 8, None, (0,)) is None  # the tiles differ
    assert window((P.Part("previous", "summary"),), "summary", 8, 2, (3,)) is None  # columns 0, 1: outside


def test_st_blocked_computes_any_split_of_the_table(monkeypatch):
    """The kernel follows the table, not one split of it: strided with the diagonal in the local half
    (its residue part shifted one stride back, no part covering every row), in chunks of one item."""
    split = (P.Part("own", "local"), P.Part("previous", "local"), P.Part("residue", "stride", minus="local"))
    monkeypatch.setitem(P.PARTS, "strided", split)
    monkeypatch.setattr(BK, "CHUNK_ELEMENTS", 1)
    runs = BK.runs_for("strided", 4, None, [0, 1], 6)
    assert [type(r).__name__ for r in runs] == ["_Window", "_Residues"] and runs[1].plan.shift == 1
    assert not any(r.covers_all() for r in runs)
    torch.manual_seed(0)
    for n, l in ((24, 4), (29, 5)):  # windows; own and previous tiles (odd l)
        q, k, v = rand(2, 2, n, 6)
        assert_matches_paper(attend(q, k, v, "strided", l, impl="blocked"), q, k, v, "strided", l, None)


@pytest.mark.parametrize(
    "pattern,combine,n,l,c,H",
    [
        ("strided", "merged", 256, 16, None, 2),
        ("fixed", "merged", 250, 16, 4, 3),
        ("summary", "merged", 256, 16, 4, 3),
        ("strided", "multihead", 256, 16, None, 4),
        ("fixed", "multihead", 256, 16, 4, 4),
        ("local", "merged", 200, 16, None, 1),
        ("stride", "merged", 256, 16, None, 2),
        ("block", "merged", 256, 32, None, 2),
    ],
)
def test_st_flex_forward_cpu(pattern, combine, n, l, c, H):
    pytest.importorskip("torch.nn.attention.flex_attention")
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    q, k, v = rand(1, H, n, 16, dtype=torch.float32, grad=False)
    v = torch.randn(1, H, n, 24)  # value width may differ from the query/key width
    o = attend(q, k, v, pattern, l, c, combine=combine, impl="flex")
    assert_matches_paper(o, q, k, v, pattern, l, c, combine, atol=1e-5)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")


@needs_cuda
@pytest.mark.parametrize(
    "pattern,combine,n,l,c,H,dv",
    [  # covers all six parts; kept short: each compiles
        ("strided", "merged", 1024, 64, None, 4, 32),
        ("fixed", "merged", 1024, 64, 16, 4, 32),
        ("strided", "multihead", 1024, 64, None, 4, 32),
        ("fixed", "multihead", 1024, 64, 16, 4, 32),
        ("strided", "merged", 1000, 64, None, 4, 64),
    ],
)
def test_st_flex_cuda_values_and_grads(pattern, combine, n, l, c, H, dv):
    torch.manual_seed(0)
    q, k, _ = rand(2, H, n, 32, device="cuda", dtype=torch.float32)
    v = torch.randn(2, H, n, dv, device="cuda", requires_grad=True)
    o = attend(q, k, v, pattern, l, c, combine=combine, impl="flex")
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    r = paper_attention(qd, kd, vd, pattern, l, c, combine)
    assert (o.double() - r).abs().max().item() < 2e-3
    g = torch.randn_like(o)
    ga = torch.autograd.grad(o, (q, k, v), g)
    gr = torch.autograd.grad(r, (qd, kd, vd), g.double())
    for a, b in zip(ga, gr):
        assert (a.double() - b).abs().max().item() < 2e-2 * max(1.0, b.abs().max().item())


@needs_cuda
def test_st_flex_cuda_model_bf16():
    from repro.models.sparse_transformer import Config, Model

    m = Model(Config(layers=2, d_model=64, heads=4, pattern="fixed", stride=32, c=8), 256, 512).cuda()
    x = torch.randint(0, 256, (2, 512), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = m(x)
    out.logits.float().mean().backward()
    assert torch.isfinite(out.logits.float()).all()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)


@pytest.mark.parametrize("split", [4, 8])
@pytest.mark.parametrize("pattern,combine,n,l,c,H", [case for case in CASES if case[0] in ("strided", "local")])
def test_st_windows_of_any_height_equal_the_papers_pattern(split, pattern, combine, n, l, c, H, monkeypatch):
    """Window tiles of l/split rows (fewer keys computed per query: l + l/split), where split divides l
    (else two tiles per block, as by default), in chunks small enough to split the windows."""
    torch.manual_seed(0)
    monkeypatch.setattr(BK, "WINDOW_SPLIT", split)
    monkeypatch.setattr(BK, "CHUNK_ELEMENTS", 40)
    q, k, v = rand(2, H, n, 6)
    assert_matches_paper(
        attend(q, k, v, pattern, l, c, combine=combine, impl="blocked"), q, k, v, pattern, l, c, combine
    )
