"""The Kimi delta rule: its two forms agree (float64), they match transformers' reference scans
(float32), a gate shared by every channel gives Gated DeltaNet back, and bad input is refused."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.kda import kda_chunked, kda_recurrent, kimi_delta_rule
from llmviz.attention.linear import gated_delta_rule


def _inputs(B=2, H=3, T=29, Dk=8, Dv=6, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.nn.functional.normalize(torch.randn(B, H, T, Dk, generator=g, dtype=dtype), dim=-1)
            for _ in range(2))
    v = torch.randn(B, H, T, Dv, generator=g, dtype=dtype)
    beta = torch.rand(B, H, T, generator=g, dtype=dtype)
    log_decay = -2.0 * torch.rand(B, H, T, Dk, generator=g, dtype=dtype)  # per channel: 1 to e^-2
    state = torch.randn(B, H, Dk, Dv, generator=g, dtype=dtype)
    return q, k, v, beta, log_decay, state


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 29, 64])
def test_chunked_equals_recurrent_in_float64(chunk_size):
    q, k, v, beta, log_decay, state = _inputs()
    ref, ref_state = kda_recurrent(q, k, v, beta, log_decay, state=state)
    out, out_state = kda_chunked(q, k, v, beta, log_decay, state=state, chunk_size=chunk_size)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(out_state, ref_state, rtol=0, atol=1e-12)


def test_recurrent_is_the_definition():
    """One token by hand: forget row by row, write the correction, read with the scaled query."""
    q, k, v, beta, log_decay, S = _inputs(B=1, H=1, T=1)
    out, new = kda_recurrent(q, k, v, beta, log_decay, state=S, scale=0.5)
    a, kt, vt, qt = log_decay[0, 0, 0].exp(), k[0, 0, 0], v[0, 0, 0], q[0, 0, 0]
    Sd = a[:, None] * S[0, 0]
    u = beta[0, 0, 0] * (vt - Sd.T @ kt)
    S1 = Sd + torch.outer(kt, u)
    torch.testing.assert_close(new[0, 0], S1, rtol=0, atol=1e-14)
    torch.testing.assert_close(out[0, 0, 0], S1.T @ (0.5 * qt), rtol=0, atol=1e-14)


def test_a_state_carried_over_continues_the_sequence():
    q, k, v, beta, log_decay, state = _inputs()
    whole, end = kimi_delta_rule(q, k, v, beta, log_decay, state=state, chunk_size=8)
    first, mid = kimi_delta_rule(*(t[:, :, :11] for t in (q, k, v, beta, log_decay)), state=state)
    rest, end2 = kimi_delta_rule(*(t[:, :, 11:] for t in (q, k, v, beta, log_decay)), state=mid,
                                 form="recurrent")
    torch.testing.assert_close(torch.cat([first, rest], 2), whole, rtol=0, atol=1e-12)
    torch.testing.assert_close(end2, end, rtol=0, atol=1e-12)


def test_one_gate_for_every_channel_is_gated_deltanet():
    q, k, v, beta, log_decay, state = _inputs()
    per_head = log_decay[..., :1]  # (B, H, T, 1): the same gate on every channel
    ours, s1 = kimi_delta_rule(q, k, v, beta, per_head.expand_as(log_decay).contiguous(), state=state)
    gdn, s2 = gated_delta_rule(q, k, v, beta, per_head[..., 0], state=state)
    torch.testing.assert_close(ours, gdn, rtol=0, atol=1e-12)
    torch.testing.assert_close(s1, s2, rtol=0, atol=1e-12)
    other, _ = kimi_delta_rule(q, k, v, beta, log_decay, state=state)  # per-channel gates differ
    assert (other - gdn).abs().max() > 1e-2


@pytest.mark.parametrize("T", [9, 70])  # one chunk of transformers' 64, and two
def test_matches_transformers_reference_scans(T):
    mk = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
    q, k, v, beta, log_decay, state = (t.float() for t in _inputs(T=T))
    t = lambda x: x.transpose(1, 2)  # noqa: E731  transformers: (B, T, H, D)
    kw = dict(initial_state=state.clone(), output_final_state=True)
    ref_r, s_r = mk.recurrent_kimi_delta_attention(t(q), t(k), t(v), t(log_decay), t(beta), **kw)
    ref_c, s_c = mk.chunk_kimi_delta_attention(t(q), t(k), t(v), t(log_decay), t(beta), **kw)
    out_r, new_r = kimi_delta_rule(q, k, v, beta, log_decay, state=state, form="recurrent")
    out_c, new_c = kimi_delta_rule(q, k, v, beta, log_decay, state=state, form="chunked")
    torch.testing.assert_close(t(out_r), ref_r, rtol=0, atol=1e-6)
    torch.testing.assert_close(new_r, s_r, rtol=0, atol=1e-6)
    torch.testing.assert_close(t(out_c), ref_c, rtol=0, atol=2e-6)
    torch.testing.assert_close(new_c, s_c, rtol=0, atol=2e-6)


def test_float32_runs_float32_and_returns_the_input_dtype():
    q, k, v, beta, log_decay, state = (x.float() for x in _inputs(T=5))
    out, S = kimi_delta_rule(q.half(), k.half(), v.half(), beta, log_decay)
    assert out.dtype == torch.float16 and S.dtype == torch.float32


def test_bad_input_is_refused():
    q, k, v, beta, log_decay, state = _inputs(T=5)
    with pytest.raises(ValueError, match=r"log_decay must be \(B, H, T, D_k\) = .*one gate per key channel"):
        kimi_delta_rule(q, k, v, beta, log_decay[..., :4])
    with pytest.raises(ValueError, match="log_decay must have 4 dimensions"):
        kimi_delta_rule(q, k, v, beta, log_decay[..., 0])
    with pytest.raises(ValueError, match=r"beta must be \(B, H, T\)"):
        kimi_delta_rule(q, k, v, beta[:, :1], log_decay)
    with pytest.raises(ValueError, match="form='scan' is not supported"):
        kimi_delta_rule(q, k, v, beta, log_decay, form="scan")
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        kimi_delta_rule(q, k, v, beta, log_decay, chunk_size=0)
    with pytest.raises(ValueError, match=r"state must have shape \(B, H, D_k, D_v\)"):
        kimi_delta_rule(q, k, v, beta, log_decay, state=state[:, :1])
    with pytest.raises(TypeError, match="q, k, v must share one dtype"):
        kimi_delta_rule(q, k, v.float(), beta, log_decay)
    with pytest.raises(TypeError, match="scale must be a real number"):
        kimi_delta_rule(q, k, v, beta, log_decay, scale="1")
