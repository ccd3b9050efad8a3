"""Benchmarks the project runs on itself: engine efficiency, memory, scaling, paper cost."""
