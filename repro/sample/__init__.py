"""Generation from a stored run: its trained model loaded (``trained``; a checkpoint trained again if it
was not kept) and sampled from with cached keys and values (``sampling``; ``repro sample``)."""
