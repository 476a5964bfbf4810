"""The data of every family, built by the ``prepare`` stage: one package per data family, shared code here.

- ``dgemm/``: DGEMM problems (size + SQD technique schedule), the kernel-variant generator and its kinds, and the
  verified SFT corpus.
- ``race/``: data-race detection (families ``race_c``, ``race_fortran``): the program builder, the per-pattern
  kernels, the synthetic generator, the DataRaceBench / HPC-GPT loaders and the ThreadSanitizer cross-check.
- ``qa/``: question answering (families ``mlperf``, ``plp``): the facts tables and their reader, the MLPerf and PLP
  items, and HPC-GPT's Alpaca-style files.
- Shared: ``schema`` (the record and its JSONL I/O), ``hygiene`` (dedup, conflicts, leaks, the split), ``stable``
  (name-keyed draws), ``cards`` (data cards), ``prepare`` (writing ``data/``) and ``families`` (each family's builder
  from its configured sources).

Test: ``pytest tests/data``.
"""
