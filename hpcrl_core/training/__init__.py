"""Assembly of TRL trainers (SFT in ``sft.py``, GRPO in ``rl.py``): params + data + policy → a ready trainer. No
maths here.

Test: ``pytest tests/training``.
"""
