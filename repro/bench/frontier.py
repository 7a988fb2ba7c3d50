"""``repro bench frontier``: seconds per training step of the frontier's seven attentions, interleaved.

Each attention at one scale's shape, stepped round-robin on a machine whose load is recorded: the time
panel of the frontier report (analysis/frontier.py, docs/frontier.md).

The cases are the frontier manifest's grid cells at ``--scale`` (experiments/suite/frontier.yaml: dense,
window, adaptive, dynamic, strided, fixed, longformer), each the spec of its seed-0 run: its model, its
``train.batch_size`` windows of ``data.block`` tokens (random ones, of ``--vocab`` symbols) and its
optimiser. A step is the training loop's (:class:`repro.train.module.LMModule`): forward, cross entropy
plus the span penalty, ``zero_grad``, backward, global-norm clipping, the optimiser's and the learning-rate
schedule's step and the spans' projection (``after_optimizer_step``).

The learned spans cost what they learned, so the adaptive and the dynamic span are timed at the spans a
stored run of the scale ended with (its ``summary.json``; of several seeds the one of median ``avg_span``,
of two the larger), held there through the timing (set again after every optimiser step):

* adaptive: each head's z of the stored run, exactly (z' = z / S);
* dynamic: z_t = S sigmoid(v . x_t + b) is a function of the text, and the summary keeps each head's mean
  over the last block: v = 0 and b = logit(z / S) make every token's z_t that mean. Its window follows the
  block's largest z_t, so this times a lower bound of the trained model's step (training followed the
  largest z_t of each block, which no stored file keeps).

Without a stored run the span is the initial one. Every record says what was timed (``span_source``, the
spans, each layer's window ``windows``).

Timing: all seven models are built in one process (a fresh one on CPU: :func:`repro.bench.common.run_worker`)
and stepped round-robin (:func:`repro.bench.common.interleaved`): ``--warmup`` untimed rounds, then
``--rounds`` timed ones, so a drift of the machine reaches every attention alike. A record keeps the median,
min and max over the rounds and every round's seconds. Load (:class:`repro.bench.common.Load`): the cores
other processes kept busy during set-up and warm-up and during each round, the load average before and
after, and ``idle`` (no interval above half a core, the training runs' ``ran_alone`` test).
"""

from __future__ import annotations

import argparse
import datetime
import statistics

from repro.bench import common
from repro.families.adaptive_span import learns

MANIFEST = "frontier"
# the columns `repro bench frontier` prints (every key is in the stored JSON)
COLUMNS = (
    "attention",
    "scale",
    "seconds_per_step",
    "seconds_per_step_min",
    "seconds_per_step_max",
    "rounds",
    "attn_keys_per_query",
    "avg_span",
    "windows",
    "others_cores_during_max",
    "idle",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale", default="cpu", help="the frontier manifest's scale whose model, batch and block are timed"
    )
    parser.add_argument("--rounds", type=int, default=20, help="timed interleaved rounds (one step of each attention)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed interleaved rounds first")
    parser.add_argument("--vocab", type=int, default=256, help="vocabulary of the random tokens (linux-doc bytes: 256)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--jsonl", default=None, help="also append the records to this file")


def stored_spans(root, specs) -> dict | None:
    """The spans a stored finished run of these specs (the seeds of one cell) ended with: of several, the
    one of median ``avg_span`` (of an even number, the larger of the middle two); None without one."""
    from repro.store.runs import RunDir

    found = []
    for spec in specs:
        summary = RunDir(root, spec.manifest, spec.run_id).summary()
        if summary.get("status") == "finished" and summary.get("spans"):
            found.append((float(summary["avg_span"]), spec.train.seed, spec.run_id, summary))
    if not found:
        return None
    avg, seed, run_id, summary = sorted(found)[len(found) // 2]
    return {
        "run_id": run_id,
        "seed": seed,
        "of_seeds": len(found),
        "spans": summary["spans"],
        "avg_span": avg,
        "params": summary.get("params"),
    }


def _pin(model, attention: str, spans: list[list[float]] | None):
    """A function that sets the span parameters of ``model`` to ``spans`` (z per layer and head, tokens);
    None: back to their initial values."""
    import torch

    if not learns(attention):
        return lambda: None
    targets = []
    for i, block in enumerate(model.blocks):
        attn = block.attn
        if spans is None:
            params = [attn.z_prime] if attention == "adaptive" else list(attn.span_proj.parameters())
            targets += [(p, p.detach().clone()) for p in params]
            continue
        z, S = spans[i], attn.span.S
        share = torch.tensor(z, dtype=torch.float32).div(S)
        if attention == "adaptive":
            targets.append((attn.z_prime, share.clamp(0.0, 1.0)))
        else:  # v = 0, b = logit(z / S): z_t = z for every token
            eps = 1e-6
            targets.append((attn.span_proj.weight, torch.zeros_like(attn.span_proj.weight)))
            targets.append((attn.span_proj.bias, torch.logit(share.clamp(eps, 1 - eps))))

    def pin():
        with torch.no_grad():
            for param, value in targets:
                param.copy_(value)

    return pin


def _setup(case: dict):
    """A case's model and its training step, ``step()``, as the training loop takes one."""
    import torch
    import torch.nn.functional as F

    from repro.config.spec import from_record
    from repro.train.module import LMModule

    spec = from_record(case["spec"])
    dev = torch.device(case["device"])
    torch.manual_seed(0)
    module = LMModule(spec, case["vocab"], None).to(dev)
    model = module.model.train()
    configured = module.configure_optimizers()
    opt, schedule = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    pin = _pin(model, case["attention"], (case.get("stored") or {}).get("spans"))
    pin()
    g = torch.Generator().manual_seed(1)
    shape = (spec.train.batch_size, spec.data.block)
    x, y = (torch.randint(0, case["vocab"], shape, generator=g).to(dev) for _ in range(2))
    half = str(spec.train.precision).startswith("bf16")

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=half):
            out = model(x, None)
        nll = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten())
        loss = nll if out.aux_loss is None else nll + out.aux_loss
        bool(torch.isfinite(loss))  # the loop's divergence check reads the loss on the host
        opt.zero_grad(set_to_none=True)
        loss.backward()
        module.configure_gradient_clipping(opt)
        opt.step()
        schedule.step()
        model.after_optimizer_step()
        pin()

    return model, step


def windows(model) -> list[int] | None:
    """Each layer's attended distances W as its last step took them (the span attentions: window, adaptive,
    dynamic; None for the others)."""
    if not all(hasattr(block.attn, "span") for block in model.blocks):
        return None
    out = []
    for block in model.blocks:
        attn = block.attn
        z = attn.z_seen if attn.z_seen is not None else attn.span.z(attn)
        out.append(int(min(model.block, attn.span.window(z))))
    return out


def _worker(payload: dict) -> dict:
    import torch

    cases = payload["cases"]
    first = next(iter(cases.values()))
    if first["threads"]:
        torch.set_num_threads(first["threads"])
    dev = torch.device(first["device"])
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    load = common.Load()
    load.mark()
    built = {name: _setup(case) for name, case in cases.items()}
    errors: dict[str, str] = {}
    cpu: dict[str, list[float]] = {}
    rounds = [0]

    def after_round():
        rounds[0] += 1
        load.mark(timed=rounds[0] == first["warmup"])  # the last warm-up round ends where timing starts

    times = common.interleaved(
        {n: b[1] for n, b in built.items()}, first["rounds"], sync, errors, cpu, first["warmup"], after_round
    )
    info = {}
    for name, (model, _) in built.items():
        stats = model.stats()
        info[name] = {
            "flops_per_token": stats["flops_per_token"],
            "attn_keys_per_query": stats["attn_keys_per_query"],
            "params": stats["params"],
            "avg_span": stats.get("avg_span"),
            "spans_timed": stats.get("spans"),
            "windows": windows(model),
        }
    return {
        "times": times,
        "cpu": cpu,
        "errors": errors,
        "info": info,
        "load": load.summary(),
        "threads": torch.get_num_threads(),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
    }


def _run(payload: dict) -> dict:
    if next(iter(payload["cases"].values()))["device"].startswith("cuda"):
        return _worker(payload)
    return common.run_worker("repro.bench.frontier", payload)


def cases(root, scale: str, vocab: int, threads: int, device: str, rounds: int, warmup: int) -> dict[str, dict]:
    """The frontier's grid cells at ``scale``, in grid order: each its seed-0 spec and, for the learned
    spans, the stored run whose spans it is timed at."""
    from repro.config.manifest import resolve
    from repro.errors import UserError

    manifest = resolve(MANIFEST)
    if scale not in manifest.scale_names():
        raise UserError(
            f"--scale {scale}: the {MANIFEST} manifest has no such scale; its scales: {', '.join(manifest.scale_names())}"
        )
    if rounds < 1 or warmup < 1:
        raise UserError(f"--rounds {rounds} --warmup {warmup}: allowed: at least 1 each")
    specs = manifest.expand(scale)
    out = {}
    for spec in specs:
        name = spec.cell["variant"]
        if name in out:
            continue
        seeds = [s for s in specs if s.cell == spec.cell]
        out[name] = {
            "attention": name,
            "spec": spec.record(None),
            "vocab": vocab,
            "threads": threads,
            "device": device,
            "rounds": rounds,
            "warmup": warmup,
            "stored": stored_spans(root, seeds) if learns(spec.model.attention) else None,
            "stored_params": next((p for s in seeds if (p := _summary(root, s).get("params")) is not None), None),
        }
    return out


def _summary(root, spec) -> dict:
    from repro.store.runs import RunDir

    return RunDir(root, spec.manifest, spec.run_id).summary()


def span_source(case: dict, timed: dict) -> str | None:
    """What span a learned-span case was timed at, in words (None: not a learned span)."""
    if not learns(case["attention"]):
        return None
    stored = case["stored"]
    if stored is None:
        return "no stored run at this scale: the initial spans, held through the timing"
    which = f"the stored run {stored['run_id']} (seed {stored['seed']}, median avg_span of {stored['of_seeds']} seeds)"
    if case["attention"] == "adaptive":
        return f"{which}: each head's z from its summary, held through the timing"
    return (
        f"{which}: each head's mean z_t from its summary for every token (v = 0), held through the timing; "
        f"windows {timed['windows']} where training's followed each block's largest z_t "
        "(not stored): a lower bound of its step"
    )


def main(args: argparse.Namespace) -> list[dict]:
    from repro.store.runs import results_root

    root = results_root(getattr(args, "results", None))
    built = cases(root, args.scale, args.vocab, args.threads, args.device, args.rounds, args.warmup)
    measured = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    timed = _run({"cases": built})
    times, load = timed.get("times", {}), timed.get("load", {})
    records = []
    for order, (name, case) in enumerate(built.items()):
        spec = case["spec"]
        rec = {
            "attention": name,
            "manifest": MANIFEST,
            "scale": args.scale,
            "run_id": spec["run_id"],
            "layers": spec["model"]["layers"],
            "d_model": spec["model"]["d_model"],
            "heads": spec["model"]["heads"],
            "block": spec["data"]["block"],
            "batch": spec["train"]["batch_size"],
            "vocab": case["vocab"],
            "optimizer": spec["train"]["optimizer"],
            "precision": "bf16" if str(spec["train"]["precision"]).startswith("bf16") else "32",
            "device": case["device"],
            "threads": timed.get("threads"),
            "device_name": timed.get("device_name"),
            "kernels": timed.get("kernels"),
            "timing": "interleaved",
            "order": order,
            "warmup": case["warmup"],
            "measured": measured,
        }
        if name not in times:
            error = timed.get("errors", {}).get(name) or timed.get("error", "timing worker failed")
            records.append({**rec, "error": error, **load})
            continue
        info = timed["info"][name]
        rounds = times[name]
        rec.update(
            seconds_per_step=statistics.median(rounds),
            seconds_per_step_min=min(rounds),
            seconds_per_step_max=max(rounds),
            rounds=len(rounds),
            seconds_per_round=rounds,
            cpu_seconds_per_step=common.median(timed.get("cpu", {}).get(name, [])),
            **info,
            stored_params=case["stored_params"],
        )
        if learns(name):
            stored = case["stored"] or {}
            rec.update(
                span_source=span_source(case, info),
                span_run=stored.get("run_id"),
                stored_avg_span=stored.get("avg_span"),
            )
        records.append({**rec, **load})
    common.append_jsonl(args.jsonl, records)
    return records


if __name__ == "__main__":  # the timing worker's fresh process (``_run``); run the bench with `repro bench frontier`
    common.worker_main(_worker)
