"""A selection's runs as data before anything trains: each run's manifest, spec and stored state, its ETA."""
