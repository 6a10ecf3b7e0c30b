"""Generation for a left-padded batch of prompts of different lengths.

Greedy decoding of the batch must give each row exactly the tokens its prompt gives alone, and
KV-cache decoding must equal re-running the full forward, for every attention structure and
position scheme a preset can have. Models run in float64 so that argmax never flips on a
last-bit difference between a batched and a single-prompt matmul. Dynamic NTK scaling is the
documented exception: past the trained length the cached keys keep their old rotation.
"""

from __future__ import annotations

import pytest
import torch

from llmviz.model.generation import generate
from llmviz.model.lm import DecoderLM
from llmviz.model.presets import preset
from llmviz.position.rope import RopeScaling

CONFIGS = {
    "mha_learned": lambda: preset("gpt2"),
    "gqa_rope": lambda: preset("llama2", n_kv_heads=2),
    "sliding_window": lambda: preset("mistral", sliding_window=4),
    "alibi": lambda: preset("bloom"),
    "rope_linear": lambda: preset("llama2", rope_scaling=RopeScaling("linear", factor=2.0)),
    "rope_ntk": lambda: preset("llama2", rope_scaling=RopeScaling("ntk", factor=2.0)),
    "rope_yarn": lambda: preset(
        "llama2", rope_scaling=RopeScaling("yarn", factor=4.0, original_max_position_embeddings=8)
    ),
    "rope_llama3": lambda: preset(
        "llama2", rope_scaling=RopeScaling("llama3", factor=4.0, original_max_position_embeddings=8)
    ),
    # dynamic NTK within its trained length (past it, see the last tests)
    "rope_dynamic": lambda: preset(
        "llama2", rope_scaling=RopeScaling("dynamic", factor=2.0, original_max_position_embeddings=64)
    ),
}
LENGTHS = (3, 7, 5)
NEW = 6
PAD = 0


def _model(cfg) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(cfg).double().eval()


def _prompts(vocab: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(1, vocab, (n,), generator=g) for n in LENGTHS]


def _left_pad(prompts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), T), PAD)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, T - len(p):] = p
        mask[i, T - len(p):] = 1
    return ids, mask


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_padded_batch_gives_each_prompt_its_own_tokens(name):
    model = _model(CONFIGS[name]())
    prompts = _prompts(model.config.vocab_size)
    ids, mask = _left_pad(prompts)
    T = ids.shape[1]
    for use_cache in (True, False):
        batch = generate(model, ids, attention_mask=mask, max_new_tokens=NEW, temperature=0,
                         use_cache=use_cache)
        assert batch.shape == (len(prompts), T + NEW)
        for i, p in enumerate(prompts):
            alone = generate(model, p[None], max_new_tokens=NEW, temperature=0, use_cache=use_cache)
            assert torch.equal(batch[i, T:], alone[0, len(p):]), (name, use_cache, i)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_padded_kv_cache_decoding_equals_full_forward(name):
    """Logits of every cached decode step equal a full forward over the padded prefix."""
    model = _model(CONFIGS[name]())
    ids, mask = _left_pad(_prompts(model.config.vocab_size))
    seq = generate(model, ids, attention_mask=mask, max_new_tokens=NEW, temperature=0)
    full_mask = torch.cat([mask, torch.ones(len(LENGTHS), NEW, dtype=torch.long)], dim=1)
    positions = (full_mask.cumsum(-1) - 1).clamp_min(0)  # (B, S)
    T = ids.shape[1]
    cache = model.new_cache()
    with torch.no_grad():
        model(ids, attention_mask=mask, positions=positions[:, :T], cache=cache)
        for t in range(T, T + NEW - 1):
            step = model(seq[:, t : t + 1], attention_mask=full_mask[:, : t + 1],
                         positions=positions[:, t : t + 1], cache=cache).logits[:, -1]
            full = model(seq[:, : t + 1], attention_mask=full_mask[:, : t + 1],
                         positions=positions[:, : t + 1]).logits[:, -1]
            real = full_mask[:, t].bool()
            torch.testing.assert_close(step[real], full[real])


def test_rows_stop_on_eos_and_are_padded_after():
    model = _model(CONFIGS["gqa_rope"]())
    prompts = _prompts(model.config.vocab_size)
    ids, mask = _left_pad(prompts)
    T = ids.shape[1]
    free = generate(model, ids, attention_mask=mask, max_new_tokens=NEW, temperature=0)
    eos = int(free[0, T + 1])  # row 0 emits it at its second new token
    out = generate(model, ids, attention_mask=mask, max_new_tokens=NEW, temperature=0,
                   eos_token_id=eos, pad_token_id=PAD)
    for i in range(len(prompts)):
        row, ref = out[i, T:], free[i, T : T + out.shape[1] - T]
        hits = (ref == eos).nonzero()
        stop = int(hits[0]) + 1 if len(hits) else len(ref)
        assert torch.equal(row[:stop], ref[:stop])  # identical up to and including its eos
        assert torch.all(row[stop:] == PAD)  # padding after it
    if not bool((free[:, T:] == eos).any(dim=1).all()):
        assert out.shape[1] == T + NEW  # some row never stopped: ran to the end


def test_generation_stops_early_when_every_row_has_stopped():
    model = _model(CONFIGS["mha_learned"]())
    p = _prompts(model.config.vocab_size)[1][None]
    free = generate(model, p, max_new_tokens=NEW, temperature=0)
    eos = int(free[0, p.shape[1]])  # the first new token
    out = generate(model, p, max_new_tokens=NEW, temperature=0, eos_token_id=eos)
    assert out.shape == (1, p.shape[1] + 1) and int(out[0, -1]) == eos


def test_generate_rejects_right_padding():
    model = _model(CONFIGS["gqa_rope"]())
    ids = torch.ones(2, 4, dtype=torch.long)
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    with pytest.raises(ValueError, match="generate\\(\\) needs left padding"):
        generate(model, ids, attention_mask=right, max_new_tokens=1)
    with pytest.raises(ValueError, match=r"attention_mask \(2, 3\) must have the shape of input_ids \(2, 4\)"):
        generate(model, ids, attention_mask=right[:, :3], max_new_tokens=1)


def _dynamic_gap(trained: int, total: int) -> list[float]:
    """Per decode step, max |cached logits - full-forward logits| for dynamic NTK scaling."""
    cfg = preset("llama2", rope_scaling=RopeScaling(
        "dynamic", factor=4.0, original_max_position_embeddings=trained))
    model = _model(cfg)
    ids = torch.randint(1, cfg.vocab_size, (1, total), generator=torch.Generator().manual_seed(2))
    cache, gaps = model.new_cache(), []
    with torch.no_grad():
        model(ids[:, :4], cache=cache)
        for t in range(4, total):
            step = model(ids[:, t : t + 1], cache=cache).logits[:, -1]
            full = model(ids[:, : t + 1]).logits[:, -1]  # what use_cache=False recomputes
            gaps.append(float((step - full).abs().max()))
    return gaps


def test_dynamic_ntk_cache_differs_from_full_forward_only_past_trained_length():
    """The documented exception, shown: equal while the sequence fits the trained length,
    different once it passes it (the cached keys keep the rotation they were computed with)."""
    trained, total = 8, 14
    gaps = _dynamic_gap(trained, total)
    lengths = range(5, total + 1)  # sequence length reached at each step
    within = [g for n, g in zip(lengths, gaps) if n <= trained]
    past = [g for n, g in zip(lengths, gaps) if n > trained]
    assert within and max(within) < 1e-12
    assert past and min(past) > 1e-6
