"""Benchmarks behind `repro bench NAME`, registered in :data:`BENCHES`: each module exposes
``add_arguments(parser)`` and ``main(args) -> list[dict]``; the CLI prints the records (or JSON) and stores
them in results/bench/. The CLI imports these modules to build its parser, so torch and the models are
imported inside the functions that measure (importing them takes seconds)."""

from repro.registry import Plugin, Registry

BENCHES: Registry[Plugin] = Registry(
    "benchmark",
    [
        Plugin("adaptive", "repro.bench.adaptive"),
        Plugin("attention", "repro.bench.attention"),
        Plugin("cli", "repro.bench.cli"),
        Plugin("frontier", "repro.bench.frontier"),
        Plugin("st-step", "repro.bench.st_step"),
    ],
)
