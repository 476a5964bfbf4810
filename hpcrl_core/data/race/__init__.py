"""The ``race_c`` and ``race_fortran`` families (data race yes/no): the program builder (``programs``), the
per-pattern kernels that build on it (``kernels``), the synthetic generator (``generator``, the entry point), the
DataRaceBench and HPC-GPT loaders (``loaders``) and the ThreadSanitizer cross-check (``tsan``).

Test: ``pytest tests/data/race``.
"""
