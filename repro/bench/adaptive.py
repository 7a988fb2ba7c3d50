"""``repro bench adaptive``: training-step time and peak memory of fixed vs adaptive span at the same S.

Every case is one training step as the recipe runs it (forward over a block with a full
Transformer-XL cache, NLL + span loss, backward, Adagrad with the per-tensor clip of 0.03 from
``repro.train.optim``, z' clamping), on a small model with random tokens. Adaptive spans are set to given values z (all heads alike;
0 = their initial value), beside the analytic FLOPs per token (``repro.models.flops``) and the ratios of
each adaptive case to the fixed-span model. ``--dynamic`` adds the dynamic span (section 3.2: z_t from each
token's input, at its initial bias), whose record also states ``time_over_flops_share``: its seconds per
step over those of the adaptive case nearest its average span, divided by the ratio of their FLOPs per
token (1.0 = it costs exactly what its FLOPs cost beside the static span). ``--compile`` builds every case
with ``model.compile`` (the band attention and the feed-forward under torch.compile; the dynamic span's
buckets stay eager); each record says ``compile``, and its ``first_step_seconds`` holds the compiles
(static shapes: one compile per case, cached on disk by inductor for later processes).

Time: every case is built in one process and stepped interleaved round by round
(:func:`repro.bench.common.interleaved`, after ``--warmup`` untimed steps each, at least 2: the first is
timed apart as ``first_step_seconds``; the cache carried between steps), with glibc's default allocator: ``seconds_per_step`` is the median of ``--steps`` rounds,
``speedup_vs_fixed`` the median over rounds of the fixed case's time over the case's. One torch thread by
default (``--threads``), which keeps the ratios stable on a shared CPU.

Peak memory (bytes above a baseline taken after the model and optimizer exist, so it counts the cache,
inputs, activations, gradients and temporaries of a step), measured apart from the timing:

* CUDA: ``torch.cuda.max_memory_allocated`` minus the allocated bytes at the baseline, in-process.
* CPU: each case runs in a fresh subprocess (``python -m repro.bench.adaptive --worker``) with glibc's
  mmap threshold pinned (``MALLOC_MMAP_THRESHOLD_``) so large freed buffers leave the resident set (which
  makes every large allocation a fresh mapping: too slow to time under); the peak is the kernel's
  high-water mark of the resident set (``VmHWM``, reset at the baseline via ``/proc/self/clear_refs``
  where allowed, else the process's ``ru_maxrss``) minus the baseline RSS, over ``--warmup`` + 1 steps.
"""

from __future__ import annotations

import argparse

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
    parser.add_argument(
        "--compile",
        action="store_true",
        help="the models with model.compile (the band and feed-forward under torch.compile); the compiles "
        "are in each record's first_step_seconds",
    )


def _setup(case: dict):
    """A case's model and its training step, ``step()``: one block with the cache carried over."""
    import torch
    import torch.nn.functional as F

    from repro.models.adaptive_span import Config, Model, SpanConfig
    from repro.train.optim import AdagradClip

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
        compile=case["compile"],
    )
    model = Model(cfg, case["vocab"], case["block"]).to(dev).train()

    def pin_spans():  # keep the spans where the case puts them
        if case["kind"] == "adaptive":
            with torch.no_grad():
                for layer in model.layers:
                    layer.attn.z_prime.fill_(case["span"] / S)

    pin_spans()
    opt = AdagradClip(model.parameters(), lr=0.07, clip=0.03)  # the recipe's per-tensor clip
    B, M = case["batch"], case["block"]
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, case["vocab"], (B, M), generator=g).to(dev)
    y = torch.randint(0, case["vocab"], (B, M), generator=g).to(dev)
    state = [None]  # the cache: a full one, made by the first step (so a memory measurement counts it)

    def step():
        if state[0] is None:
            state[0] = [
                torch.randn(B, layer.attn.cache_len(), cfg.d_model, generator=g).to(dev) for layer in model.layers
            ]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=case["precision"] == "bf16"):
            out = model(x, state[0])
        loss = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten())
        if out.aux_loss is not None:
            loss = loss + out.aux_loss
        opt.zero_grad(set_to_none=True)  # as the trainer does (Lightning)
        loss.backward()
        opt.step()
        model.after_optimizer_step()
        pin_spans()
        state[0] = [s.detach() for s in out.state]

    return model, step, state


def _worker(payload: dict) -> dict:
    """In this process: ``time`` steps every case interleaved; ``memory`` measures one case's peak."""
    import time

    import torch

    from repro.train import memory

    cases = payload["cases"]
    first = next(iter(cases.values()))  # what every case shares: threads, device, steps
    if first["threads"]:
        torch.set_num_threads(first["threads"])
    dev = torch.device(first["device"])

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    if payload["what"] == "memory":
        case = first
        sync()
        _, step, _ = _setup(case)
        with memory.measuring(dev) as peak:
            for _ in range(case["warmup"] + 1):
                step()
            sync()
        if dev.type == "cuda":
            how = "cuda max_memory_allocated"
        else:
            how = "VmHWM (reset at baseline) - baseline RSS" if peak.reset else "ru_maxrss - baseline RSS"
        return {"peak_memory_bytes": int(peak.bytes), "memory_measure": how}
    built = {name: _setup(case) for name, case in cases.items()}
    first_step = {}
    for name, (_, step, _) in built.items():
        for i in range(max(1, first["warmup"] - 1)):  # interleaved adds one warm-up
            t0 = time.perf_counter()
            step()
            sync()
            if i == 0:  # the first step: with --compile, the compiles of the case's shapes
                first_step[name] = time.perf_counter() - t0
    errors: dict[str, str] = {}
    times = common.interleaved({n: b[1] for n, b in built.items()}, first["steps"], sync, errors)
    out = {"times": times, "errors": errors, "threads": torch.get_num_threads(), "stats": {}}
    for name, (model, _, state) in built.items():
        stats = model.stats()
        out["stats"][name] = {
            "flops_per_token": stats["flops_per_token"],
            "avg_span": stats["avg_span"],
            "attention_window": stats["attention_window"][0],
            "cache_len": state[0][0].shape[1],
            "params": stats["params"],
            "first_step_seconds": first_step[name],
        }
    return out


def _run(payload: dict, env: dict | None = None) -> dict:
    if next(iter(payload["cases"].values()))["device"].startswith("cuda"):
        return _worker(payload)
    return common.run_worker("repro.bench.adaptive", payload, env)


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
        compile=args.compile,
    )
    cases = {"fixed": {**shared, "kind": "fixed", "span": None}}
    for z in args.spans:
        cases[f"adaptive z={z:g}"] = {**shared, "kind": "adaptive", "span": float(min(z, args.span_limit))}
    if args.dynamic:
        cases["dynamic"] = {**shared, "kind": "dynamic", "span": None}
    cuda = args.device.startswith("cuda")
    timed = _run({"what": "time", "cases": cases})
    times = timed.get("times", {})
    records = []
    for name, case in cases.items():
        rec = {**case, "threads": timed.get("threads", case["threads"]), "kernels": timed.get("kernels")}
        if name not in times:
            records.append({**rec, "error": timed.get("errors", {}).get(name) or timed.get("error", "timing failed")})
            continue
        mem = _run({"what": "memory", "cases": {name: case}}, None if cuda else common.memory_env())
        rec.update(
            seconds_per_step=common.median(times[name]),
            seconds_per_step_min=min(times[name]),
            rounds=len(times[name]),
            timing="interleaved",
            **timed["stats"][name],
            **{k: v for k, v in mem.items() if k in ("peak_memory_bytes", "memory_measure", "error")},
        )
        records.append(rec)
    fixed = records[0]
    for name, rec in zip(cases, records):
        if name == "fixed" or "error" in rec or "error" in fixed:
            continue
        rec.update(
            speedup_vs_fixed=common.paired_speedup(times["fixed"], times[name]),
            memory_ratio_vs_fixed=fixed["peak_memory_bytes"] / max(1, rec.get("peak_memory_bytes") or 1),
            flops_ratio_vs_fixed=fixed["flops_per_token"] / rec["flops_per_token"],
        )
    dynamic = records[-1] if args.dynamic else None
    static = [r for r in records[1 : len(records) - bool(args.dynamic)] if "error" not in r]
    if dynamic is not None and "error" not in dynamic and static:
        near = min(static, key=lambda r: abs(r["avg_span"] - dynamic["avg_span"]))
        dynamic.update(
            static_case_span=near["span"],
            time_over_flops_share=(dynamic["seconds_per_step"] / near["seconds_per_step"])
            / (dynamic["flops_per_token"] / near["flops_per_token"]),
        )
    return records


if __name__ == "__main__":  # a worker's fresh process (``_run``); run the bench with `repro bench adaptive`
    common.worker_main(_worker)
