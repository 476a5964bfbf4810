"""Assembly of TRL trainers (SFT, GRPO, HARGO): params + data + policy → a ready trainer. No maths here.

Test: ``pytest tests/training``.
"""
