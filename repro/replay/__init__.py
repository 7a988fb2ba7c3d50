"""A stored run trained again: re-executed as it was made and compared bit for bit (``repro verify``), or
its checkpoint trained again (``repro run --retrain-checkpoint``), with what is known beforehand of whether
it can give its stored bits here (``samebits``). Nothing here trains a new run: :mod:`repro.train` does."""
