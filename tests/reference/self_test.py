"""Self-check of the PyTorch ZAYA1 reference (no C++ binary needed).

    /usr/bin/python3 tests/reference/self_test.py

1. safetensors_np round trip (F32, F16, BF16, I32, I64, metadata).
2. A random tiny ZAYA1 (hidden 64, 8 heads -> 4 q / 2 KV heads of dim 8, stages [a,4,a,4,a,4],
   F=16 (ffn_hidden_size 32), R=16, vocab 97), every weight non-trivial, written with the writer
   and loaded back with load_model: all tensors identical.
3. Forward/backward: shapes, finite loss, finite gradients for every parameter, none for the buffers.
4. A second, deliberately naive formulation written straight from the spec's per-token formulas
   (explicit conv sums a_j / z_t, q-k-mean, value shift, per-head attention loops, per-token routing)
   in float64 must agree with the vectorised model (catches layout mistakes in the fast code).
5. torch.autograd.gradcheck (float64) on several small parameters through the whole model.
6. Causality: changing token t leaves logits and route choices at positions < t unchanged.
7. Route-coverage helper on crafted inputs; the random model hits every route of every MoE stage.
Exits non-zero on the first failure.
"""

import json
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import read_safetensors, read_safetensors_with_metadata, write_safetensors  # noqa: E402
from zaya_torch import ZayaRef, ZayaRefConfig, load_model, missing_routes, state_as_numpy  # noqa: E402

torch.set_num_threads(1)  # the machine is shared with a C++ build; everything here is tiny


def check(cond, msg):
    if not cond:
        print(f"self_test: FAIL: {msg}")
        sys.exit(1)
    print(f"  ok  {msg}")


def tiny_config():
    L = ["a", 4, "a", 4, "a", 4]
    return {
        "model_type": "zaya",
        "architectures": ["ZayaForCausalLM"],
        "hidden_size": 64,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "kv_channels": 8,
        "vocab_size": 97,
        "zaya_layers": L,
        "cca_num_q_heads": [4 if k == "a" else 0 for k in L],
        "num_query_groups_list": [2 if k == "a" else 0 for k in L],
        "ffn_hidden_size_list": [0 if k == "a" else 32 for k in L],
        "zaya_mlp_expansion": [0 if k == "a" else 16 for k in L],
        "partial_rotary_factor": 0.5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "norm_epsilon": 1e-5,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "moe_router_topk": 1,
        "zaya_use_eda": True,
        "zaya_use_mod": True,
        "scale_residual_merge": True,
        "add_bias_linear": False,
        "attention_bias": False,
        "gated_linear_unit": True,
        "activation_func": "swiglu",
    }


def randomise(model, gen):
    """Non-trivial values everywhere: scales around 1, biases/temps clearly non-zero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
            if name.endswith(("_scale", "norm.weight", "rmsnorm_eda.weight", "router_states_scale")):
                p.copy_(1.0 + 0.3 * n(*p.shape))
            elif name.endswith(("_bias", ".bias")):
                p.copy_(0.3 * n(*p.shape))
            elif name.endswith("qkv.temp"):
                p.copy_(1.0 + 0.5 * n(*p.shape))
            elif name.endswith("router_mlp.4.weight"):
                p.copy_(2.0 * n(*p.shape) / math.sqrt(p.shape[1]))  # spread router probabilities
            elif name == "model.embed_tokens.weight":
                p.copy_(n(*p.shape))
            else:
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(n(*p.shape) / math.sqrt(fan_in))
        for name, b in model.named_buffers():
            b.copy_(0.05 * torch.randn(*b.shape, generator=gen))


def calibrate_balancing_biases(model, tokens, margin=1e-3, iters=200):
    """Tune each MoE stage's balancing biases (stage by stage, earlier stages fixed) so that every route
    wins at least one token: a missing route gets the smallest bias that makes it win a token whose
    current route has tokens to spare, plus `margin` so no choice sits near a tie."""
    stages = [model.model.layers[i].zaya_block for i in model.moe_stage_indices]
    for k, blk in enumerate(stages):
        b = blk.router.balancing_biases
        for _ in range(iters):
            with torch.no_grad():
                _, _, routes = model(tokens)
            S = tokens.shape[1]
            useful = (torch.arange(routes[k].numel()) % S) != S - 1  # the last position has no label
            counts = torch.bincount(routes[k][useful], minlength=blk.n_routes)
            miss = [e for e in range(blk.n_routes) if counts[e] == 0]
            if not miss:
                break
            e = miss[0]
            p = blk.last_probs.double()
            scores = p + b.double()
            spare = (counts[routes[k]] > 1) & useful  # tokens whose route would keep at least one token
            others = torch.cat([scores[:, :e], scores[:, e + 1:]], dim=1).max(dim=1).values
            need = others - p[:, e]  # bias that makes route e tie on each token
            need[~spare] = float("inf")
            with torch.no_grad():
                b[e] = need.min().item() + margin
        else:
            raise RuntimeError("balancing bias calibration did not converge")


# ----------------------------------------------------------------------------------------------
# naive formulation, straight from the spec's formulas (float64, loops)


def naive_forward(model, tokens):
    cfg = model.cfg
    P = {k: v.detach().double() for k, v in model.named_parameters()}
    P.update({k: v.detach().double() for k, v in model.named_buffers()})
    B, S = tokens.shape
    E, d, eps = cfg.hidden_size, cfg.head_dim, cfg.norm_eps
    rd = cfg.rotary_dim

    def rms(x, w, e):
        return x / torch.sqrt((x * x).mean() + e) * w

    def rope(vec, pos):  # vec [d]; pair (i, i+rd/2) rotated by angle pos*theta^(-2i/rd)
        out = vec.clone()
        for i in range(rd // 2):
            # angle and cos/sin in fp32, as Hugging Face computes them (then used in float64)
            inv = 1.0 / (cfg.rope_theta ** (torch.tensor(2 * i, dtype=torch.float32) / rd))
            ang = torch.tensor(float(pos), dtype=torch.float32) * inv
            c, s = torch.cos(ang).double().item(), torch.sin(ang).double().item()
            a, b = vec[i], vec[i + rd // 2]
            out[i] = a * c - b * s
            out[i + rd // 2] = b * c + a * s
        return out

    logits = torch.zeros(B, S, cfg.vocab_size, dtype=torch.float64)
    routes = [torch.zeros(B * S, dtype=torch.long) for _ in cfg.moe_stage_indices]
    for b in range(B):
        h = [P["model.embed_tokens.weight"][tokens[b, t]] for t in range(S)]
        r = None
        rstate = None
        moe_k = 0
        for i, kind in enumerate(cfg.kinds):
            pre = f"model.layers.{i}."
            hs = [(h[t] + P[pre + "res_scale.hidden_states_bias"]) * P[pre + "res_scale.hidden_states_scale"] for t in range(S)]
            if i == 0:
                r = hs
            else:
                r = [hs[t] + (r[t] + P[pre + "res_scale.residual_bias"]) * P[pre + "res_scale.residual_scale"] for t in range(S)]
            x = [rms(r[t], P[pre + "input_norm.weight"], eps) for t in range(S)]
            if kind == "a":
                a_ = pre + "self_attn.qkv."
                nq, nk = cfg.n_q[i], cfg.n_k[i]
                g = nq // nk
                C = (nq + nk) * d
                q0 = [P[a_ + "linear_q.weight"] @ x[t] for t in range(S)]
                k0 = [P[a_ + "linear_k.weight"] @ x[t] for t in range(S)]
                u = [torch.cat([q0[t], k0[t]]) for t in range(S)]
                ut = lambda t: u[t] if t >= 0 else torch.zeros(C, dtype=torch.float64)  # noqa: E731
                wA, bA = P[a_ + "conv_qk.0.weight"], P[a_ + "conv_qk.0.bias"]
                wB, bB = P[a_ + "conv_qk.1.weight"], P[a_ + "conv_qk.1.bias"]
                # a_j = wA[:,0]*u_{j-2} + wA[:,1]*u_{j-1} + bA, j = 0..S
                A = [wA[:, 0, 0] * ut(j - 2) + wA[:, 0, 1] * ut(j - 1) + bA for j in range(S + 1)]
                z = []
                for t in range(S):
                    zt = bB.clone()
                    for hg in range(nq + nk):
                        sl = slice(hg * d, (hg + 1) * d)
                        zt[sl] = zt[sl] + wB[sl, :, 0] @ A[t][sl] + wB[sl, :, 1] @ A[t + 1][sl]
                    z.append(zt)
                temp = P[a_ + "temp"]
                Q = [[None] * nq for _ in range(S)]
                K = [[None] * nk for _ in range(S)]
                Vv = [[None] * nk for _ in range(S)]
                for t in range(S):
                    xprev = x[t - 1] if t > 0 else torch.zeros(E, dtype=torch.float64)
                    v = torch.cat([P[a_ + "val_proj1.weight"] @ x[t], P[a_ + "val_proj2.weight"] @ xprev])
                    for j in range(nk):
                        kj0 = k0[t][j * d:(j + 1) * d]
                        mean = sum((q0[t][hq * d:(hq + 1) * d] + kj0) / 2 for hq in range(j * g, (j + 1) * g)) / g
                        k1 = z[t][nq * d + j * d: nq * d + (j + 1) * d] + mean
                        K[t][j] = rope(temp[j] * math.sqrt(d) * k1 / k1.norm(), t)
                        Vv[t][j] = v[j * d:(j + 1) * d]
                    for hq in range(nq):
                        j = hq // g
                        q1 = z[t][hq * d:(hq + 1) * d] + (q0[t][hq * d:(hq + 1) * d] + k0[t][j * d:(j + 1) * d]) / 2
                        Q[t][hq] = rope(math.sqrt(d) * q1 / q1.norm(), t)
                out = []
                for t in range(S):
                    heads = []
                    for hq in range(nq):
                        j = hq // g
                        sc = torch.stack([Q[t][hq] @ K[s][j] / math.sqrt(d) for s in range(t + 1)])
                        pr = torch.softmax(sc, 0)
                        heads.append(sum(pr[s] * Vv[s][j] for s in range(t + 1)))
                    out.append(P[pre + "self_attn.o_proj.weight"] @ torch.cat(heads))
                h = out
            else:
                z_ = pre + "zaya_block."
                X = kind
                Fh = cfg.ffn[i] // 2
                first = i == cfg.moe_stage_indices[0]
                new_state = []
                out = []
                for t in range(S):
                    rr = P[z_ + "router.down_proj.weight"] @ x[t] + P[z_ + "router.down_proj.bias"]
                    if not first:
                        rr = rr + P[z_ + "router.router_states_scale"] * rstate[t]
                    new_state.append(rr)
                    hh = rms(rr, P[z_ + "router.rmsnorm_eda.weight"], 1e-6)
                    hh = F.gelu(P[z_ + "router.router_mlp.0.weight"] @ hh + P[z_ + "router.router_mlp.0.bias"])
                    hh = F.gelu(P[z_ + "router.router_mlp.2.weight"] @ hh + P[z_ + "router.router_mlp.2.bias"])
                    p = torch.softmax(P[z_ + "router.router_mlp.4.weight"] @ hh, 0)
                    sc = (p.float() + P[z_ + "router.balancing_biases"].float()).tolist()
                    c = sc.index(max(sc))  # list.index: first (lowest) index of the maximum
                    routes[moe_k][b * S + t] = c
                    if c < X:
                        ex = z_ + f"experts.local_experts.{c}."
                        y = P[ex + "linear_fc1.weight"] @ x[t]
                        y = F.silu(y[:Fh]) * y[Fh:]
                        out.append(p[c] * (P[ex + "linear_fc2.weight"] @ y))
                    else:
                        out.append(p[c] * x[t])
                rstate = new_state
                h = out
                moe_k += 1
        for t in range(S):
            rt = (h[t] + P["model.res_scale.hidden_states_bias"]) * P["model.res_scale.hidden_states_scale"] + (
                r[t] + P["model.res_scale.residual_bias"]
            ) * P["model.res_scale.residual_scale"]
            y = rms(rt, P["model.final_norm.weight"], eps)
            logits[b, t] = P["model.embed_tokens.weight"] @ y
    return logits, routes


# ----------------------------------------------------------------------------------------------


def test_safetensors(tmp):
    print("[1] safetensors_np round trip")
    rng = np.random.default_rng(0)
    t = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal((4,)).astype(np.float16),
        "i32": rng.integers(-5, 5, (2, 3)).astype(np.int32),
        "i64": rng.integers(-5, 5, (7,)).astype(np.int64),
        "bf": np.array([1.0, -2.5, 3.140625, 1.00390625, 0.0], dtype=np.float32),
        "scalar": np.array(1.5, dtype=np.float32),
    }
    path = os.path.join(tmp, "t.safetensors")
    write_safetensors(path, t, metadata={"format": "pt"}, bf16={"bf"})
    back, meta = read_safetensors_with_metadata(path)
    check(meta == {"format": "pt"}, "metadata round trip")
    for k in t:
        if k == "bf":
            # 1.00390625 = 1 + 2^-8 is a tie between bf16 1.0 and 1.0078125; RNE -> 1.0
            exp = np.array([1.0, -2.5, 3.140625, 1.0, 0.0], dtype=np.float32)
            check(back[k].dtype == np.float32 and np.array_equal(back[k], exp), "BF16 -> float32 with RNE rounding")
        else:
            check(back[k].dtype == t[k].dtype and back[k].shape == t[k].shape and np.array_equal(back[k], t[k]),
                  f"{k} round trip")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    check(n % 8 == 0, "header padded to 8 bytes")


def main():
    tmp = tempfile.mkdtemp(prefix="zaya_ref_selftest_")
    test_safetensors(tmp)

    print("[2] random tiny model: write, load back")
    cfgd = tiny_config()
    cfg = ZayaRefConfig(cfgd)
    B, S = 2, 12
    chosen = None
    for seed in range(50):  # retry weights until every route of every MoE stage is taken
        gen = torch.Generator().manual_seed(seed)
        m = ZayaRef(cfg)
        randomise(m, gen)
        toks = torch.randint(0, cfg.vocab_size, (B, S), generator=gen)
        calibrate_balancing_biases(m, toks)
        with torch.no_grad():
            _, _, rts = m(toks)
        if all(not missing_routes(rt, 5, S) for rt in rts):
            chosen = (seed, m, toks)
            break
    check(chosen is not None, "found a random model with full route coverage")
    seed, src, tokens = chosen
    mdir = os.path.join(tmp, "model")
    os.makedirs(mdir)
    with open(os.path.join(mdir, "config.json"), "w") as f:
        json.dump(cfgd, f, indent=1)
    write_safetensors(os.path.join(mdir, "model.safetensors"), state_as_numpy(src))
    names = read_safetensors(os.path.join(mdir, "model.safetensors"))
    check(len(names) == 117, f"117 checkpoint tensors (got {len(names)})")
    check(sum(1 for n in names if n.endswith("balancing_biases")) == 3, "3 balancing_biases buffers")
    check("model.layers.1.zaya_block.router.router_states_scale" not in names
          and "model.layers.3.zaya_block.router.router_states_scale" in names, "first MoE stage has no router_states_scale")
    check("model.layers.0.res_scale.residual_scale" not in names and "model.layers.1.res_scale.residual_scale" in names,
          "stage 0 has no residual scale")
    model = load_model(mdir)
    sd_src = state_as_numpy(src)
    sd = state_as_numpy(model)
    check(sd.keys() == sd_src.keys() and all(np.array_equal(sd[k], sd_src[k]) for k in sd), "weights identical after reload")
    check(len(model.params) == 114 and len(model.buffers_by_name) == 3, "114 parameters + 3 buffers")

    print("[3] forward/backward")
    logits, loss, routes = model(tokens)
    check(tuple(logits.shape) == (B, S, 97), f"logits shape {tuple(logits.shape)}")
    check(len(routes) == 3 and all(tuple(r.shape) == (B * S,) for r in routes), "routes: 3 stages of [B*S]")
    check(model.moe_stage_indices == [1, 3, 5], "moe stage indices 1,3,5")
    check(torch.isfinite(loss).item() and loss.dim() == 0, f"finite scalar loss {loss.item():.6f}")
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, 97), tokens[:, 1:].reshape(-1), reduction="sum") / (B * (S - 1))
    check(abs(ce.item() - loss.item()) < 1e-6, "loss = mean CE over B*(S-1) next-token positions")
    loss.backward()
    bad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    check(not bad, f"every parameter has a finite gradient {bad[:3]}")
    zero = [n for n, p in model.named_parameters() if p.grad.abs().max().item() == 0.0]
    check(not zero, f"no parameter has an all-zero gradient {zero[:3]}")
    check(all(not b.requires_grad for b in model.buffers()), "buffers take no gradient")

    print("[4] naive per-token formulation (float64) vs vectorised model")
    m64 = load_model(mdir, dtype=torch.float64)
    with torch.no_grad():
        lg64, _, rt64 = m64(tokens)
    nlg, nrt = naive_forward(m64, tokens)
    rel = (lg64 - nlg).abs().max().item() / nlg.abs().max().item()
    check(all(torch.equal(a, b) for a, b in zip(rt64, nrt)), "routes identical")
    check(rel < 1e-12, f"logits agree, rel err {rel:.2e}")
    rel32 = (logits.detach().double() - nlg).abs().max().item() / nlg.abs().max().item()
    check(rel32 < 1e-5, f"float32 model within 1e-5 of float64 naive ({rel32:.2e})")

    print("[5] gradcheck (float64)")
    P64 = dict(m64.named_parameters())
    gen = torch.Generator().manual_seed(1)
    proj = torch.randn(B, S, 97, generator=gen, dtype=torch.float64)
    for name in [
        "model.layers.0.self_attn.qkv.temp",
        "model.layers.2.self_attn.qkv.conv_qk.0.weight",
        "model.layers.2.self_attn.qkv.conv_qk.1.bias",
        "model.layers.1.zaya_block.router.down_proj.bias",
        "model.layers.3.zaya_block.router.router_states_scale",
        "model.layers.5.zaya_block.router.router_mlp.4.weight",
        "model.layers.4.res_scale.hidden_states_scale",
        "model.res_scale.residual_bias",
        "model.final_norm.weight",
    ]:
        base = P64[name].detach().clone()

        def f(w, name=name):
            lg, ls, _ = functional_call(m64, {name: w}, (tokens,))
            return ls + (lg * proj).sum() * 1e-2

        w = base.clone().requires_grad_(True)
        ok = torch.autograd.gradcheck(f, (w,), eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
        check(ok, f"gradcheck {name} {tuple(base.shape)}")

    print("[6] causality")
    with torch.no_grad():
        base_lg, _, base_rt = model(tokens)
        for t in [1, 5, S - 1]:
            tk = tokens.clone()
            tk[:, t] = (tk[:, t] + 7) % 97
            lg, _, rt = model(tk)
            before = (lg[:, :t] - base_lg[:, :t]).abs().max().item()
            at = (lg[:, t] - base_lg[:, t]).abs().max().item()
            same_routes = all(torch.equal(a.view(B, S)[:, :t], c.view(B, S)[:, :t]) for a, c in zip(rt, base_rt))
            check(before == 0.0 and at > 0 and same_routes, f"token {t}: positions < {t} unchanged, position {t} changes")

    print("[7] route coverage helper")
    check(missing_routes(torch.tensor([0, 1, 1, 3]), 5) == [2, 4], "missing_routes finds 2 and 4")
    check(missing_routes(torch.tensor([4, 3, 2, 1, 0]), 5) == [], "missing_routes empty on full coverage")
    from zaya_torch import first_argmax
    check(first_argmax(torch.tensor([[0.2, 0.5, 0.5, 0.1], [1.0, 1.0, 1.0, 1.0]])).tolist() == [1, 0],
          "exact ties go to the lowest index")
    check(missing_routes(torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 0]), 5, seq_len=5) == [4],
          "missing_routes ignores the unlabelled last position of each sequence")
    check(all(not missing_routes(r, 5, S) for r in routes), f"all 5 routes of all MoE stages taken (weights seed {seed})")

    print("self_test: PASS")


if __name__ == "__main__":
    main()
