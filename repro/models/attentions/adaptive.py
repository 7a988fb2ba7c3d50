"""The adaptive span (Sukhbaatar et al. 2019, section 3.1): a learned span z per head, the soft mask of
eq. 4 on the window, and eq. 6's penalty lambda on z (``span.loss_coef``); z and R are ``span.init`` and
``span.ramp``, S is ``span.limit``."""

from repro.models.attentions._band import SpanBand


class Attention(SpanBand):
    kind = "adaptive"
