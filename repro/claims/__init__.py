"""Claims: the papers' findings as checks over a manifest's runs, and their verdicts.

One package (import its modules: this file imports nothing), imported by the report stage (judging a
manifest's claims) and ``repro run`` (the power note) alike. The checks' grammar, which the config stage
parses manifests with, stands below the config stage in :mod:`repro.grammar` (the language, the
comparison operators and their verdict rules); here:

- :mod:`~repro.claims.select`: which runs a selection picks, the seeds that complete a claim, seed means;
- :mod:`~repro.claims.values`: the values of a check's expressions (arithmetic, functions, comparisons);
- :mod:`~repro.claims.judge`: one check judged, its parts combined (Bonferroni inside a claim);
- :mod:`~repro.claims.gates`: :func:`evaluate`, a claim with its preconditions, controls and gates;
- :mod:`~repro.claims.trajectory`: the gate on a bits verdict's training curves;
- :mod:`~repro.claims.stats`: pure statistics (t, noncentral t, TOST, sign flips, Holm, BH);
- :mod:`~repro.claims.power`: smallest effects of interest, and what a number of seeds can decide;
- :mod:`~repro.claims.verdict`: the :class:`Verdict` and :class:`Margin` a judgement gives;
- :mod:`~repro.claims.design`: a claim's design (check, premises, controls, sesoi, split, looks, family), hashed;
- :mod:`~repro.claims.registration`: the design each run was trained for (its stamp, git history), *post hoc*.
"""
