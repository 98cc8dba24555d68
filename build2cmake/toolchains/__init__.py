"""Managed ROCm toolchains: recipes and their sources, install / list / remove, run inside."""
