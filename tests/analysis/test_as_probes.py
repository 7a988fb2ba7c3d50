"""The adaptive-span probes (repro.train.figure_arrays): figure arrays read from a model through forward hooks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repro.models import adaptive_span as AS
from repro.train import figure_arrays

torch.set_num_threads(1)


def make(kind, S, window="paper"):
    torch.manual_seed(0)
    span = AS.SpanConfig(kind=kind, limit=S, ramp=8, init=0.2)
    cfg = AS.Config(layers=2, d_model=16, d_ff=32, heads=2, dropout=0.0, window=window, span=span)
    return AS.Model(cfg, 11, block=20).double()


def hooks(model):
    return sum(len(m._forward_hooks) for m in model.modules())


def test_attention_by_distance():
    m = make("fixed", S=32)
    x = torch.randint(0, 11, (2, 40))
    st = m(x[:, :20]).state
    st = m(x[:, 20:], st).state
    a = figure_arrays.attention_by_distance(m, x[:, :16], st)
    assert a.shape == (2, 2, 32)
    assert np.allclose(a.sum(-1), 1.0)  # full cache: every query sees every distance
    a = figure_arrays.attention_by_distance(m, x[0, :16])  # no history: far distances never observed
    assert np.isfinite(a[:, :, :16]).all() and np.isnan(a[:, :, 16:]).all()  # 16 queries see distances 0..15
    assert hooks(m) == 0 and m.training  # the hooks are gone and the mode is restored


@pytest.mark.parametrize("window", ["paper", "official"])
def test_attention_by_distance_of_a_trimmed_span(window):
    m = make("adaptive", S=200, window=window)  # z = 40, z + R = 48: the band is 64 wide
    x = torch.randint(0, 11, (1, 220))
    st = m(x[:, :200]).state
    a = figure_arrays.attention_by_distance(m, x[:, 200:], st)
    shift = window == "official"
    assert np.allclose(a.sum(-1), 1.0)
    assert (a[:, :, 49 + shift :] == 0).all() and (a[:, :, shift : 48 + shift] > 0).all()  # m_z(x) = 0 from x = z + R
    assert (a[:, :, :shift] == 0).all()  # the official window never attends the query itself


def test_dynamic_spans_and_figure_arrays():
    d = make("dynamic", S=64).eval()
    spans = figure_arrays.dynamic_spans(d, torch.randint(0, 11, (24,)))
    assert spans.shape == (24,) and (spans > 0).all() and (spans < 64).all()
    with pytest.raises(ValueError, match="per-query"):
        figure_arrays.dynamic_spans(make("fixed", S=32), torch.randint(0, 11, (8,)))

    class Vocab:
        def encode(self, text):
            return [ord(c) % 11 for c in text]

    data = np.random.default_rng(0).integers(0, 11, 200)
    arrays = figure_arrays.figure_arrays("adaptive_span", d, data, Vocab())
    assert set(arrays) == {"attention_by_distance", "dynamic_spans", "dynamic_spans_text"}
    assert "".join(arrays["dynamic_spans_text"]) == figure_arrays.FIG5_TEXT
    assert arrays["dynamic_spans"].shape == (len(figure_arrays.FIG5_TEXT),)
    assert set(figure_arrays.figure_arrays("adaptive_span", make("fixed", S=32), data, Vocab())) == {
        "attention_by_distance"
    }
    assert hooks(d) == 0
