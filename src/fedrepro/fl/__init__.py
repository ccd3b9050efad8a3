"""fl layer (see docs/architecture.md)."""
