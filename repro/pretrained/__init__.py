"""The authors' released adaptive-span models, evaluated by the suite's own model and data pipeline.

The official code (facebookresearch/adaptive-span) publishes four trained checkpoints. This package reads
one (:mod:`.checkpoint`), puts its tensors into the suite's :class:`repro.models.adaptive_span.Model`
(:mod:`.mapping`), numbers its symbols as the official code did and maps them onto the suite's vocabulary
(:mod:`.symbols`), scores it with the official evaluation protocol (:mod:`.protocol`) beside the suite's
own, and stores the result as a run (:mod:`.imported`); :mod:`.released` knows the four files, where they
are and the flags they were trained with; :mod:`.cost` says what scoring them downloads and how long it
takes. What this proves and what it does not: docs/pretrained.md.
"""
