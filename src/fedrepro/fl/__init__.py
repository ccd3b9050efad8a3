"""fl layer (see DESIGN.md)."""
