"""experiments layer (see docs/architecture.md)."""
