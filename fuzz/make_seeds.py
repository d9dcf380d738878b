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


def main():
    out = sys.argv[1]
    seeds = {
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
    for name, data in seeds.items():
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
