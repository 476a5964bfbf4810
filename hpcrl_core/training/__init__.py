"""Assembly of TRL trainers (SFT in ``sft.py``, GRPO in ``rl.py``, the HARGO subclass in ``hargo.py``): params + data
+ policy → a ready trainer. No maths here (the estimators live in ``hpcrl_core/algorithms/advantages.py``).

Test: ``pytest tests/training``.
"""

import warnings

# The pinned TRL calls transformers' gradient-checkpointing API by its old names (TrainingArguments
# .gradient_checkpointing, PreTrainedModel.is_gradient_checkpointing / gradient_checkpointing_enable / _disable),
# which transformers 5 deprecated for activation_checkpointing* with a FutureWarning. GRPO toggles checkpointing
# around every generation and the warnings registry is reset during a step, so the warning came back every step
# and buried the training log. The calls are TRL's, not ours, and change nothing we compute; remove this filter
# when the pinned TRL uses the new names.
warnings.filterwarnings("ignore", message=r"`(is_)?gradient_checkpointing\w*` is deprecated", category=FutureWarning)
