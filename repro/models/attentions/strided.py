"""The strided pattern (Child et al. 2019, eq. for A(1), A(2) with stride l = ``stride``): the last l
positions and every l-th one before them."""

from repro.models.attentions._pattern import Pattern


class Attention(Pattern):
    pattern = "strided"
