"""Evaluation: the post-SFT runner (``runner``), the SFT-vs-RL DGEMM evaluation (``dgemm_eval``), sampling
(``generate``), task metrics (``metrics``: race F1, MLPerf exact match and tiered score, WinRate), PLP embedding
similarity (``embeddings``) and plots (``plots``).

Test: ``pytest tests/evaluation``.
"""
