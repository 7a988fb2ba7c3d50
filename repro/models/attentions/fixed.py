"""The fixed pattern (Child et al. 2019): the query's own block of l = ``stride`` positions and the last
c = ``c`` positions of every earlier block (the summary cells)."""

from repro.models.attentions._pattern import Pattern


class Attention(Pattern):
    pattern = "fixed"
