"""Reports: a manifest's tables, figures and verdicts, and REPORT.md over all of them."""
