"""The ``dgemm`` family: problems (``problems``), kernel variants (``variants``, one module per group of kinds in
``kinds/``) and the verified SFT corpus that pairs them (``corpus``).

Test: ``pytest tests/data/dgemm``.
"""
