import numpy as np
import pytest
import torch

from repro.data.batching import SequenceBatches, StreamBatches, eval_batches
from repro.data.errors import DataError


def test_stream_batches_are_contiguous_streams_shifted_by_one():
    tokens = np.arange(1000, dtype=np.int64) % 251
    sb = StreamBatches(tokens.astype(np.uint8), batch_size=4, block=10)
    L = 999 // 4
    assert len(sb) == L // 10
    x, y = sb[2]
    assert x.dtype == torch.long and x.shape == (4, 10)
    for b in range(4):
        assert x[b].tolist() == tokens[b * L + 20 : b * L + 30].tolist()
        assert y[b].tolist() == tokens[b * L + 21 : b * L + 31].tolist()
    x1, _ = sb[1]
    assert x1[:, -1].tolist() == x[:, 0].sub(1).remainder(251).tolist()  # block 2 continues block 1


def test_stream_batches_wrap_into_next_epoch_and_reject_tiny_data():
    sb = StreamBatches(np.arange(200, dtype=np.uint8), batch_size=2, block=16)
    assert all(torch.equal(a, b) for a, b in zip(sb[len(sb) + 3], sb[3]))
    with pytest.raises(DataError):
        StreamBatches(np.arange(20, dtype=np.uint8), batch_size=4, block=16)


def test_stream_passes_start_at_seeded_random_offsets_like_the_official_trainer():
    tokens = np.arange(1001, dtype=np.int64)  # token value = position: offsets can be read off the batch
    wrap = StreamBatches(tokens, batch_size=4, block=16)
    sb = StreamBatches(tokens, batch_size=4, block=16, passes="random_offset", seed=5)
    L = 1000 // 4
    assert all(torch.equal(sb[i][0], wrap[i][0]) for i in range(len(wrap)))  # pass 0: offset 0 as before
    assert [sb.starts_pass(i) for i in range(len(wrap) + 1)] == [False] * len(wrap) + [True]
    assert not wrap.starts_pass(len(wrap))  # wrap carries the cache over
    i, offsets = 0, []
    for p in range(8):  # every pass: the streams from a seeded offset in [0, block), whole blocks while one fits
        o = int(sb[i][0][0, 0])
        offsets.append(o)
        assert 0 <= o < 16 and o == sb.offset(p)
        n = (L - o) // 16
        for k in range(n):
            x, y = sb[i + k]
            assert x[:, 0].tolist() == [b * L + o + 16 * k for b in range(4)]
            assert torch.equal(y, x + 1) and int(y.max()) <= 3 * L + L  # never past the stream's last target
            assert sb.starts_pass(i + k) == (k == 0 and i > 0)
        i += n
    assert offsets[0] == 0 and len(set(offsets[1:])) > 1
    again = StreamBatches(tokens, batch_size=4, block=16, passes="random_offset", seed=5)
    assert torch.equal(again[i - 3][0], sb[i - 3][0])  # a pure function of the step: a resume reads the same
    other = StreamBatches(tokens, batch_size=4, block=16, passes="random_offset", seed=6)
    assert [other.offset(p) for p in range(1, 8)] != offsets[1:]


def test_sequence_batches_shuffle_per_epoch_deterministically():
    seqs = np.arange(50 * 6, dtype=np.int64).reshape(50, 6).astype(np.uint16)
    sb = SequenceBatches(seqs, batch_size=8, seed=3, start_token=99)
    assert len(sb) == 6
    x, y = sb[0]
    assert x.shape == y.shape == (8, 6) and (x[:, 0] == 99).all() and torch.equal(x[:, 1:], y[:, :-1])
    epoch0 = torch.cat([sb[i][1] for i in range(6)])
    assert len({r[0] for r in epoch0.tolist()}) == 48  # each sequence at most once per epoch
    epoch1 = torch.cat([sb[i][1] for i in range(6, 12)])
    assert not torch.equal(epoch0, epoch1)
    again = SequenceBatches(seqs, batch_size=8, seed=3, start_token=99)
    assert torch.equal(again[7][1], sb[7][1])
    assert not torch.equal(SequenceBatches(seqs, 8, seed=4, start_token=99)[0][1], sb[0][1])


def _scored(batches):
    """The scored targets (y where mask is set), sorted."""
    return sorted(v for b in batches for v in b.y[b.mask].tolist())


@pytest.mark.parametrize("n", [2, 9, 10, 11, 57, 103])
@pytest.mark.parametrize("batch_size,block", [(1, 4), (3, 10), (5, 7)])
def test_stateful_eval_scores_every_target_once(n, batch_size, block):
    data = np.arange(n)
    assert _scored(eval_batches(data, batch_size, block, min_context=0, stateful=True, start_token=0)) == list(
        range(1, n)
    )


def test_stateful_eval_streams_continue_across_batches():
    data = np.arange(41)
    batches = list(eval_batches(data, 2, 8, min_context=0, stateful=True, start_token=0))
    assert [b.x.shape for b in batches] == [(2, 8)] * 3
    assert batches[1].x[0, 0].item() == batches[0].x[0, -1].item() + 1
    assert batches[0].x[1, 0].item() == 20  # stream 2 starts at target 21 of 40


@pytest.mark.parametrize("n", [2, 8, 9, 30, 101])
@pytest.mark.parametrize("block,min_context", [(8, 0), (8, 3), (8, 7), (5, 1)])
def test_window_eval_scores_every_target_once_with_min_context(n, block, min_context):
    data = np.arange(n)
    batches = list(eval_batches(data, 3, block, min_context=min_context, stateful=False, start_token=0))
    assert _scored(batches) == list(range(1, n))
    for i, b in enumerate(batches):
        assert torch.equal(b.y[b.mask], b.x[b.mask] + 1)
        t = torch.arange(block).expand_as(b.mask)
        first_window = (torch.arange(len(b.x)) + 3 * i == 0)[:, None]
        assert (first_window | (t >= min_context))[b.mask].all()


def test_window_eval_rejects_bad_min_context():
    for mc in (-1, 8, 9):
        with pytest.raises(DataError, match="min_context"):
            list(eval_batches(np.arange(50), 2, 8, min_context=mc, stateful=False, start_token=0))


def test_sequence_eval_scores_whole_sequences():
    seqs = np.arange(7 * 5).reshape(7, 5).astype(np.uint8)
    batches = list(eval_batches(seqs, 3, 5, min_context=0, stateful=False, start_token=256))
    assert [len(b.y) for b in batches] == [3, 3, 1]
    assert all(b.mask.all() and (b.x[:, 0] == 256).all() for b in batches)
    assert torch.equal(torch.cat([b.y for b in batches]), torch.from_numpy(seqs).long())
    with pytest.raises(DataError, match="sequence length"):
        list(eval_batches(seqs, 3, 4, min_context=0, stateful=False, start_token=256))


def test_window_eval_inputs_are_the_real_context():
    data = np.arange(60) % 256
    for b in eval_batches(data, 2, 8, min_context=5, stateful=False, start_token=0):
        for row, mask in zip(b.x.tolist(), b.mask.tolist()):
            last = max(i for i, m in enumerate(mask) if m)  # unscored context tokens are kept, not zeroed
            assert row[: last + 1] == list(range(row[0], row[0] + last + 1))
