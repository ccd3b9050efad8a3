"""Transforms of device-resident images: batches, client transforms, corruptions, views."""
