"""``repro bench adaptive``: training-step time and peak memory of fixed vs adaptive span at the same S.

Every case is one training step as the recipe runs it (forward over a block with a full
Transformer-XL cache, NLL + span loss, backward, Adagrad with the per-tensor clip of 0.03 from
``repro.train.optim``, z' clamping), on a small model with random tokens. Adaptive spans are set to given values z (all heads alike;
0 = their initial value), beside the analytic FLOPs per token (``repro.models.flops``) and the ratios of
each adaptive case to the fixed-span model. ``--dynamic`` adds the dynamic span (section 3.2: z_t from each
token's input, at its initial bias), whose record also states ``time_over_flops_share``: its seconds per
step over those of the adaptive case nearest its average span, divided by the ratio of their FLOPs per
token (1.0 = it costs exactly what its FLOPs cost beside the static span).

Time: median of ``--steps`` steps after ``--warmup`` steps, the cache carried between them; one
torch thread by default (``--threads``), which keeps the ratios stable on a shared CPU.

Peak memory (bytes above a baseline taken after the model and optimizer exist, so it counts the cache,
inputs, activations, gradients and temporaries of a step):

* CUDA: ``torch.cuda.max_memory_allocated`` minus the allocated bytes at the baseline, in-process.
* CPU: each case runs in a fresh subprocess (``python -m repro.bench.adaptive --worker``) with glibc's
  mmap threshold pinned (``MALLOC_MMAP_THRESHOLD_``) so large freed buffers leave the resident set;
  the peak is the kernel's high-water mark of the resident set (``VmHWM``, reset at the baseline via
  ``/proc/self/clear_refs`` where allowed, else the process's ``ru_maxrss``) minus the baseline RSS.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from repro.bench import common


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--span-limit", type=int, default=4096, help="S, the same for every case")
    parser.add_argument(
        "--spans",
        type=common.csv_of(float),
        default=[0.0, 512.0],
        help="adaptive spans z in tokens, comma-separated (0 = the initial value)",
    )
    parser.add_argument("--ramp", type=int, default=32, help="R")
    parser.add_argument("--dynamic", action="store_true", help="add the dynamic span (z_t per token) as a case")
    parser.add_argument("--layers", type=int, default=2, help="layers of the benchmarked model")
    parser.add_argument("--d-model", type=int, default=128, help="model width")
    parser.add_argument("--d-ff", type=int, default=512, help="feed-forward width")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--block", type=int, default=64, help="tokens per training block")
    parser.add_argument("--batch", type=int, default=4, help="sequences per batch")
    parser.add_argument("--vocab", type=int, default=256, help="vocabulary size")
    parser.add_argument("--steps", type=int, default=5, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (0: torch's default; 1 keeps timings stable on a shared CPU)",
    )
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument(
        "--precision", default="32", choices=["32", "bf16"], help="32, or bf16 under autocast (bf16-mixed)"
    )


def _measure(case: dict) -> dict:
    """One case, in this process."""
    import torch
    import torch.nn.functional as F

    from repro.models.adaptive_span import Config, Model, SpanConfig
    from repro.train import memory
    from repro.train.optim import AdagradClip

    if case["threads"]:
        torch.set_num_threads(case["threads"])
    dev = torch.device(case["device"])
    torch.manual_seed(0)
    S = case["span_limit"]
    cfg = Config(
        layers=case["layers"],
        d_model=case["d_model"],
        d_ff=case["d_ff"],
        heads=case["heads"],
        dropout=0.0,
        span=SpanConfig(kind=case["kind"], limit=S, ramp=case["ramp"]),
    )
    model = Model(cfg, case["vocab"], case["block"]).to(dev).train()
    if case["kind"] == "adaptive":
        with torch.no_grad():
            for layer in model.layers:
                layer.attn.z_prime.fill_(case["span"] / S)
    opt = AdagradClip(model.parameters(), lr=0.07, clip=0.03)  # the recipe's per-tensor clip
    B, M = case["batch"], case["block"]

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def step(state):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=case["precision"] == "bf16"):
            out = model(x, state)
        loss = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten())
        if out.aux_loss is not None:
            loss = loss + out.aux_loss
        opt.zero_grad(set_to_none=True)  # as the trainer does (Lightning)
        loss.backward()
        opt.step()
        model.after_optimizer_step()
        if case["kind"] == "adaptive":  # keep the spans where the case puts them
            with torch.no_grad():
                for layer in model.layers:
                    layer.attn.z_prime.fill_(case["span"] / S)
        return [s.detach() for s in out.state]

    sync()
    with memory.measuring(dev) as peak:
        g = torch.Generator().manual_seed(1)
        state = [torch.randn(B, layer.attn.cache_len(), cfg.d_model, generator=g).to(dev) for layer in model.layers]
        x = torch.randint(0, case["vocab"], (B, M), generator=g).to(dev)
        y = torch.randint(0, case["vocab"], (B, M), generator=g).to(dev)
        for _ in range(case["warmup"]):
            state = step(state)
        times = []
        for _ in range(case["steps"]):
            sync()
            t0 = time.perf_counter()
            state = step(state)
            sync()
            times.append(time.perf_counter() - t0)
    if dev.type == "cuda":
        how = "cuda max_memory_allocated"
    else:
        how = "VmHWM (reset at baseline) - baseline RSS" if peak.reset else "ru_maxrss - baseline RSS"
    stats = model.stats()
    return {
        **case,
        "span": case["span"] if case["kind"] == "adaptive" else None,
        "seconds_per_step": statistics.median(times),
        "seconds_per_step_min": min(times),
        "peak_memory_bytes": int(peak.bytes),
        "flops_per_token": stats["flops_per_token"],
        "avg_span": stats["avg_span"],
        "attention_window": stats["attention_window"][0],
        "cache_len": state[0].shape[1],
        "params": stats["params"],
        "threads": torch.get_num_threads(),
        "memory_measure": how,
    }


def _run(case: dict) -> dict:
    if case["device"].startswith("cuda"):
        return _measure(case)
    rec = common.run_worker("repro.bench.adaptive", case, common.memory_env())
    return {**case, **rec} if "error" in rec else rec


def main(args: argparse.Namespace) -> list[dict]:
    shared = dict(
        span_limit=args.span_limit,
        ramp=args.ramp,
        layers=args.layers,
        d_model=args.d_model,
        d_ff=args.d_ff,
        heads=args.heads,
        block=args.block,
        batch=args.batch,
        vocab=args.vocab,
        steps=args.steps,
        warmup=args.warmup,
        threads=args.threads,
        device=args.device,
        precision=args.precision,
    )
    fixed = _run({**shared, "kind": "fixed", "span": None})
    records = [fixed]
    for z in args.spans:
        rec = _run({**shared, "kind": "adaptive", "span": float(min(z, args.span_limit))})
        if "error" not in rec and "error" not in fixed:
            rec.update(
                speedup_vs_fixed=fixed["seconds_per_step"] / rec["seconds_per_step"],
                memory_ratio_vs_fixed=fixed["peak_memory_bytes"] / max(1, rec["peak_memory_bytes"]),
                flops_ratio_vs_fixed=fixed["flops_per_token"] / rec["flops_per_token"],
            )
        records.append(rec)
    if args.dynamic:
        rec = _run({**shared, "kind": "dynamic", "span": None})
        static = [r for r in records[1:] if "error" not in r]
        if "error" not in rec and static:
            near = min(static, key=lambda r: abs(r["avg_span"] - rec["avg_span"]))
            rec.update(
                static_case_span=near["span"],
                time_over_flops_share=(rec["seconds_per_step"] / near["seconds_per_step"])
                / (rec["flops_per_token"] / near["flops_per_token"]),
            )
        records.append(rec)
    return records


if __name__ == "__main__":  # a case's fresh process (``_run``); run the bench with `repro bench adaptive`
    print(json.dumps(_measure(json.loads(sys.argv[2]))))
