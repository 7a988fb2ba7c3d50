"""The claim language's grammar: what a manifest's check may say, parsed once (:mod:`~repro.grammar.language`:
the selections, functions, words and a check's kind), and the comparison operators it admits, one row each
with the rule that judges it (:mod:`~repro.grammar.operators`).

It stands below everything that reads a check: the config stage, which parses and validates a manifest's
claims with it, and the claims (:mod:`repro.claims`) and reports that judge them. So it imports nothing
of the suite but :mod:`repro.errors`, and no pandas (this file imports nothing: import its modules)."""
