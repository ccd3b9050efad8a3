"""report layer (see docs/architecture.md)."""
