"""Evaluation: one DGEMM evaluation (``dgemm``: sampling, benchmarking, rates, the SFT-vs-RL comparison and its
sample rows), the post-SFT report over every family (``runner``), reports and their tables (``report``: the one
writer, the summary ``make run`` prints), sampling (``generate``), task metrics (``metrics``: race F1 and verdict
parsing, MLPerf exact match and tiered score, WinRate), PLP embedding similarity (``embeddings``) and plots
(``plots``).

Test: ``pytest tests/evaluation``.
"""
