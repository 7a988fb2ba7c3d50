"""repro: reproduce Adaptive Attention Span and Sparse Transformers from declarative manifests."""

__version__ = "0.1.0"
