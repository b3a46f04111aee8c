"""The ceiling: how many deadlines any schedule the engine allows can meet (docs/ceiling.md)."""
