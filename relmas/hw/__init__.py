"""Accelerator specs, the Eyeriss-like and Simba-like cost models, and the mapping search."""
