"""``model.compile``: the adaptive-span layers trained under torch.compile against eager, the reference
(float64, forward and gradients), its key off the run id at its default, and eager processes that never
load torch._dynamo."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from repro.config.spec import build_run
from repro.models import adaptive_span as AS

# inductor (what model.compile runs) costs some 40 CPU-seconds cold on 2 cores, twice the CI's budget for
# this: by default the graph is traced and differentiated as inductor gets it (dynamo + AOTAutograd,
# seconds) and run by eager kernels; REPRO_TEST_INDUCTOR=1 runs inductor's own kernels as well
BACKENDS = ["aot_eager", *(["inductor"] if os.environ.get("REPRO_TEST_INDUCTOR") == "1" else [])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_band_equals_eager_forward_and_gradients(backend):
    """The compiled path of a training step (``SpanAttention._band``, what ``model.compile`` compiles besides
    the feed-forward) against eager, in float64: a cache shorter than the band (padding keys) and spans
    whose mask is partly on the ramp."""
    torch.manual_seed(0)
    cfg = AS.Config(
        layers=1,
        d_model=16,
        d_ff=32,
        heads=2,
        dropout=0.0,
        span=AS.SpanConfig(kind="adaptive", limit=96, ramp=8, init=0.3),
        compile=True,
    )
    model = AS.Model(cfg, 11, block=8).double().train()
    attn = model.layers[0].attn
    assert attn.compiled
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 8, 16, generator=g, dtype=torch.float64, requires_grad=True)
    past = torch.randn(2, 40, 16, generator=g, dtype=torch.float64)
    z = attn.span.z(attn)
    W = attn.window(z)
    n_pad = W - 1 - past.shape[1]
    assert n_pad > 0 and 0 < float(z.detach().min()) < W - attn.span.R

    def run(band):
        out = band(attn, h, past, h, model.pe, attn.span.z(attn), W, n_pad)
        grads = torch.autograd.grad(
            (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), [h, *attn.parameters(), model.pe]
        )
        return out, grads

    out_e, grads_e = run(AS.SpanAttention._band)
    out_c, grads_c = run(torch.compile(AS.SpanAttention._band, backend=backend, dynamic=False))
    torch.testing.assert_close(out_c, out_e, rtol=1e-10, atol=1e-12)
    for a, b in zip(grads_c, grads_e, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    assert (grads_e[-2] != 0).all()  # z' (the last of the attention's parameters) learns through the mask


def test_compile_is_off_the_run_id_at_its_default():
    base = {
        "data": {"name": "wiki-lead8", "block": 64},
        "model": {"family": "adaptive_span", "layers": 1, "d_model": 16, "d_ff": 32, "heads": 2},
        "train": {"steps": 10},
    }

    def run(**model):
        return build_run("m", "tiny", {}, {**base, "model": {**base["model"], **model}})

    assert run(compile=False).run_id == run().run_id and "compile" not in run().resolved()["model"]
    assert run(compile=True).run_id != run().run_id and run(compile=True).resolved()["model"]["compile"] is True


def test_an_eager_training_step_never_loads_dynamo():
    code = (
        "import sys, torch\n"
        "from repro.models import adaptive_span as AS\n"
        "cfg = AS.Config(layers=1, d_model=16, d_ff=32, heads=2, span=AS.SpanConfig(kind='adaptive', limit=64))\n"
        "m = AS.Model(cfg, 11, block=8).train()\n"
        "m(torch.randint(0, 11, (2, 8))).logits.sum().backward()\n"
        "assert 'torch._dynamo' not in sys.modules, 'eager loaded torch._dynamo'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
