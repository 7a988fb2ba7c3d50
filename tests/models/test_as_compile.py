"""``model.compile``: the adaptive-span layers trained under torch.compile against eager, the reference
(float64, forward and gradients), its key off the run id at its default, and eager processes that never
load torch._dynamo. One small compile in all (a few seconds)."""

from __future__ import annotations

import subprocess
import sys

import torch
import torch.nn.functional as F

from repro.config.spec import build_run
from repro.models import adaptive_span as AS


def _model(compile_: bool) -> AS.Model:
    torch.manual_seed(0)
    cfg = AS.Config(
        layers=2,
        d_model=16,
        d_ff=32,
        heads=2,
        dropout=0.0,
        span=AS.SpanConfig(kind="adaptive", limit=96, ramp=8, init=0.3),
        compile=compile_,
    )
    return AS.Model(cfg, 11, block=8).double().train()


def _step(model: AS.Model, x, y, state):
    out = model(x, state)
    loss = F.cross_entropy(out.logits.flatten(0, 1), y.flatten()) + out.aux_loss
    loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


def test_compiled_training_step_equals_eager_forward_and_gradients():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 11, (2, 8), generator=g), torch.randint(0, 11, (2, 8), generator=g)
    eager, comp = _model(False), _model(True)
    # a cache shorter than the band: padding keys, and spans whose mask is partly on the ramp
    state = [torch.randn(2, 40, 16, generator=g, dtype=torch.float64) for _ in eager.layers]
    out_e, grads_e = _step(eager, x, y, state)
    out_c, grads_c = _step(comp, x, y, state)
    assert comp.layers[0].attn.compiled and not eager.layers[0].attn.compiled
    torch.testing.assert_close(out_c.logits, out_e.logits, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out_c.aux_loss, out_e.aux_loss, rtol=1e-12, atol=0)
    for a, b in zip(out_c.state, out_e.state):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert grads_c.keys() == grads_e.keys()
    for name in grads_e:
        torch.testing.assert_close(grads_c[name], grads_e[name], rtol=1e-9, atol=1e-10, msg=name)
    assert (grads_e["layers.0.attn.z_prime"] != 0).all()  # the spans learn through the compiled mask


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
