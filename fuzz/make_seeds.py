#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers whose inputs are text or JSON (nothing binary is
committed): fuzz/make_seeds.py SEEDS_DIR. hf_fuzzer's seed is a whole tiny Hugging Face
directory (a 1-layer Llama of width 8) in kPartSeparator-joined form."""
import json
import os
import struct
import sys

SEP = b"\n--8<--\n"


def safetensors(tensors):
    header, blobs, offset = {}, [], 0
    for name, shape in tensors:
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        blobs.append(struct.pack("<%df" % (n // 4), *[(i % 7 - 3) / 10 for i in range(n // 4)]))
        offset += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def hf_seed():
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "num_hidden_layers": 1,
              "intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2,
              "max_position_embeddings": 64, "vocab_size": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "bos_token_id": 5, "eos_token_id": 5, "tie_word_embeddings": False, "torch_dtype": "float32"}
    vocab = {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "c": 4, "<|endoftext|>": 5, "d": 6, "e": 7}
    merges = "#version: 0.2\na b\n"
    tokenizer_config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False}
    layer = "model.layers.0."
    tensors = [("model.embed_tokens.weight", [8, 8]), (layer + "input_layernorm.weight", [8]),
               (layer + "self_attn.q_proj.weight", [8, 8]), (layer + "self_attn.k_proj.weight", [8, 8]),
               (layer + "self_attn.v_proj.weight", [8, 8]), (layer + "self_attn.o_proj.weight", [8, 8]),
               (layer + "post_attention_layernorm.weight", [8]), (layer + "mlp.gate_proj.weight", [16, 8]),
               (layer + "mlp.up_proj.weight", [16, 8]), (layer + "mlp.down_proj.weight", [8, 16]),
               ("model.norm.weight", [8]), ("lm_head.weight", [8, 8])]
    parts = [json.dumps(config).encode(), b"", json.dumps(vocab).encode(), merges.encode(),
             json.dumps(tokenizer_config).encode(), safetensors(tensors)]
    return SEP.join(parts)


def gguf(metadata, tensors):
    """A GGUF v3 file: metadata [(key, value)] (str -> string, int -> uint32, float -> float32,
    list of str -> string array), tensors [(name, ggml type, dims, data bytes)]."""
    def string(v):
        b = v.encode()
        return struct.pack("<Q", len(b)) + b
    out = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(metadata))
    for key, value in metadata:
        out += string(key)
        if isinstance(value, str):
            out += struct.pack("<I", 8) + string(value)
        elif isinstance(value, float):
            out += struct.pack("<If", 6, value)
        elif isinstance(value, list):
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(string(v) for v in value)
        else:
            out += struct.pack("<II", 4, value)
    offset, blobs = 0, b""
    for name, ggml_type, dims, data in tensors:
        out += string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        pad = -len(data) % 32
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    out += b"\0" * (-len(out) % 32)
    return out + blobs


# Block types: (ggml id, weights per block, bytes per block, byte offsets of its f16 scales).
BLOCK_TYPES = {"q4_1": (3, 32, 20, [0, 2]), "q5_0": (6, 32, 22, [0]), "q5_1": (7, 32, 24, [0, 2]),
               "q2_k": (10, 256, 84, [80, 82]), "q3_k": (11, 256, 110, [108]), "q4_k": (12, 256, 144, [0, 2]),
               "q5_k": (13, 256, 176, [0, 2]), "q6_k": (14, 256, 210, [208]), "iq4_nl": (20, 32, 18, [0]),
               "iq4_xs": (23, 256, 136, [0]), "mxfp4": (39, 32, 17, [])}  # mxfp4's scale is a byte (E8M0)


def blocks(kind, n_weights):
    ggml_type, size, nbytes, scales = BLOCK_TYPES[kind]
    data = bytearray((i * 37 + 11) % 256 for i in range(n_weights // size * nbytes))
    for b in range(n_weights // size):
        for off in scales:
            data[b * nbytes + off:b * nbytes + off + 2] = struct.pack("<e", 0.01)
    return bytes(data)


def f32(n, value=1.0):
    return struct.pack("<%df" % n, *([value] * n))


def model_seed(arch, width, n_ff, kind, head_dim=None):
    """A one-layer model of `arch` whose matrices are `kind` (a block type, or "f32"), two heads."""
    heads, vocab = 2, 4
    hd = head_dim or width // heads
    md = [("general.architecture", arch), (arch + ".context_length", 64), (arch + ".embedding_length", width),
          (arch + ".block_count", 1), (arch + ".feed_forward_length", n_ff), (arch + ".attention.head_count", heads),
          ("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]),
          ("tokenizer.ggml.merges", ["a b"])]
    if head_dim:
        md += [(arch + ".attention.key_length", hd), (arch + ".attention.value_length", hd)]

    def matrix(name, cols, rows):
        if kind == "f32":
            return (name, 0, [cols, rows], f32(cols * rows, 0.01))
        return (name, BLOCK_TYPES[kind][0], [cols, rows], blocks(kind, cols * rows))
    t = [matrix("token_embd.weight", width, vocab), ("output_norm.weight", 0, [width], f32(width))]
    t += [("blk.0.attn_norm.weight", 0, [width], f32(width)), ("blk.0.ffn_norm.weight", 0, [width], f32(width))]
    t += [matrix("blk.0.attn_q.weight", width, heads * hd), matrix("blk.0.attn_k.weight", width, heads * hd),
          matrix("blk.0.attn_v.weight", width, heads * hd), matrix("blk.0.attn_output.weight", heads * hd, width),
          matrix("blk.0.ffn_gate.weight", width, n_ff), matrix("blk.0.ffn_up.weight", width, n_ff),
          matrix("blk.0.ffn_down.weight", n_ff, width)]
    if arch == "qwen3":
        t += [("blk.0.attn_q_norm.weight", 0, [hd], f32(hd)), ("blk.0.attn_k_norm.weight", 0, [hd], f32(hd))]
    return gguf(md, t)


def qwen35_seed():
    """A two-layer Qwen3.5: a gated DeltaNet layer (2 key and 2 value heads of 4, a 4-wide
    convolution) then a gated attention layer (2 heads of 8, 1 KV head, 4 rotated dims)."""
    arch, width, n_ff, vocab, hd, s, hk, hv, k = "qwen35", 16, 16, 4, 8, 4, 2, 2, 4
    ch = (2 * hk + hv) * s
    md = [("general.architecture", arch), (arch + ".context_length", 64), (arch + ".embedding_length", width),
          (arch + ".block_count", 2), (arch + ".feed_forward_length", n_ff), (arch + ".attention.head_count", 2),
          (arch + ".attention.head_count_kv", 1), (arch + ".attention.key_length", hd),
          (arch + ".attention.value_length", hd), (arch + ".rope.dimension_count", 4),
          (arch + ".full_attention_interval", 2), (arch + ".ssm.conv_kernel", k), (arch + ".ssm.group_count", hk),
          (arch + ".ssm.time_step_rank", hv), (arch + ".ssm.state_size", s), (arch + ".ssm.inner_size", hv * s),
          ("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]),
          ("tokenizer.ggml.merges", ["a b"])]

    def m(name, cols, rows):
        return (name, 0, [cols, rows], f32(cols * rows, 0.01))

    def v(name, n, value=1.0):
        return (name, 0, [n], f32(n, value))
    t = [m("token_embd.weight", width, vocab), v("output_norm.weight", width)]
    for layer in (0, 1):
        b = "blk.%d." % layer
        t += [v(b + "attn_norm.weight", width), v(b + "post_attention_norm.weight", width),
              m(b + "ffn_gate.weight", width, n_ff), m(b + "ffn_up.weight", width, n_ff), m(b + "ffn_down.weight", n_ff, width)]
    t += [m("blk.0.attn_qkv.weight", width, ch), m("blk.0.attn_gate.weight", width, hv * s),
          m("blk.0.ssm_beta.weight", width, hv), m("blk.0.ssm_alpha.weight", width, hv), m("blk.0.ssm_out.weight", hv * s, width),
          m("blk.0.ssm_conv1d.weight", k, ch), v("blk.0.ssm_dt.bias", hv, 0.5), v("blk.0.ssm_a", hv, -0.2),
          v("blk.0.ssm_norm.weight", s)]
    t += [m("blk.1.attn_q.weight", width, 2 * 2 * hd), m("blk.1.attn_k.weight", width, hd), m("blk.1.attn_v.weight", width, hd),
          m("blk.1.attn_output.weight", 2 * hd, width), v("blk.1.attn_q_norm.weight", hd), v("blk.1.attn_k_norm.weight", hd)]
    return gguf(md, t)


def f32_matrix(name, *dims):
    """An f32 tensor of dims (GGUF order) whose values are all 0.01."""
    n = 1
    for d in dims:
        n *= d
    return (name, 0, list(dims), f32(n, 0.01))


def f32_vector(name, n):
    """An f32 vector of n ones."""
    return (name, 0, [n], f32(n, 1.0))


def qwen3moe_seed():
    """A one-layer Qwen3-MoE: attention of 2 heads of 8 (1 KV head), then 4 experts of 8, 2 per
    token (the router and the experts' 3-D tensors)."""
    arch, width, vocab, hd, n_exp, ff = "qwen3moe", 16, 4, 8, 4, 8
    md = [("general.architecture", arch), (arch + ".context_length", 64), (arch + ".embedding_length", width),
          (arch + ".block_count", 1), (arch + ".feed_forward_length", 32), (arch + ".attention.head_count", 2),
          (arch + ".attention.head_count_kv", 1), (arch + ".attention.key_length", hd),
          (arch + ".attention.value_length", hd), (arch + ".expert_count", n_exp), (arch + ".expert_used_count", 2),
          (arch + ".expert_feed_forward_length", ff),
          ("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]),
          ("tokenizer.ggml.merges", ["a b"])]

    t = [f32_matrix("token_embd.weight", width, vocab), f32_vector("output_norm.weight", width), f32_vector("blk.0.attn_norm.weight", width),
         f32_vector("blk.0.ffn_norm.weight", width), f32_matrix("blk.0.attn_q.weight", width, 2 * hd), f32_matrix("blk.0.attn_k.weight", width, hd),
         f32_matrix("blk.0.attn_v.weight", width, hd), f32_matrix("blk.0.attn_output.weight", 2 * hd, width),
         f32_vector("blk.0.attn_q_norm.weight", hd), f32_vector("blk.0.attn_k_norm.weight", hd), f32_matrix("blk.0.ffn_gate_inp.weight", width, n_exp),
         f32_matrix("blk.0.ffn_gate_exps.weight", width, ff, n_exp), f32_matrix("blk.0.ffn_up_exps.weight", width, ff, n_exp),
         f32_matrix("blk.0.ffn_down_exps.weight", ff, width, n_exp)]
    return gguf(md, t)


def gptoss_seed():
    """A one-layer gpt-oss: 2 heads of 8 (1 KV head) with q/k/v and output biases and sinks, a
    sliding window, then 4 experts of 8, 2 per token, with the router's and experts' biases."""
    arch, width, vocab, hd, n_exp, ff = "gpt-oss", 16, 4, 8, 4, 8
    md = [("general.architecture", arch), (arch + ".context_length", 64), (arch + ".embedding_length", width),
          (arch + ".block_count", 1), (arch + ".feed_forward_length", 32), (arch + ".attention.head_count", 2),
          (arch + ".attention.head_count_kv", 1), (arch + ".attention.key_length", hd),
          (arch + ".attention.value_length", hd), (arch + ".attention.sliding_window", 8),
          (arch + ".expert_count", n_exp), (arch + ".expert_used_count", 2), (arch + ".expert_feed_forward_length", ff),
          ("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.pre", "gpt-4o"), ("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]),
          ("tokenizer.ggml.merges", ["a b"])]

    t = [f32_matrix("token_embd.weight", width, vocab), f32_vector("output_norm.weight", width), f32_matrix("output.weight", width, vocab),
         f32_vector("blk.0.attn_norm.weight", width), f32_vector("blk.0.post_attention_norm.weight", width),
         f32_matrix("blk.0.attn_q.weight", width, 2 * hd), f32_matrix("blk.0.attn_k.weight", width, hd),
         f32_matrix("blk.0.attn_v.weight", width, hd), f32_vector("blk.0.attn_q.bias", 2 * hd), f32_vector("blk.0.attn_k.bias", hd),
         f32_vector("blk.0.attn_v.bias", hd), f32_matrix("blk.0.attn_output.weight", 2 * hd, width), f32_vector("blk.0.attn_output.bias", width),
         f32_vector("blk.0.attn_sinks.weight", 2), f32_matrix("blk.0.ffn_gate_inp.weight", width, n_exp), f32_vector("blk.0.ffn_gate_inp.bias", n_exp),
         f32_matrix("blk.0.ffn_gate_exps.weight", width, ff, n_exp), f32_matrix("blk.0.ffn_up_exps.weight", width, ff, n_exp),
         f32_matrix("blk.0.ffn_down_exps.weight", ff, width, n_exp), f32_matrix("blk.0.ffn_gate_exps.bias", ff, n_exp),
         f32_matrix("blk.0.ffn_up_exps.bias", ff, n_exp), f32_matrix("blk.0.ffn_down_exps.bias", width, n_exp)]
    return gguf(md, t)


def main():
    out = sys.argv[1]
    seeds = {
        # A whole one-layer model in q4_k (rows of one super-block), one in q4_1 (32-weight blocks),
        # qwen3 with heads wider than width / heads; one tensor of each other block type.
        "gguf_fuzzer/llama-q4_k": model_seed("llama", 256, 256, "q4_k"),
        "gguf_fuzzer/llama-q4_1": model_seed("llama", 32, 32, "q4_1"),
        "gguf_fuzzer/qwen3-f32": model_seed("qwen3", 8, 16, "f32", head_dim=8),
        "gguf_fuzzer/qwen35-f32": qwen35_seed(),
        "gguf_fuzzer/qwen3moe-f32": qwen3moe_seed(),
        "gguf_fuzzer/gptoss-f32": gptoss_seed(),
        "hf_fuzzer/tiny-llama": hf_seed(),
        "chat_template_fuzzer/llama3": SEP.join([
            b"\x02{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
            b"<|end_header_id|>\n\n{{ message['content'] }}<|eot_id|>{% endfor %}",
            b"system", b"Be brief.", b"user", b"Hello", b"assistant", b"Hi!", b"user", b"More"]),
        "chat_template_fuzzer/chatml": SEP.join([b"\x01{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                                                b"{{ m['content'] }}<|im_end|>\n{% endfor %}", b"user", b"Hi"]),
        "chat_template_fuzzer/llama2": SEP.join([b"\x00{{ bos_token }}[INST] <<SYS>>\n{{ system }}\n<</SYS>>\n\n"
                                                b"{{ content }} [/INST]", b"system", b"S", b"user", b"U"]),
        "session_config_fuzzer/full": (b'model_path: "m.gguf"\nbackend: "cpu"\nthreads: 2\nmax_batch_tokens: 256\n'
                                       b'max_running_requests: 8\nkv_cache_tokens: 4096\nkv_dtype: "f16"\n'
                                       b'prefix_caching: false\ncontext_length: 512\n'
                                       b'determinism { mode: SELECTIVE window: 16 verify_group: 4 default_seed: 7 '
                                       b'mismatch_injection: 0.5 fast_path_noise: 0.01 decode_path: AUTO }\n'),
        # Submit, read, wait, receipt; a deterministic one with logprobs and a stop; a cancel.
        "c_api_fuzzer/run": bytes([0, 14, 0, 15, 6, 1, 0, 19, 40, 0, 20, 3, 2, 2, 2, 0, 23, 5, 1,
                                   0, 8, 1, 0, 10, 1, 0, 9, 1, 46, 0, 14, 1, 16, 4, 1, 17, 0, 18]),
    }
    for kind, (ggml_type, size, _, _) in BLOCK_TYPES.items():
        seeds["gguf_fuzzer/tensor-" + kind] = gguf([("general.architecture", "llama")],
                                                   [("t", ggml_type, [size, 2], blocks(kind, 2 * size))])
    for name, data in seeds.items():
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
