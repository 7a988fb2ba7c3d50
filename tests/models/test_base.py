"""The model-family contract: required methods are enforced, optional hooks have working defaults."""

import pytest
import torch

from repro.models.base import LanguageModel, ModelOutput


class Bigram(LanguageModel):
    """A stateless model whose logits depend on the whole prefix (a running sum), to check ``step``."""

    def __init__(self, vocab_size: int = 5, block: int = 8):
        super().__init__()
        self.vocab_size, self.block = vocab_size, block
        self.emb = torch.nn.Embedding(vocab_size + 1, vocab_size)

    def forward(self, x, state=None):
        return ModelOutput(self.emb(x).cumsum(1))

    def stats(self):
        return {}

    def flops_per_token(self):
        return 0.0


def test_a_family_without_a_required_method_cannot_be_built():
    class NoFlops(LanguageModel):
        def forward(self, x, state=None):
            return ModelOutput(x.float())

        def stats(self):
            return {}

    with pytest.raises(TypeError, match="flops_per_token"):
        NoFlops()


def test_default_hooks_stateless_and_step_reruns_the_prefix():
    torch.manual_seed(0)
    m = Bigram()
    assert m.init_state(3, torch.device("cpu")) is None
    m.after_optimizer_step()  # a no-op that must exist
    x = torch.randint(0, 6, (2, 6))
    cache, steps = None, []
    for t in range(x.shape[1]):
        logits, cache = m.step(x[:, t], cache, t)
        steps.append(logits)
    assert torch.equal(cache, x)
    assert torch.allclose(torch.stack(steps, 1), m(x).logits)


def test_prefill_is_one_forward_and_continues_like_steps():
    torch.manual_seed(0)
    m = Bigram()
    x = torch.randint(0, 6, (2, 5))
    calls = []
    m.register_forward_hook(lambda *_: calls.append(1))
    logits, cache = m.prefill(x)
    assert len(calls) == 1  # the whole prompt in one forward, not one per token
    by_steps, cache_steps = m.prefill_by_steps(x)
    assert torch.allclose(logits, by_steps) and torch.equal(cache, cache_steps)
    nxt = torch.tensor([1, 4])
    assert torch.allclose(m.step(nxt, cache, 5)[0], m(torch.cat([x, nxt[:, None]], 1)).logits[:, -1])
