"""The dynamic span (Sukhbaatar et al. 2019, section 3.2): z_t = S sigmoid(v . x_t + b) per query and head
from the layer's input, the same soft mask and penalty as the adaptive span."""

from repro.models.attentions._band import SpanBand


class Attention(SpanBand):
    kind = "dynamic"
