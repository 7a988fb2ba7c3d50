"""Benchmarks behind `repro bench NAME`: each module exposes ``add_arguments(parser)`` and
``main(args) -> list[dict]``; the CLI prints the records (or JSON) and stores them in results/bench/.
The CLI imports these modules to build its parser, so torch and the models are imported inside the
functions that measure (importing them takes seconds)."""
