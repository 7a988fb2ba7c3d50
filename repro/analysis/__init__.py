"""The renderers of the two papers' tables and figures (registered with repro.report.renderers)."""
