#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets into tests/fuzz/corpus/<target>/.

Small valid inputs of every format (a few KB each), so the fuzzer starts from files that pass
the header checks and reaches the loaders' deeper code. The text formats (experiments,
traces) are cut from the repository's experiments and the shared traces; the binary ones (GGUF,
safetensors, llama2.c) are built here with the same tiny shapes as the unit tests' fixtures.
Usage: tests/fuzz/make_seeds.py [shared_data_dir]   (default ../shared from the repository)
"""
import json
import os
import struct
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(root), "shared")
corpus = os.path.join(root, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def values(n, salt):  # deterministic small floats
    return [((i * 13 + salt * 7) % 64 - 32) / 16.0 for i in range(n)]


# ---- experiments: the repository's small files, and --set overrides after NUL bytes ----------
for name in ["quickstart.toml", "sarathi.toml", "speculative.toml", "quantization.toml", "priority.toml",
             "timeouts.toml", "sim_continuous_20k.toml", "prefix_caching.toml"]:
    with open(os.path.join(root, "experiments", name)) as f:
        put("experiment", name, f.read())
put("experiment", "preset_with_sets.toml",
    '[model]\npreset = "stories260k"\n[workload]\nnum_requests = 2\nprompt_len = 4\noutput_len = 2\n'
    '[baseline]\nattention = { name = "flash", tile = 16 }\n'
    '\0experiment.repeats=2\0sweep."kv.block_size"=[8,16]\0variant.0.attention=naive')

# ---- traces: selector byte (reader % 7, 0x80 = .jsonl, 0x40 = BurstGPT model filter) + file ---
def head(path, lines):
    with open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(lines))

traces = os.path.join(shared, "traces")
put("trace", "azure", b"\x02" + head(os.path.join(traces, "AzureLLMInferenceTrace_conv.csv"), 6))
put("trace", "azure_auto", b"\x00" + head(os.path.join(traces, "AzureLLMInferenceTrace_conv.csv"), 4))
put("trace", "mooncake", b"\x83" + head(os.path.join(traces, "conversation_trace.jsonl"), 4))
put("trace", "lengths", b"\x06" + head(os.path.join(traces, "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"), 6))
put("trace", "canonical_csv", b"\x01arrival_s,prompt_tokens,output_tokens,priority,slo_class\n0,12,4,0,0\n0.5,7,3,1,1\n")
put("trace", "canonical_jsonl",
    b'\x81{"arrival_s": 0, "prompt_tokens": 12, "output_tokens": 4}\n{"arrival_s": 1.5, "prompt_tokens": 3, "output_tokens": 9}\n')
put("trace", "vidur", b"\x04arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.25,40,8\n")
put("trace", "burstgpt",
    b"\x45Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    b"5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,250,1337,API log\n")

# ---- GGUF: a one-layer llama with a byte-level BPE vocabulary, and one with a SentencePiece one --
def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, (typ, val) in kvs:
        out += gguf_str(key) + struct.pack("<I", typ)
        if typ == 4: out += struct.pack("<I", val)
        elif typ == 6: out += struct.pack("<f", val)
        elif typ == 7: out += struct.pack("<B", val)
        elif typ == 8: out += gguf_str(val)
        elif typ == 9:
            etyp, items = val
            out += struct.pack("<IQ", etyp, len(items))
            for it in items:
                out += gguf_str(it) if etyp == 8 else struct.pack("<f" if etyp == 6 else "<i", it)
    data, offset = b"", 0
    for name, dims, typ, payload in tensors:
        out += gguf_str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, offset)
        pad = (-len(payload)) % alignment
        data += payload + b"\0" * pad
        offset += len(payload) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + data


def q8_0(n, salt):  # blocks of 32: fp16 scale 0.25 then 32 int8
    out = b""
    for b in range(n // 32):
        out += struct.pack("<H", 0x3400) + bytes(((i * 37 + salt) % 255 - 127) & 0xFF for i in range(32))
    return out


def f32(n, salt):
    return struct.pack("<%df" % n, *values(n, salt))


def tiny_gguf(vocab_kvs):
    kvs = [("general.architecture", (8, "llama")), ("llama.embedding_length", (4, 32)),
           ("llama.feed_forward_length", (4, 64)), ("llama.block_count", (4, 1)),
           ("llama.attention.head_count", (4, 4)), ("llama.attention.head_count_kv", (4, 2)),
           ("llama.context_length", (4, 128)), ("llama.rope.freq_base", (6, 5000.0)),
           ("llama.attention.layer_norm_rms_epsilon", (6, 1e-6))] + vocab_kvs
    t = [("token_embd.weight", [32, 32], 8, q8_0(32 * 32, 0)),
         ("blk.0.attn_norm.weight", [32], 0, f32(32, 1)),
         ("blk.0.attn_q.weight", [32, 32], 8, q8_0(32 * 32, 2)),
         ("blk.0.attn_k.weight", [32, 16], 0, f32(32 * 16, 3)),
         ("blk.0.attn_v.weight", [32, 16], 8, q8_0(32 * 16, 4)),
         ("blk.0.attn_output.weight", [32, 32], 8, q8_0(32 * 32, 5)),
         ("blk.0.ffn_norm.weight", [32], 0, f32(32, 6)),
         ("blk.0.ffn_gate.weight", [32, 64], 8, q8_0(32 * 64, 7)),
         ("blk.0.ffn_down.weight", [64, 32], 8, q8_0(64 * 32, 8)),
         ("blk.0.ffn_up.weight", [32, 64], 8, q8_0(32 * 64, 9)),
         ("output_norm.weight", [32], 0, f32(32, 10))]
    return gguf(kvs, t)


bpe_tokens = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u0120", "ab", "abc", "<s>", "</s>", "\u0120a"]
put("gguf", "tiny_bpe.gguf", tiny_gguf([
    ("tokenizer.ggml.model", (8, "gpt2")), ("tokenizer.ggml.pre", (8, "gpt-2")),
    ("tokenizer.ggml.tokens", (9, (8, bpe_tokens))),
    ("tokenizer.ggml.token_type", (9, (5, [3 if i in (29, 30) else 1 for i in range(32)]))),
    ("tokenizer.ggml.merges", (9, (8, ["a b", "ab c", "\u0120 a"]))),
    ("tokenizer.ggml.bos_token_id", (4, 29)), ("tokenizer.ggml.eos_token_id", (4, 30))]))
spm_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(10)] + \
             ["\u2581", "a", "b", "c", "ab", "\u2581a", "\u2581ab", "e", "t", "h", "th", "the", "\u2581the",
              "o", "n", "on", "\u2581on", "ce", "\u2581once"]
put("gguf", "tiny_spm.gguf", tiny_gguf([
    ("tokenizer.ggml.model", (8, "llama")), ("tokenizer.ggml.tokens", (9, (8, spm_tokens))),
    ("tokenizer.ggml.scores", (9, (6, [0.0] * 13 + [-float(i) for i in range(19)]))),
    ("tokenizer.ggml.token_type", (9, (5, [2, 3, 3] + [6] * 10 + [1] * 19))),
    ("tokenizer.ggml.bos_token_id", (4, 1)), ("tokenizer.ggml.eos_token_id", (4, 2)),
    ("tokenizer.ggml.add_bos_token", (7, 1))]))

# ---- Hugging Face: config.json, model.safetensors, tokenizer.json joined by the marker ----------
SPLIT = b"#@#FILE#@#"


def safetensors(tensors, dtype):
    header, data = {}, b""
    for name, shape, salt in tensors:
        n = 1
        for s in shape: n *= s
        vals = values(n, salt)
        if dtype == "F32": payload = struct.pack("<%df" % n, *vals)
        else:  # BF16: the high half of each fp32
            payload = b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def tiny_hf(model_type, dtype):
    d, h, kv, voc = 16, 24, 8, 40
    names = [("model.embed_tokens.weight", [voc, d]), ("model.norm.weight", [d])]
    p = "model.layers.0."
    names += [(p + "input_layernorm.weight", [d]), (p + "self_attn.q_proj.weight", [d, d]),
              (p + "self_attn.k_proj.weight", [kv, d]), (p + "self_attn.v_proj.weight", [kv, d]),
              (p + "self_attn.o_proj.weight", [d, d]), (p + "post_attention_layernorm.weight", [d]),
              (p + "mlp.gate_proj.weight", [h, d]), (p + "mlp.up_proj.weight", [h, d]),
              (p + "mlp.down_proj.weight", [d, h])]
    if model_type == "qwen2":
        names += [(p + "self_attn.q_proj.bias", [d]), (p + "self_attn.k_proj.bias", [kv]),
                  (p + "self_attn.v_proj.bias", [kv])]
    config = {"architectures": ["X"], "model_type": model_type, "hidden_size": d, "intermediate_size": h,
              "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": voc,
              "max_position_embeddings": 64, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
              "tie_word_embeddings": True, "bos_token_id": 3, "eos_token_id": [4, 5], "hidden_act": "silu",
              "torch_dtype": "float32"}
    vocab = {chr(ord("a") + i): i for i in range(26)}
    vocab.update({"\u0120": 26, "ab": 27, "abc": 28, "\u0120a": 29})
    vocab.update({str(i): 30 + i for i in range(9)})
    tokenizer = {"version": "1.0", "added_tokens": [{"id": 39, "content": "<s>", "special": True}],
                 "normalizer": None,
                 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Digits", "individual_digits": True},
                     {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab,
                           "merges": ["a b", ["ab", "c"], "\u0120 a"]}}
    tensors = [(n, s, i + 1) for i, (n, s) in enumerate(names)]
    return (json.dumps(config).encode() + SPLIT + safetensors(tensors, dtype) + SPLIT +
            json.dumps(tokenizer).encode())


put("hf", "tiny_llama_f32", tiny_hf("llama", "F32"))
put("hf", "tiny_qwen2_bf16", tiny_hf("qwen2", "BF16"))

# ---- llama2.c: tokenizer.bin (first 64 tokens of stories260K's) and a tiny checkpoint -----------
with open(os.path.join(shared, "models", "stories260K", "tok512.bin"), "rb") as f:
    tok = f.read()
at, n = 4, 0
while n < 64:
    length = struct.unpack_from("<i", tok, at + 4)[0]
    at += 8 + length
    n += 1
put("llama2c", "tokenizer_64", bytes([(64 - 1) << 1]) + tok[:at])
dim, hidden, layers, heads, kv_heads, vocab, seq = 16, 24, 1, 4, 2, 32, 8
kv = dim * kv_heads // heads
floats = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) + dim
floats += 2 * seq * (dim // heads) // 2
put("llama2c", "checkpoint_tiny", b"\x01" + struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq) +
    struct.pack("<%df" % floats, *values(floats, 3)))

# ---- tokenize: option byte (tokenizer index, 0x80 add_bos, 0x40 add_eos, 0x20 parse_special) + text
put("tokenize", "plain", b"\x00Once upon a time, there was a little girl named Lily.")
put("tokenize", "bos_special", b"\xa1<s>Hello <|endoftext|> world</s>  \t\n\n  tabs")
put("tokenize", "unicode", "\x02caf\u00e9 \u2014 \u65e5\u672c\u8a9e \U0001F600 12345 x\u0301".encode())
put("tokenize", "invalid_utf8", b"\x23\xff\xfe\xc3(\xe2\x82 \xf0\x90\x80 ok")
put("tokenize", "repeats", b"\x01" + b"a" * 300 + b" " * 200 + b"ab" * 100)
