"""Pattern semantics against brute-force loops, the validity checker, Figure 3 matrices."""
import numpy as np
import pytest

from repro.models import patterns as P


def brute(pattern, n, l, c=None, head=0):
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            local = i - l < j
            strd = (i - j) % l == 0
            block = j // l == i // l
            summ = False
            if c is not None:
                sub = head % (l // c)
                summ = l - (sub + 1) * c <= j % l < l - sub * c
            m[i, j] = {"dense": True, "local": local, "stride": strd, "strided": local or strd,
                       "block": block, "summary": summ, "fixed": block or summ}[pattern]
    return m


@pytest.mark.parametrize("pattern", P.ALL_NAMES)
@pytest.mark.parametrize("n,l,c,head", [(20, 4, 1, 0), (23, 5, 2, 1), (32, 8, 2, 5), (17, 3, 3, 0)])
def test_st_allowed_matches_brute_force(pattern, n, l, c, head):
    a = P.allowed(pattern, n, l, c, head)
    assert a.dtype == bool and a.shape == (n, n)
    assert (a == brute(pattern, n, l, c, head)).all()
    assert not np.triu(a, 1).any()  # causal
    assert (a.sum(1) == P.keys_per_query(pattern, n, l, c, head)).all()
    for i in (0, n // 2, n - 1):
        assert (P.allowed_row(pattern, i, l, c, head) == a[i, :i + 1]).all()


def test_st_reference_semantics_examples():
    a = P.allowed("strided", 8, 3)
    assert list(np.nonzero(a[7])[0]) == [1, 4, 5, 6, 7]
    f = P.allowed("fixed", 12, 4, 1)
    assert list(np.nonzero(f[9])[0]) == [3, 7, 8, 9]
    f1 = P.allowed("fixed", 12, 4, 1, head=1)  # head 1 summarises the second position from the end
    assert list(np.nonzero(f1[9])[0]) == [2, 6, 8, 9]
    assert P.summary_offsets(128, 32, 0) == (96, 128) and P.summary_offsets(128, 32, 5) == (64, 96)


def test_st_combinations():
    assert P.layer_patterns("strided", "interleaved", 4) == ["local", "stride", "local", "stride"]
    assert P.layer_patterns("fixed", "merged", 2) == ["fixed", "fixed"]
    assert P.head_patterns("fixed", "multihead", 4) == ["block", "block", "summary", "summary"]
    assert P.summary_heads(["block", "block", "summary", "summary"]) == [0, 1, 0, 1]
    m = P.layer_mask("strided", 16, 4, None, 2, "merged")
    assert (m[0] == (P.allowed("local", 16, 4) | P.allowed("stride", 16, 4))).all()


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
