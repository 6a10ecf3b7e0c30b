"""The Hugging Face bridge: load ``transformers`` checkpoints into llmviz models, and capture
attention from Hugging Face models. Needs ``transformers`` (``pip install llmviz[hf]``).
"""

from __future__ import annotations

from .bridge import (
    capture_attention,
    config_from_hf_gpt2,
    config_from_hf_llama,
    from_hf_gpt2,
    from_hf_llama,
)

__all__ = ["config_from_hf_llama", "config_from_hf_gpt2", "from_hf_llama", "from_hf_gpt2", "capture_attention"]
