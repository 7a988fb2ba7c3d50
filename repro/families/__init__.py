"""What the stages above the models know of a model family that is not its numbers code: one module per
family (``adaptive_span.py``), imported alike by the config stage, the claims, the reports and the
benchmarks, so that a family's facts are stated once, below all of them. A family's schema is
:mod:`repro.config.families`, its mechanism ``repro/models/``; nothing here is run by a training run."""
