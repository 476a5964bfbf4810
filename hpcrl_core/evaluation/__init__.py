"""Evaluation: HARGO metrics (``metrics``), PLP embedding similarity (``embeddings``) and the evaluation runner.

Test: ``pytest tests/evaluation``.
"""
