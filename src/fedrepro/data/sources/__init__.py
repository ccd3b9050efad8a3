"""Real datasets: the registry, verified downloads, staged layouts and the raw-file parsers."""
