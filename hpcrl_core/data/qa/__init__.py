"""The question-answering families ``mlperf`` (factual) and ``plp`` (descriptive): the facts tables in ``facts/``
and their reader (``tables``), the items of each family (``mlperf``, ``plp``), and the loader of HPC-GPT's
Alpaca-style files (``alpaca``, also used for its race files).

Test: ``pytest tests/data/qa``.
"""
