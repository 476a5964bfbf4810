"""Models: the tiny model's tokenizer and Qwen2 config, local pretrained models, LoRA, and ``load_policy``.

Test: ``pytest tests/models``.
"""
