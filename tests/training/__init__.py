"""Tests of hpcrl_core.training. Run: ``.venv/bin/python -m pytest tests/training -q``."""
