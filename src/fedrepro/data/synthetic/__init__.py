"""Synthetic analogs of every dataset (scale mini), drawn offline and deterministically."""
