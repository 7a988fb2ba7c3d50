"""An official checkpoint in the suite's model gives the official code's numbers: its evaluation's bits to
1e-6 (relative) and its forward pass's logits to 1e-5, on the fixture the official code made (no download)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from officialkit import CHECKPOINT, FIXTURE, OFFICIAL

from repro import data as datasets
from repro.pretrained import checkpoint, mapping, protocol, symbols

OPTIONS = {"path": str((FIXTURE / "tiny8.txt").resolve()), "kind": "text8"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The fixture's checkpoint in the suite's model, on the suite's `file` corpus of tiny8.txt."""
    root = tmp_path_factory.mktemp("data")
    splits = {
        s: np.asarray(datasets.open_split("file", s, root=root, **OPTIONS)[0]) for s in ("train", "valid", "test")
    }
    vocab = datasets.open_split("file", "train", root=root, **OPTIONS)[1]
    ckpt = checkpoint.read(CHECKPOINT)
    syms = symbols.symbols(vocab, "tiny8.txt")
    order = symbols.official_order(syms, syms.stream(splits["train"]), ckpt.shape.vocab, "tiny8.pt")
    section = mapping.model_section(ckpt, ramp=32, dropout=0.1, loss_coef=2e-6, init=0.125)
    return mapping.build(ckpt, section, order, syms.size, 64), syms, order, splits


def official_tokens(split: str) -> list[str]:
    """A split as the official data.py tokenizes its file: each line's whitespace tokens, then <eos>."""
    with open(FIXTURE / "official-format" / f"{split}.txt", encoding="utf8") as f:
        return [t for line in f for t in [*line.split(), "<eos>"]]


def test_the_official_vocabulary_is_the_one_the_official_code_built(imported):
    _, syms, order, _ = imported
    assert [syms.names[i] for i in order] == OFFICIAL["vocabulary"]
    assert syms.extra == ("<eos>",)


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_streams_derived_from_the_suites_splits_are_the_official_files(imported, split):
    """prep_text8's strip, '_' for a space and the official <eos>, from the suite's own split."""
    _, syms, _, splits = imported
    assert [syms.names[i] for i in syms.stream(splits[split])] == official_tokens(split)


@pytest.mark.parametrize("split", ["valid", "test"])
def test_official_protocol_gives_the_official_codes_bits(imported, split):
    model, syms, _, splits = imported
    got = protocol.official_bits(model, syms.stream(splits[split]), block=OFFICIAL["block"])
    assert abs(got["bits"] / OFFICIAL[f"{split}_bits"] - 1) < 1e-6
    assert got["targets"] == 7 * 8 * 64  # 4,000 tokens in 8 streams of 500: blocks at 0 .. 384, the tail unscored


def test_forward_pass_gives_the_official_codes_logits(imported):
    """Two blocks of the first two test streams, the cache carried (the official ids mapped to ours)."""
    model, _, order, _ = imported
    ref = np.load(FIXTURE / "logits.npz")
    x = torch.as_tensor(order[ref["x"]])
    state, outs = None, []
    with torch.no_grad():
        for b in range(2):
            out = model(x[:, b * 64 : (b + 1) * 64], state)
            state, outs = out.state, [*outs, out.logits]
    ours = torch.cat(outs, 1)[..., torch.as_tensor(order)]  # back to the official numbering
    torch.testing.assert_close(ours, torch.as_tensor(ref["logits"]), rtol=1e-5, atol=1e-5)


def test_a_bare_state_dict_without_the_prefix_imports_the_same(imported, tmp_path):
    """What `model.module.state_dict()` would save: no `module.`, no optimizer."""
    raw = torch.load(CHECKPOINT, weights_only=True)["model"]
    bare = tmp_path / "bare.pt"
    torch.save({k.removeprefix("module."): v for k, v in raw.items()}, bare)
    a, b = checkpoint.read(CHECKPOINT), checkpoint.read(bare)
    assert a.prefixed and not b.prefixed and b.iter_no is None and a.iter_no == 19
    assert a.shape == b.shape and all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)


def test_the_pieces_are_where_the_official_code_keeps_them(imported):
    """z' = current_val, p_x the official key_pe read from its far end, rows permuted by symbol."""
    model, syms, order, _ = imported
    t = checkpoint.read(Path(CHECKPOINT)).tensors
    assert torch.equal(model.layers[1].attn.z_prime, t["layers.1.attn.attn.adaptive_span._mask.current_val"].flatten())
    assert torch.equal(model.pe[:, 0], t["key_pe"][0, :, -1])  # the previous token: official column S - 1
    eos_official = list(order).index(syms.eos)
    assert torch.equal(model.out.weight[syms.eos], t["out_emb.weight"][eos_official])
    assert torch.equal(model.emb.weight[-1], torch.zeros(32))  # the suite's start-token row: unused by text
