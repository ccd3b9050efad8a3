"""tta layer (see DESIGN.md)."""
