"""The synthetic GPU fleet: its model, its simulation, one writer per ingest format, and a
committed fleet."""
