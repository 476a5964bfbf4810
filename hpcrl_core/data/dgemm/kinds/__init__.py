"""The kinds of DGEMM kernel variants, one module per group (``loops``, ``unroll``, ``blocked``, ``vector``,
``packed``), and the surface style they all write through (``style``). ``variants.KINDS`` names and mixes them.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""
