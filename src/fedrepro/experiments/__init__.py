"""experiments layer (see DESIGN.md)."""
