"""Claims: the papers' findings as checks over a manifest's runs, and their verdicts.

One package (import its modules: this file imports nothing, so that the config stage stays free of
pandas), imported by the config stage (parsing and validating a manifest's claims), the report stage
(judging them) and ``repro run`` (the power note) alike:

- :mod:`~repro.claims.language`: the grammar, parsed once; a check's kind (finding, sanity, cost);
- :mod:`~repro.claims.operators`: the comparison operators, one row each, with their verdict rules;
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
