"""Data layer: real sources, synthetic analogs, client partitions and image transforms."""
