"""The ``race_c`` and ``race_fortran`` families (data race yes/no): the synthetic generator (``generator``, the
entry point) and its per-pattern kernels (``kernels``), the DataRaceBench and HPC-GPT loaders (``loaders``) and the
ThreadSanitizer cross-check (``tsan``).

Test: ``pytest tests/data/race``.
"""
