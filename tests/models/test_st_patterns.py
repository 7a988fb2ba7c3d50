"""Pattern semantics against the paper's sets (``paper_patterns``), the validity checker, Figure 3 matrices."""

import numpy as np
import paper_patterns as paper
import pytest

from repro.models import patterns as P


@pytest.mark.parametrize("pattern", P.ALL_NAMES)
@pytest.mark.parametrize("n,l,c,head", [(20, 4, 1, 0), (23, 5, 2, 1), (32, 8, 2, 5), (17, 3, 3, 0)])
def test_st_allowed_is_the_papers_pattern(pattern, n, l, c, head):
    a = P.allowed(pattern, n, l, c, head)
    assert a.dtype == bool and a.shape == (n, n)
    assert (a == paper.mask(pattern, n, l, c, head)).all()
    assert not np.triu(a, 1).any()  # causal
    assert (a.sum(1) == P.keys_per_query(pattern, n, l, c, head)).all()
    for i in (0, n // 2, n - 1):
        assert (P.allowed_row(pattern, i, l, c, head) == a[i, : i + 1]).all()


def test_st_reference_semantics_examples():
    a = P.allowed("strided", 8, 3)
    assert list(np.nonzero(a[7])[0]) == [1, 4, 5, 6, 7]
    f = P.allowed("fixed", 12, 4, 1)
    assert list(np.nonzero(f[9])[0]) == [3, 7, 8, 9]
    f1 = P.allowed("fixed", 12, 4, 1, head=1)  # head 1 summarises the second position from the end
    assert list(np.nonzero(f1[9])[0]) == [2, 6, 8, 9]
    assert P.summary_offsets(128, 32, 0) == (96, 128) and P.summary_offsets(128, 32, 5) == (64, 96)


@pytest.mark.parametrize("pattern", P.ALL_NAMES)
@pytest.mark.parametrize("n,l,c,rank", [(40, 4, 1, 0), (48, 8, 2, 5), (30, 5, 5, 0), (27, 6, 2, 1)])
def test_st_parts_partition_the_halves(pattern, n, l, c, rank):
    """The parts of every pattern are disjoint and their union is the union of its halves' predicates."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    g = P.geometry(pattern, l, c, rank)
    masks = [p.mask(i, j, g) for p in P.parts(pattern)]
    total = np.sum(masks, axis=0)
    assert total.max() <= 1  # no key counted twice
    full = pattern if pattern in P.PATTERNS else None
    halves = P.HALVES[full] if full else (pattern,)
    assert ((total == 1) == np.any([P.HALF[h](i, j, g) for h in halves], axis=0)).all()


@pytest.mark.parametrize("half", list(P.HALF))
def test_st_predicates_shift_invariant_and_work_on_tensors(half):
    """Shifting query and key by l together changes nothing (kernels and counts rely on it); the same
    predicate evaluates on torch index tensors (FlexAttention's mask functions use it so)."""
    import torch

    l, c, n = 6, 2, 30
    g = P.Geometry(l, c, P.summary_offsets(l, c, 1)[0])
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    m = P.HALF[half](i, j, g)
    assert (P.HALF[half](i + l, j + l, g) == m).all()
    t = P.HALF[half](torch.arange(n)[:, None], torch.arange(n)[None, :], P.Geometry(l, c, torch.tensor(g.lo)))
    assert (t.numpy() == m).all()


def test_st_combinations():
    assert P.layer_patterns("strided", "interleaved", 4) == ["local", "stride", "local", "stride"]
    assert P.layer_patterns("fixed", "merged", 2) == ["fixed", "fixed"]
    assert P.layer_heads("fixed", "multihead", 4) == [("block", 0), ("block", 1), ("summary", 0), ("summary", 1)]
    assert P.layer_heads("stride", "multihead", 2) == [("stride", 0), ("stride", 1)]  # a half: every head
    assert P.head_groups("strided", "multihead", 3) == [("local", slice(0, 2), [0, 1]), ("stride", slice(2, 3), [0])]
    assert P.head_groups("fixed", "merged", 3) == [("fixed", slice(0, 3), [0, 1, 2])]
    m = P.layer_mask("strided", 16, 4, None, 2, "merged")
    assert (m[0] == (P.allowed("local", 16, 4) | P.allowed("stride", 16, 4))).all()
    m = P.layer_mask("fixed", 16, 4, 1, 4, "multihead")
    assert (m[3] == P.allowed("summary", 16, 4, 1, head=1)).all() and (m[0] == P.allowed("block", 16, 4)).all()
    with pytest.raises(ValueError, match="at least 2 heads"):
        P.layer_heads("fixed", "multihead", 1)


def test_st_keys_per_query_long_sequences():
    """The shift-invariant count equals the closed forms of the paper's patterns at a long n."""
    n, l, c = 65536, 128, 16
    i = np.arange(n)
    assert (P.keys_per_query("strided", n, l) == np.minimum(i + 1, l) + i // l).all()
    assert (P.keys_per_query("fixed", n, l, c, 3) == i % l + 1 + (i // l) * c).all()
    assert (P.keys_per_query("dense", n, None) == i + 1).all()


@pytest.mark.parametrize("pattern", P.PATTERNS)
@pytest.mark.parametrize("combine", P.COMBINES)
def test_st_validity_two_steps(pattern, combine):
    assert P.check_valid(pattern, 64, 8, 2, combine, heads=4)


def test_st_validity_negative_cases():
    assert not P.check_valid("strided", 64, 8, combine="merged", steps=1)
    assert not P.check_valid("fixed", 64, 8, 2, combine="interleaved", steps=1)
    # only one summary half of the factorisation: earlier blocks stay unreachable
    reach = P.connectivity([P.allowed("block", 32, 8)] * 3)
    assert not reach[31, 0]


def test_st_figure3():
    f = P.figure3(36, 6, 1)
    assert set(f) == {"dense", "strided", "fixed"}
    assert (f["strided"]["union"] == (f["strided"]["local"] | f["strided"]["stride"])).all()
    for p in f:
        assert f[p]["connectivity"][np.tril_indices(36)].all()
