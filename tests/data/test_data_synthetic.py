"""Synthetic corpora (repro.data.synthetic): each generator's tokens obey its own truth, the corpus is a
function of its spec, the schema refuses other generators' keys, and evaluation scores every dependency
class apart, with the targets whose source lies before their stream counted apart (the evaluation-stream
fix: with many short streams they read as a blind model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repro.config.fields import SpecError, build
from repro.config.spec import build_run
from repro.config.synthetic import SyntheticSpec
from repro.data import open_split, synthetic, truth
from repro.models.base import LanguageModel, ModelOutput
from repro.train.evaluation import evaluate

PERIODIC = {"generator": "periodic", "distance": 64, "tokens": 200_000, "keep": 0.9, "symbols": 32}
SPECS = [
    PERIODIC,
    {"generator": "mix", "distances": [16, 48], "stretch": 512, "tokens": 200_000},
    {"generator": "grid", "rows": 8, "width": 12, "symbols": 16, "tokens": 100_000, "keep": 0.8},
    {"generator": "copy", "record": 64, "segment": 8, "back": 2, "symbols": 64, "tokens": 200_000},
]


def option(**keys) -> str:
    return build(SyntheticSpec, keys, "data.synthetic").option()


@pytest.mark.parametrize("keys", SPECS, ids=lambda k: k["generator"])
def test_each_token_equals_its_source_at_the_keep_rate_and_classes_know_their_levels(keys):
    corpus = synthetic.generate(option(**keys))
    t = np.nonzero(corpus.distance)[0]
    same = corpus.tokens[t] == corpus.tokens[t - corpus.distance[t]]
    for i, group in enumerate(corpus.groups):
        members = corpus.group[t] == i
        if group.name == "marker":
            assert same[members].all()
        elif members.any():  # a copy class: kept w.p. keep, else uniform (which may redraw the source)
            size = round(2**group.blind)
            expect = keys.get("keep", 0.9) + (1 - keys.get("keep", 0.9)) / size
            assert abs(same[members].mean() - expect) < 0.01, group.name
            assert group.floor < group.blind
    sources = set(np.unique(corpus.group[corpus.distance == 0]).tolist())
    assert all(corpus.groups[g].floor == corpus.groups[g].blind for g in sources if corpus.groups[g].name != "marker")


def test_the_floor_is_the_conditional_entropy_of_the_copies():
    corpus = synthetic.generate(option(**PERIODIC))
    t = np.nonzero(corpus.distance)[0]
    diff = (corpus.tokens[t].astype(int) - corpus.tokens[t - 64]) % 32  # 0 where copied, else uniform
    p = np.bincount(diff, minlength=32) / len(diff)
    empirical = -(p * np.log2(p)).sum()
    long = next(g for g in corpus.groups if g.name == "long")
    assert long.floor == pytest.approx(synthetic.noisy_copy_bits(0.9, 32)) and abs(empirical - long.floor) < 0.02
    assert long.blind == 5.0


def test_the_corpus_is_a_function_of_its_spec():
    a = synthetic.split(option(**PERIODIC), "valid")[0]
    b = synthetic.split(option(**{**PERIODIC, "seed": 1}), "valid")[0]
    c = synthetic.split(option(**{**PERIODIC, "distance": 48}), "valid")[0]
    assert np.array_equal(
        a, synthetic._MAKE["periodic"](PERIODIC | {"seed": 0}, np.random.default_rng(0)).tokens[-len(a) * 2 : -len(a)]
    )
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    x, vocab = open_split("synthetic", "test", synthetic=option(**PERIODIC))
    assert (
        vocab.size == 32
        and len(x) == 10_000
        and len(truth("synthetic", "test", synthetic=option(**PERIODIC)).group) == 10_000
    )


@pytest.mark.parametrize(
    ("keys", "word"),
    [
        ({"generator": "periodic"}, "data.synthetic.distance: generator periodic needs distance"),
        ({"generator": "periodic", "distance": 8, "width": 4}, "data.synthetic.width: got 4; generator periodic takes"),
        ({"generator": "periodic", "distance": 8, "tokens": 100}, "data.synthetic.tokens"),
        ({"generator": "periodic", "distance": 4000, "tokens": 100_000}, "allowed: >= 40 x the longest distance"),
        ({"generator": "copy", "record": 16, "segment": 9, "back": 1}, "data.synthetic.segment: got 9"),
        ({"generator": "waves", "distance": 8}, "data.synthetic.generator"),
    ],
)
def test_the_schema_refuses_what_the_generator_does_not_take(keys, word):
    with pytest.raises(SpecError) as err:
        build_run(
            "m", "probe", {}, {"data": {"name": "synthetic", "synthetic": keys}, "model": {"family": "adaptive_span"}}
        )
    assert word in str(err.value) and "\n" not in str(err.value)


def test_a_synthetic_section_needs_the_synthetic_dataset_and_back():
    model = {"family": "adaptive_span"}
    with pytest.raises(SpecError, match="data.synthetic: a synthetic corpus needs"):
        build_run("m", "probe", {}, {"data": {"name": "wiki-lead8", "synthetic": PERIODIC}, "model": model})
    with pytest.raises(SpecError, match="data.synthetic: a synthetic corpus needs"):
        build_run("m", "probe", {}, {"data": {"name": "synthetic"}, "model": model})
    spec = build_run("m", "probe", {}, {"data": {"name": "synthetic", "synthetic": PERIODIC}, "model": model})
    assert spec.resolved()["data"]["synthetic"] == {k: v for k, v in {**PERIODIC, "seed": 0}.items()}
    other = build_run(
        "m", "probe", {}, {"data": {"name": "synthetic", "synthetic": {**PERIODIC, "seed": 1}}, "model": model}
    )
    assert other.run_id != spec.run_id


class Oracle(LanguageModel):
    """A model that knows the periodic corpus's rule: it predicts token t from token t - D when that is in
    its view (its stream so far, carried as its state), and uniformly otherwise: its bits on targets
    with their source in view are the floor, on the others the blind level."""

    def __init__(self, distance: int, keep: float, symbols: int):
        super().__init__()
        self.vocab_size, self.block, self.D, self.keep = symbols, 64, distance, keep

    def init_state(self, batch_size, device):
        return torch.full((batch_size, self.D), -1, dtype=torch.long)

    def forward(self, x, state=None):
        history = torch.cat([state, x], 1)
        source = history[:, 1 : x.size(1) + 1]  # the token D back from each target
        p = torch.full((*x.shape, self.vocab_size), (1 - self.keep) / self.vocab_size)
        p.scatter_add_(2, source.clamp(min=0)[..., None], torch.full((*x.shape, 1), self.keep))
        p = torch.where((source < 0)[..., None], torch.full_like(p, 1 / self.vocab_size), p)
        return ModelOutput(p.log(), history[:, -self.D :])

    def stats(self):
        return {}

    def flops_per_token(self):
        return 0.0


def test_targets_whose_source_precedes_their_stream_are_counted_apart():
    # the scouting study's artefact: 128 streams of a short split, each stream's first D - 1 targets have
    # no source in view; they read as blind and would be averaged into the class
    spec = build_run(
        "m",
        "probe",
        {},
        {"data": {"name": "synthetic", "block": 64, "synthetic": PERIODIC}, "model": {"family": "adaptive_span"}},
    )
    data = synthetic.split(spec.data.synthetic.option(), "valid")[0]
    known = synthetic.truth(spec.data.synthetic.option(), "valid")
    model = Oracle(64, 0.9, 32)
    for streams in (128, 4):
        spec.eval.batch_size = streams
        got = evaluate(model, data, spec, torch.device("cpu"), 32, truth=known)
        groups = got["groups"]
        length = -(-(len(data) - 1) // streams)  # targets per stream; the last streams may be shorter
        per_stream = [min(length, len(data) - 1 - b * length) for b in range(streams)]
        assert groups["unseen"]["targets"] == sum(min(63, max(n, 0)) for n in per_stream)
        assert groups["long"]["targets"] + groups["unseen"]["targets"] == got["targets"] == len(data) - 1
        assert abs(groups["long"]["bits"] - synthetic.noisy_copy_bits(0.9, 32)) < 0.05
        assert groups["unseen"]["bits"] == pytest.approx(5.0)
    # all targets together: the 128 short streams' unseen targets lift the split's bits far above the floor
    spec.eval.batch_size = 128
    everything = evaluate(model, data, spec, torch.device("cpu"), 32)
    assert everything["bits"] > groups["long"]["bits"] + 2.0 and "groups" not in everything


def test_nothing_is_prepared_or_verified_for_a_generated_corpus(root):
    from repro.data import api
    from repro.data.errors import DataError

    for call in (lambda: api.prepare("synthetic", root=root), lambda: api.verify("synthetic", root=root)):
        with pytest.raises(DataError, match="synthetic.*generated"):
            call()
    assert api.missing("synthetic", root, synthetic=option(**PERIODIC)) is None
    assert api.provenance("synthetic", root, synthetic=option(**PERIODIC)) == (None, True)
    assert not root.exists()
