"""Independent PyTorch reference of ZAYA1 (ZAYA1-base layout), used only by tests and benchmarks.

Written from the project's ZAYA1 specification (docs/model.md restates what is cited here, under the
same section numbers); where that left room, Zyphra's `modeling_zaya.py` (branch `zaya`, commit
2f421fdf) was read for the facts.
Everything is fp32 (or whatever dtype the module is cast to, e.g. float64 for gradcheck); gradients
come from torch autograd only.

The module tree mirrors the checkpoint names of spec §4b, so `dict(model.named_parameters())` maps
checkpoint names (e.g. `model.layers.0.self_attn.qkv.conv_qk.1.weight`) to nn.Parameters directly;
`router.balancing_biases` are buffers (no gradient).

Usage:
    model = load_model("path/to/model_dir")      # config.json + model.safetensors
    logits, loss, routes = model(tokens)         # tokens LongTensor [B, S]
    # routes[k] = LongTensor [B*S] of route choices of the k-th MoE stage, whose global stage index
    # is model.moe_stage_indices[k]; token order b*S + s; value X means the skip route.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from safetensors_np import read_safetensors

ROUTER_NORM_EPS = 1e-6  # HF-zaya: getattr(config, "layernorm_epsilon", 1e-6) and the config has no such field


# ----------------------------------------------------------------------------------------------
# config


class ZayaRefConfig:
    """The fields of a Hugging Face `zaya` config.json that change the math, normalised to per-stage lists."""

    def __init__(self, cfg, strict=True):
        def need(key):
            if key not in cfg:
                raise ValueError(f"config.json: missing field {key!r}")
            return cfg[key]

        self.raw = cfg
        self.hidden_size = int(need("hidden_size"))
        self.num_attention_heads = int(need("num_attention_heads"))
        self.num_key_value_heads = int(cfg.get("num_key_value_heads", 0) or 0)
        self.vocab_size = int(need("vocab_size"))
        self.layers = list(need("zaya_layers"))
        L = len(self.layers)
        if L == 0:
            raise ValueError("config.json: zaya_layers is empty")
        self.kinds = []  # "a" or number of experts X
        for i, v in enumerate(self.layers):
            if isinstance(v, str):
                if v != "a":
                    raise ValueError(f"config.json: zaya_layers[{i}] = {v!r}, expected 'a' or an expert count")
                self.kinds.append("a")
            elif isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                self.kinds.append(int(v))
            else:
                raise ValueError(f"config.json: zaya_layers[{i}] = {v!r}, expected 'a' or an expert count")

        hf_head_dim = self.hidden_size // self.num_attention_heads
        self.head_dim = int(cfg.get("kv_channels") or cfg.get("head_dim") or hf_head_dim)

        def per_stage(list_key, scalar_key, default=None):
            # zaya-branch configs carry per-stage lists; other Zyphra versions carry one scalar.
            if list_key in cfg and cfg[list_key] is not None:
                v = cfg[list_key]
                if isinstance(v, list):
                    if len(v) != L:
                        raise ValueError(f"config.json: {list_key} has {len(v)} entries, zaya_layers has {L}")
                    return [int(x) for x in v]
                return [int(v)] * L
            if scalar_key is not None and cfg.get(scalar_key) is not None:
                return [int(cfg[scalar_key])] * L
            if default is not None:
                return [int(default)] * L
            raise ValueError(f"config.json: missing field {list_key!r}" + (f" (or {scalar_key!r})" if scalar_key else ""))

        self.n_q = per_stage("cca_num_q_heads", None, self.num_attention_heads // 2)
        self.n_k = per_stage("num_query_groups_list", "num_query_groups", self.num_key_value_heads or None)
        self.ffn = per_stage("ffn_hidden_size_list", "ffn_hidden_size")
        self.router_dim = per_stage("zaya_mlp_expansion", None)
        self.partial_rotary_factor = float(cfg.get("partial_rotary_factor", 1.0))
        self.rope_theta = float(cfg.get("rope_theta", 10000.0))
        self.norm_eps = float(cfg.get("norm_epsilon", 1e-5))
        self.tie = bool(cfg.get("tie_word_embeddings", True))
        self.use_mod = bool(cfg.get("zaya_use_mod", True))
        self.use_eda = bool(cfg.get("zaya_use_eda", True))

        # Features this reference does not implement: refuse rather than silently compute something else.
        for key, ok in [
            ("moe_router_topk", lambda v: int(v) == 1),
            ("scale_residual_merge", lambda v: bool(v)),
            ("add_bias_linear", lambda v: not v),
            ("attention_bias", lambda v: not v),
            ("lm_head_bias", lambda v: not v),
            ("gated_linear_unit", lambda v: bool(v)),
            ("activation_func", lambda v: v == "swiglu"),
            ("clamp_temp", lambda v: not v),
            ("cca_time0", lambda v: int(v) == 2),
            ("cca_time1", lambda v: int(v) == 2),
        ]:
            if key in cfg and cfg[key] is not None and not ok(cfg[key]):
                raise ValueError(f"config.json: {key} = {cfg[key]!r} is not supported by the reference")
        rs = cfg.get("rope_scaling")
        if rs not in (None, False) and not (isinstance(rs, dict) and rs.get("rope_type", rs.get("type")) == "default"):
            raise ValueError(f"config.json: rope_scaling = {rs!r} is not supported by the reference")

        d = self.head_dim
        for i, k in enumerate(self.kinds):
            if k == "a":
                if self.n_q[i] <= 0 or self.n_k[i] <= 0 or self.n_q[i] % self.n_k[i]:
                    raise ValueError(f"config.json: stage {i}: cca_num_q_heads {self.n_q[i]} must be a positive"
                                     f" multiple of num_query_groups_list {self.n_k[i]}")
                if (self.n_k[i] * d) % 2:
                    raise ValueError(f"config.json: stage {i}: n_k*d must be even (value shift halves)")
            else:
                if self.ffn[i] <= 0 or self.ffn[i] % 2:
                    raise ValueError(f"config.json: stage {i}: ffn_hidden_size_list must be a positive even number")
                if self.router_dim[i] <= 0:
                    raise ValueError(f"config.json: stage {i}: zaya_mlp_expansion must be positive")
        self.rotary_dim = int(d * self.partial_rotary_factor)
        if self.rotary_dim % 2:
            raise ValueError("config.json: rotary dim int(kv_channels*partial_rotary_factor) must be even")

        if strict:
            # Zyphra's code derives d = hidden/num_attention_heads, o_proj input = (num_attention_heads/2)*d
            # and the GQA repeat = (num_attention_heads/num_key_value_heads)/2 (spec §4b), so a config that
            # breaks these is not a valid HF zaya config.
            if self.head_dim != hf_head_dim:
                raise ValueError(f"config.json: kv_channels {self.head_dim} != hidden_size/num_attention_heads {hf_head_dim}")
            for i, k in enumerate(self.kinds):
                if k == "a":
                    if self.n_q[i] * 2 != self.num_attention_heads:
                        raise ValueError(f"config.json: cca_num_q_heads[{i}] = {self.n_q[i]} != num_attention_heads/2")
                    if self.num_key_value_heads and self.n_k[i] != self.num_key_value_heads:
                        raise ValueError(f"config.json: num_query_groups_list[{i}] = {self.n_k[i]} != num_key_value_heads")

        moe = [i for i, k in enumerate(self.kinds) if k != "a"]
        self.moe_stage_indices = moe
        self.first_moe_stage = moe[0] if moe else None


# ----------------------------------------------------------------------------------------------
# parameter containers: only hold tensors under checkpoint names; the math is in the forward code.


def _p(*shape):
    return nn.Parameter(torch.zeros(*shape))


class _Linear(nn.Module):
    def __init__(self, out_f, in_f, bias=False):
        super().__init__()
        self.weight = _p(out_f, in_f)
        if bias:
            self.bias = _p(out_f)


class _Conv(nn.Module):
    def __init__(self, c_out, c_in_per_group, k):
        super().__init__()
        self.weight = _p(c_out, c_in_per_group, k)
        self.bias = _p(c_out)


class _Norm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        # spec "Verified": y = x * rsqrt(mean(x^2) + eps) * w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _ResScale(nn.Module):
    """§3.1: h' = (h + b_h) * s_h ; r' = (r + b_r) * s_r ; returns r_i = h' + r' (r_0 = h')."""

    def __init__(self, E, has_residual):
        super().__init__()
        self.hidden_states_scale = nn.Parameter(torch.ones(E))
        self.hidden_states_bias = _p(E)
        self.has_residual = has_residual
        if has_residual:
            self.residual_scale = nn.Parameter(torch.ones(E))
            self.residual_bias = _p(E)

    def forward(self, residual, h):
        h = (h + self.hidden_states_bias) * self.hidden_states_scale
        if not self.has_residual:
            return h
        return h + (residual + self.residual_bias) * self.residual_scale


# ----------------------------------------------------------------------------------------------
# CCA attention stage (§1.2)


class _CCA(nn.Module):  # checkpoint prefix model.layers.{i}.self_attn.qkv.
    def __init__(self, E, n_q, n_k, d):
        super().__init__()
        C = (n_q + n_k) * d
        self.linear_q = _Linear(n_q * d, E)
        self.linear_k = _Linear(n_k * d, E)
        self.val_proj1 = _Linear(n_k * d // 2, E)
        self.val_proj2 = _Linear(n_k * d // 2, E)
        self.conv_qk = nn.ModuleList([_Conv(C, 1, 2), _Conv(C, d, 2)])
        self.temp = _p(n_k)


class _Attention(nn.Module):  # prefix model.layers.{i}.self_attn.
    def __init__(self, E, n_q, n_k, d, rotary_dim):
        super().__init__()
        self.qkv = _CCA(E, n_q, n_k, d)
        self.o_proj = _Linear(E, n_q * d)
        self.n_q, self.n_k, self.d, self.rotary_dim = n_q, n_k, d, rotary_dim
        self.attention = "matmul"  # or "sdpa": F.scaled_dot_product_attention (benchmarks)

    def forward(self, x, cos, sin, causal_mask):
        B, S, _ = x.shape
        n_q, n_k, d = self.n_q, self.n_k, self.d
        g = n_q // n_k
        C = (n_q + n_k) * d
        qkv = self.qkv

        # 1. down-projections, packed u = [q0 || k0] (n_q heads x d, then n_k heads x d)
        q0 = F.linear(x, qkv.linear_q.weight)  # [B,S,n_q*d]
        k0 = F.linear(x, qkv.linear_k.weight)  # [B,S,n_k*d]
        u = torch.cat([q0, k0], dim=-1).transpose(1, 2)  # [B,C,S] channels-first for conv1d

        # 2. two causal convs: pad 2 zero steps on the left, depthwise (len S+1; a_0 = bias) then
        #    head-grouped (len S). Both have biases.
        u = F.pad(u, (2, 0))
        a = F.conv1d(u, qkv.conv_qk[0].weight, qkv.conv_qk[0].bias, groups=C)  # [B,C,S+1]
        z = F.conv1d(a, qkv.conv_qk[1].weight, qkv.conv_qk[1].bias, groups=n_q + n_k)  # [B,C,S]
        z = z.transpose(1, 2)  # [B,S,C]
        zq = z[..., : n_q * d].reshape(B, S, n_k, g, d)
        zk = z[..., n_q * d :].reshape(B, S, n_k, d)

        # 3. q-k-mean with the pre-conv projections: q head h = j*g + r belongs to KV group j
        q0h = q0.reshape(B, S, n_k, g, d)
        k0h = k0.reshape(B, S, n_k, 1, d)
        qk_mean_q = (q0h + k0h) / 2  # [B,S,n_k,g,d]
        q1 = zq + qk_mean_q
        k1 = zk + qk_mean_q.mean(dim=3)  # group mean of (q0 + k0)/2

        # 4. value shift: [x_t W_v1^T || x_{t-1} W_v2^T], x_{-1} = 0, viewed as n_k heads of d
        x_prev = F.pad(x[:, :-1], (0, 0, 1, 0))
        v = torch.cat([F.linear(x, qkv.val_proj1.weight), F.linear(x_prev, qkv.val_proj2.weight)], dim=-1)
        v = v.reshape(B, S, n_k, d)

        # 5. L2 norm (plain, no eps) * sqrt(d); keys times the raw temperature
        sqrt_d = math.sqrt(d)
        q1 = q1.reshape(B, S, n_q, d)
        q2 = q1 * (sqrt_d / q1.norm(dim=-1, keepdim=True))
        k2 = k1 * (sqrt_d / k1.norm(dim=-1, keepdim=True)) * qkv.temp.view(1, 1, n_k, 1)

        # 6. partial RoPE on the first rotary_dim dims (rotate_half inside that slice)
        q2 = _rope(q2, cos, sin, self.rotary_dim)
        k2 = _rope(k2, cos, sin, self.rotary_dim)

        # 7. causal GQA; kv head = h // g. Lay q out as [B, n_k, g*S, d] so one batched matmul per
        #    KV head serves its g query heads without materialising repeated keys. (The benchmark
        #    peer on a GPU takes PyTorch's fused attention instead: same math, no score matrix.)
        if self.attention == "sdpa":
            q = q2.permute(0, 2, 1, 3)  # [B,n_q,S,d], head h = j*g + r
            k = k2.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)  # kv head h // g
            vv = v.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
            o = F.scaled_dot_product_attention(q, k, vv, is_causal=True)  # scale 1/sqrt(d)
            return F.linear(o.permute(0, 2, 1, 3).reshape(B, S, n_q * d), self.o_proj.weight)
        qh = q2.reshape(B, S, n_k, g, d).permute(0, 2, 3, 1, 4).reshape(B, n_k, g * S, d)
        kh = k2.permute(0, 2, 3, 1)  # [B,n_k,d,S]
        vh = v.permute(0, 2, 1, 3)  # [B,n_k,S,d]
        scores = torch.matmul(qh, kh) / sqrt_d  # [B,n_k,g*S,S]
        scores = scores.view(B, n_k, g, S, S).masked_fill(causal_mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1).view(B, n_k, g * S, S)
        o = torch.matmul(probs, vh)  # [B,n_k,g*S,d]
        o = o.view(B, n_k, g, S, d).permute(0, 3, 1, 2, 4).reshape(B, S, n_q * d)

        # 8. output projection
        return F.linear(o, self.o_proj.weight)


def _rope(x, cos, sin, rd):
    """x [B,S,H,d]; cos/sin [S, rd]. NeoX rotate_half inside the first rd dims, the rest passes."""
    if rd == 0:
        return x
    xr, xp = x[..., :rd], x[..., rd:]
    half = rd // 2
    rot = torch.cat([-xr[..., half:], xr[..., :half]], dim=-1)
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.cat([xr * c + rot * s, xp], dim=-1)


def rope_cos_sin(S, rotary_dim, theta, dtype, device=None):
    """HF default RoPE: inv_freq = 1/theta^(arange(0,rd,2)/rd) in fp32, freqs = pos*inv_freq in fp32,
    emb = cat(freqs, freqs), cos/sin in fp32, then cast to the model dtype."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(torch.float32) / rotary_dim))
    pos = torch.arange(S, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype=dtype, device=device), emb.sin().to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------------------------
# MoE stage (§2)


class _Router(nn.Module):  # prefix model.layers.{i}.zaya_block.router.
    def __init__(self, E, R, n_routes, has_eda):
        super().__init__()
        self.down_proj = _Linear(R, E, bias=True)
        self.has_eda = has_eda
        if has_eda:
            self.router_states_scale = nn.Parameter(torch.ones(R))
        self.rmsnorm_eda = _Norm(R, ROUTER_NORM_EPS)
        self.router_mlp = nn.ModuleDict(
            {"0": _Linear(R, R, bias=True), "2": _Linear(R, R, bias=True), "4": _Linear(n_routes, R)}
        )
        self.register_buffer("balancing_biases", torch.zeros(n_routes))


class _Expert(nn.Module):
    def __init__(self, E, F2):
        super().__init__()
        self.linear_fc1 = _Linear(F2, E)
        self.linear_fc2 = _Linear(E, F2 // 2)


class _Experts(nn.Module):
    def __init__(self, E, F2, X):
        super().__init__()
        self.local_experts = nn.ModuleList([_Expert(E, F2) for _ in range(X)])


class _MoE(nn.Module):  # prefix model.layers.{i}.zaya_block.
    def __init__(self, E, R, F2, X, has_eda, use_mod):
        super().__init__()
        self.X = X
        self.use_mod = use_mod
        self.n_routes = X + 1 if use_mod else X
        self.router = _Router(E, R, self.n_routes, has_eda)
        self.experts = _Experts(E, F2, X)
        self.F = F2 // 2
        # "dense" (exactly causal; tests) or "sorted" (fast; the benchmark peer): see the methods.
        self.dispatch = "dense"

    def forward(self, x, prev_router_state):
        """x [B,S,E] (normalised stage input). Returns (branch output, post-EDA router state, choice [B*S])."""
        B, S, E = x.shape
        rt = self.router
        # 1-2. down_proj with bias, then EDA with the previous MoE stage's post-EDA pre-norm state
        r = F.linear(x, rt.down_proj.weight, rt.down_proj.bias)
        if rt.has_eda and prev_router_state is not None:
            r = r + prev_router_state * rt.router_states_scale
        state = r  # passed on with gradient (HF: .clone(), not detached)
        # 3-5. RMSNorm (eps 1e-6), MLP with exact GELU, softmax over routes
        h = rt.rmsnorm_eda(r)
        m = rt.router_mlp
        h = F.gelu(F.linear(h, m["0"].weight, m["0"].bias))
        h = F.gelu(F.linear(h, m["2"].weight, m["2"].bias))
        p = torch.softmax(F.linear(h, m["4"].weight), dim=-1).reshape(B * S, self.n_routes)
        self.last_probs = p.detach()  # kept for tests that tune balancing biases for route coverage
        # 6. selection-only balancing; exact ties go to the lowest index (explicit, not left to argmax)
        choice = first_argmax(p.detach().float() + rt.balancing_biases.float())
        # 7. gate = un-biased probability of the chosen route (differentiable)
        gate = p.gather(1, choice[:, None])  # [N,1]

        xf = x.reshape(B * S, E)
        if self.dispatch == "dense":
            out = self._dense_dispatch(xf, choice, gate)
        else:
            out = self._sorted_dispatch(xf, choice, gate)
        return out.view(B, S, E), state, choice

    def _expert(self, e, xe):
        ex = self.experts.local_experts[e]
        y = F.linear(xe, ex.linear_fc1.weight)
        y = F.silu(y[:, :self.F]) * y[:, self.F:]  # rows 0..F-1 gate (SiLU), rows F..2F-1 up
        return F.linear(y, ex.linear_fc2.weight)

    def _dense_dispatch(self, xf, choice, gate):
        """Every expert on every token, then each token keeps its route's row. X times the expert
        work, but each matmul has all B*S rows in token order, so a token's result never depends on
        where other (later) tokens were routed: BLAS rounds a row differently with the row count of
        the call (OpenBLAS's Haswell kernels), and per-route slices would make the model causal only
        up to an ulp."""
        out = xf.clone()  # MoD skip route: identity expert (HF-zaya: p_skip * x)
        for e in range(self.X):
            sel = (choice == e)[:, None]
            out = torch.where(sel, self._expert(e, xf), out)
        return out * gate

    def _sorted_dispatch(self, xf, choice, gate):
        """Sort tokens by route (stable), run each expert on its contiguous slice, put the rows back
        with the inverse permutation: the fast way, for the benchmark peer."""
        order = torch.sort(choice, stable=True).indices
        counts = torch.bincount(choice, minlength=self.n_routes).tolist()
        xs = xf.index_select(0, order)
        pieces = []
        for e, xe in enumerate(torch.split(xs, counts)):
            if xe.shape[0] == 0:
                continue
            # MoD skip route: identity expert (HF-zaya: p_skip * x)
            pieces.append(self._expert(e, xe) if e < self.X else xe)
        ys = torch.cat(pieces, dim=0) * gate.index_select(0, order)
        return ys.index_select(0, torch.argsort(order))


def first_argmax(scores):
    """argmax over the last dim of a [N, K] tensor, breaking exact ties toward the lowest index."""
    K = scores.shape[-1]
    best = scores.max(dim=-1, keepdim=True).values
    idx = torch.arange(K, device=scores.device).expand_as(scores)
    return torch.where(scores == best, idx, torch.full_like(idx, K)).min(dim=-1).values


# ----------------------------------------------------------------------------------------------
# whole model


class _Stage(nn.Module):  # prefix model.layers.{i}.
    def __init__(self, cfg, i):
        super().__init__()
        E = cfg.hidden_size
        self.kind = cfg.kinds[i]
        self.input_norm = _Norm(E, cfg.norm_eps)
        self.res_scale = _ResScale(E, has_residual=(i >= 1))
        if self.kind == "a":
            self.self_attn = _Attention(E, cfg.n_q[i], cfg.n_k[i], cfg.head_dim, cfg.rotary_dim)
        else:
            has_eda = cfg.use_eda and i != cfg.first_moe_stage
            self.zaya_block = _MoE(E, cfg.router_dim[i], cfg.ffn[i], self.kind, has_eda, cfg.use_mod)


class _Backbone(nn.Module):  # prefix model.
    def __init__(self, cfg):
        super().__init__()
        E = cfg.hidden_size
        self.embed_tokens = nn.Module()
        self.embed_tokens.weight = _p(cfg.vocab_size, E)
        self.layers = nn.ModuleList([_Stage(cfg, i) for i in range(len(cfg.kinds))])
        self.res_scale = _ResScale(E, has_residual=True)
        self.final_norm = _Norm(E, cfg.norm_eps)


class ZayaRef(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = _Backbone(cfg)
        if not cfg.tie:
            self.lm_head = _Linear(cfg.vocab_size, cfg.hidden_size)
        self.moe_stage_indices = list(cfg.moe_stage_indices)

    def set_dispatch(self, mode):
        """"dense" (default: exactly causal) or "sorted" (fast) expert dispatch in every MoE stage."""
        if mode not in ("dense", "sorted"):
            raise ValueError(f"dispatch {mode!r}, expected 'dense' or 'sorted'")
        for m in self.modules():
            if isinstance(m, _MoE):
                m.dispatch = mode

    def set_attention(self, mode):
        """"matmul" (default: the explicit causal score matrix) or "sdpa" (PyTorch's fused
        scaled_dot_product_attention, torch >= 2.0; the benchmark peer on a GPU)."""
        if mode not in ("matmul", "sdpa"):
            raise ValueError(f"attention {mode!r}, expected 'matmul' or 'sdpa'")
        if mode == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
            raise ValueError(f"attention 'sdpa' needs torch >= 2.0, this is {torch.__version__}")
        for m in self.modules():
            if isinstance(m, _Attention):
                m.attention = mode

    @property
    def params(self):
        """checkpoint name -> nn.Parameter (trained tensors)."""
        return dict(self.named_parameters())

    @property
    def buffers_by_name(self):
        """checkpoint name -> buffer (the balancing biases)."""
        return dict(self.named_buffers())

    def forward(self, tokens):
        """tokens LongTensor [B,S] -> (logits [B,S,V], loss (scalar), routes: list of LongTensor [B*S])."""
        cfg = self.cfg
        B, S = tokens.shape
        dtype = self.model.embed_tokens.weight.dtype
        cos, sin = rope_cos_sin(S, cfg.rotary_dim, cfg.rope_theta, dtype, tokens.device)
        # True where key position > query position (masked out)
        causal_mask = torch.ones(S, S, dtype=torch.bool, device=tokens.device).triu(1)

        h = F.embedding(tokens, self.model.embed_tokens.weight)  # h_{-1}: no sqrt(E) scaling
        r = None
        router_state = None
        routes = []
        for i, st in enumerate(self.model.layers):
            r = st.res_scale(r, h)  # two-stream residual merge at the start of each stage (§3.1)
            x = st.input_norm(r)
            if st.kind == "a":
                h = st.self_attn(x, cos, sin, causal_mask)
            else:
                h, router_state, choice = st.zaya_block(x, router_state)
                routes.append(choice)
        r = self.model.res_scale(r, h)
        y = self.model.final_norm(r)
        w = self.model.embed_tokens.weight if cfg.tie else self.lm_head.weight
        logits = F.linear(y, w)
        # HF loss: mean CE over the B*(S-1) positions whose label is the next token
        V = logits.shape[-1]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
        return logits, loss, routes


# ----------------------------------------------------------------------------------------------
# loading


def load_config(model_dir, strict=True):
    with open(os.path.join(model_dir, "config.json")) as f:
        return ZayaRefConfig(json.load(f), strict=strict)


def read_model_tensors(model_dir):
    """Every tensor of model_dir: model.safetensors, or the shards that
    model.safetensors.index.json names (HF's layout for models over the shard size, 5 GB in zaya:
    the depth-8 benchmark config's 5.5 GB come as two)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(model_dir, "model.safetensors"))
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        for name, arr in read_safetensors(os.path.join(model_dir, shard)).items():
            if weight_map.get(name) != shard:
                raise ValueError(f"{shard}: {name} is not mapped to this shard by {index}")
            tensors[name] = arr
    missing = [n for n in weight_map if n not in tensors]
    if missing:
        raise ValueError(f"{index} names {missing[0]}, which no shard holds")
    return tensors


def load_model(model_dir, strict=True, dtype=torch.float32):
    """Build ZayaRef from model_dir/config.json and load its weights (read_model_tensors).

    Every tensor the model needs must be in the files with the right shape, and they may hold
    nothing else (except an `lm_head.weight` equal to the tied embedding). strict=True also enforces
    the HF zaya config constraints of spec §4b.
    """
    cfg = load_config(model_dir, strict=strict)
    model = ZayaRef(cfg)
    load_tensors(model, read_model_tensors(model_dir))
    return model.to(dtype)


def load_tensors(model, tensors):
    expected = dict(model.named_parameters())
    expected.update(dict(model.named_buffers()))
    missing = [n for n in expected if n not in tensors]
    if missing:
        raise ValueError(f"checkpoint lacks {len(missing)} tensors, first: {missing[0]}")
    for name, arr in tensors.items():
        if name not in expected:
            if name == "lm_head.weight" and model.cfg.tie:
                emb = tensors["model.embed_tokens.weight"]
                if arr.shape == emb.shape and np.array_equal(arr, emb):
                    continue
                raise ValueError("checkpoint: lm_head.weight differs from the tied model.embed_tokens.weight")
            raise ValueError(f"checkpoint: unexpected tensor {name}")
        t = expected[name]
        if tuple(arr.shape) != tuple(t.shape):
            raise ValueError(f"checkpoint: {name} has shape {tuple(arr.shape)}, expected {tuple(t.shape)}")
        with torch.no_grad():
            t.copy_(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))


def state_as_numpy(model):
    """checkpoint name -> float32 numpy array of every parameter and buffer (for writing a file)."""
    out = {n: p.detach().cpu().float().numpy() for n, p in model.named_parameters()}
    out.update({n: b.detach().cpu().float().numpy() for n, b in model.named_buffers()})
    return out


def missing_routes(choice, n_routes, seq_len=None):
    """Routes in 0..n_routes-1 that `choice` (route indices, token order b*S+s) never takes.

    With seq_len given, the last position of each sequence is ignored: its logits have no label,
    so nothing routed only there reaches the loss and its gradient check would be vacuous (0 vs 0).
    """
    c = choice.reshape(-1).long().cpu()
    if seq_len is not None:
        c = c.view(-1, seq_len)[:, :-1].reshape(-1)
    counts = torch.bincount(c, minlength=n_routes)
    return [e for e in range(n_routes) if counts[e] == 0]
