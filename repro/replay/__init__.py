"""A stored run trained again: re-executed as it was made and compared bit for bit (``repro verify``), or
its checkpoint trained again (``repro run --retrain-checkpoint``, ``checkpoint``), or trained again at a
commit and put in its place (``repro retrain``, ``retrain``), with what is known beforehand of whether it
can give its stored bits here (``samebits``). Nothing here trains a new run: :mod:`repro.train` does."""
