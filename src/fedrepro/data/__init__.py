"""data layer (see docs/architecture.md)."""
