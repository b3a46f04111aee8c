"""Figures of simulation results (matplotlib, headless)."""
