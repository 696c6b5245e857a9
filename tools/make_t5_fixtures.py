#!/usr/bin/python3
"""Generate the umT5 text-encoder test fixtures under tests/data/t5/ with the owners' own code and tools.

Run from the repository root, then commit the output:

    /usr/bin/python3 tools/make_t5_fixtures.py [--wan-repo DIR]

Needs Debian's python3-torch (/usr/bin/python3) and the `sentencepiece` package's spm_train / spm_encode.
--wan-repo names a git repository of Wan-Video/Wan2.1 (a bare mirror is fine; default: the mirror under
/work/.mirror); the script reads wan/modules/t5.py at its HEAD, writes it into a temporary directory and imports it
from there (its tokenizer module's imports, ftfy / regex / transformers, are stood in for by empty modules: only
T5Encoder runs). Nothing of Wan's is copied into this repository; the C++ tests read the committed files and never
need torch, Python or the sentencepiece tools.

Outputs (tests/data/t5/):
  tiny.model         a unigram sentencepiece model, at most 384 pieces (--hard_vocab_limit=false), pad 0 / EOS 1 / unk 2, no BOS, trained by spm_train
                     on corpus lines drawn from a fixed word list (ASCII only: accents, CJK and emoji are unknown).
  tiny_bf.model      the same training with --byte_fallback (256 <0xXX> pieces among its pieces) and the identity
                     normaliser (nmt_nfkc's table is 237 KB; the byte-fallback rule does not depend on it).
  tiny_config.json   the encoder config (docs/text_encoder.md keys): vocab 400, dim 64, dim_attn 48 (!= dim), dim_ffn 80,
                     4 heads of 12, 3 layers, 32 buckets, per-layer tables, text_len 160 (distances past 128 occur).
  tiny_t5.pth        torch.save(T5Encoder(that config).state_dict()) in bfloat16, as Wan ships
                     models_t5_umt5-xxl-enc-bf16.pth. Seeded weights: q, k N(0,1)/sqrt(dim)/head_dim^0.25, v, gate,
                     fc1 N(0,1)/sqrt(dim), o N(0,1)/sqrt(dim_attn), fc2 N(0,1)/sqrt(dim_ffn), gains 1 + 0.1 N(0,1),
                     embeddings and position tables N(0,1).
  tiny_t5_hf.safetensors  the same bfloat16 tensors under Hugging Face UMT5EncoderModel names with a
                     "text_encoder." prefix, the tied alias encoder.embed_tokens.weight beside shared.weight, and one
                     decoder tensor (which a loader must ignore), names sorted as safetensors writers sort them.
  prompts.txt        the prompts, UTF-8, one per line.
  expected.safetensors  for prompt K (file order):
                       ids.K       int64 [L_K]  spm_encode --output_format=id of Wan's cleaned prompt (html.unescape
                                                twice, strip, runs of Unicode White_Space -> ' ', strip) with
                                                tiny.model, the first text_len - 1 kept, then EOS (1)
                       context.K   f32 [L_K, 64]  Wan's T5Encoder in float64 on the padded batch of all prompts
                                                (mask 0 on padding, text_len columns), rows 0 .. L_K - 1
                       bf_raw.K    int64  spm_encode's ids with tiny_bf.model (byte pieces where characters have no
                                                piece), untruncated, no EOS
                       special.K   int64  the ids of special_prompts.txt's prompt K under Wan's special-token
                                                rule (special_ids below), spm_encode per stretch
  special_prompts.txt  prompts with "</s>", "<pad>", "<unk>" typed in them.
  spm_cases.json     [[raw text, spm_encode ids with tiny.model, with tiny_bf.model], ...]: the normaliser and the
                     segmentation on their own (no cleaning, no EOS).
  clean.json         [[text, Wan's cleaning of it], ...] for strings that exercise html.unescape and the whitespace
                     rules (Python's html module and the White_Space set of the `regex` package's \\s).
  expected.json      the commit of Wan's t5.py, the config, the tools' versions, the largest |context| per prompt.

Deterministic: seeded generators, one thread; spm_train with one thread and no shuffling.
"""
import argparse
import html
import io
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import types
from collections import OrderedDict

import torch

CONFIG = dict(vocab=400, dim=64, dim_attn=48, dim_ffn=80, num_heads=4, num_layers=3, num_buckets=32, shared_pos=False,
              text_len=160)
OUT = "tests/data/t5"

WORDS = ("a the of and in on with under over red blue green small large old young cat dog bird horse fish tree "
         "river mountain city street car boat train plane man woman child camera slowly quickly walks runs flies "
         "swims jumps looks turns light dark night day sun rain snow wind water fire stone glass wooden metal "
         "golden silver bright soft close wide shot view scene video frame moving standing sitting towards away "
         "from behind front left right top bottom cinematic realistic detailed beautiful quiet loud").split()

# Unicode White_Space: what Wan's whitespace_clean replaces (the `regex` package's \s); str.strip also takes 1C-1F.
WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def wan_clean(text):
    """Wan's HuggingfaceTokenizer._clean(clean='whitespace') without its first step, ftfy.fix_text."""
    text = html.unescape(html.unescape(text)).strip()
    return re.sub("[" + re.escape(WS) + "]+", " ", text).strip()


PROMPTS = [
    "A red cat walks slowly on the wooden table, cinematic close shot",
    "  two   dogs\trun  towards the river\u3000at night  ",
    "",
    "caf\u00e9 \U0001F642\U0001F642 in the city, \u6771\u4eac street view",
    "fish &amp; chips &amp;amp; more &lt;b&gt; &nbsp;light&nbsp; &copy 2024 &#150; &#x41;&#66;",
    "a\rboat\u2028under\x85the\u00a0bridge",
    " ".join(WORDS[i % len(WORDS)] for i in range(7, 7 + 190)),  # longer than text_len - 1 pieces: truncated
    "Quiet snow falls over the old mountain city; the camera turns left.",
]

CLEAN_CASES = PROMPTS + [
    "", "   ", "\t\n", "a\u2028b\u3000\u3000c", "x&nbsp;&nbsp;y", "&amp;lt;tag&amp;gt;", "&copy 2024 &ampfoo &#150; &#0;",
    "&#11;z &#x110000; &#xD800; &#99999999999999999999; &#xFDD0; &#128512;", "AT&T &NTILDE; &rsquo; &notit; &notin;",
    "\u00a0 lead and trail \u2003", "mixed \r\n lines \x0b\x0c and \x85 next", "zero\u200bwidth \ufeffbom",
    "\x1c\x1dedge\x1e\x1f", "in\x1cside", "&#x; &#; & ; &\t; &lt", "&" + "a" * 40 + ";", "&amp&amp;&AMP;x",
    "caf&eacute; na&iuml;ve", "&Ecirc;&#X41;&#x4a;", "tab\tsep\u000bvt",
]


# Special tokens typed in a prompt (Wan's fast tokenizer matches them exactly, before its normalizer).
SPECIAL_PROMPTS = ["a cat</s>dog", "red <pad> blue</s>", "<unk>x <unk>  y", "</s></s>", "no special here"]
SPECIALS = {"<pad>": 0, "</s>": 1, "<unk>": 2}  # tiny.model's control and unknown pieces


def special_ids(model, text, text_len):
    """The rule docs/text_encoder.md states for Wan's tokenizer: split the cleaned text on special tokens (leftmost
    match), spm_encode each stretch alone, a stretch that ends in ' ' before a special token adds the lone U+2581
    piece; then truncation and EOS."""
    vocab = subprocess.run(["spm_export_vocab", f"--model={model}"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    space = [i for i, line in enumerate(vocab) if line.split("\t")[0] == "\u2581"]  # the lone U+2581 piece
    assert len(space) == 1
    text = wan_clean(text)
    parts, start = [], 0
    pat = re.compile("|".join(re.escape(k) for k in sorted(SPECIALS, key=len, reverse=True)))
    for m in pat.finditer(text):
        parts.append((text[start:m.start()], SPECIALS[m.group()]))
        start = m.end()
    parts.append((text[start:], None))
    out = []
    for stretch, special in parts:
        out += spm_ids(model, [stretch])[0] if stretch else []
        if special is not None:
            if stretch.endswith(" "):
                out.append(space[0])
            out.append(special)
    return out[:text_len - 1] + [1]


# Raw strings (no cleaning) for the sentencepiece normaliser and Viterbi: NFKC folds, ligatures, fullwidth and
# combining forms, controls the charsmap deletes, zero-width characters, unknown scripts, whitespace runs.
SPM_FRAGMENTS = ["the", "red cat", " ", "  ", "\t", "\ufb01sh", "\uff21\uff22", "\u2460", "e\u0301", "\u00e9", "\u200b",
                 "\ufeff", "\x1c", "\x0b", "\u00bd", "\u2122", "\uff76", "\ud55c\uad6d\uc5b4", "\u03a9", "x\u00b2",
                 "\u3000", "\u00a0", "ABC", "walks.", "?!", "12.5", "\U0001F642", "\r", "\u2581", "tree\u2581s"]


def spm_cases(seed=3, n=60):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        k = int(torch.randint(1, 7, (1,), generator=g))
        out.append("".join(SPM_FRAGMENTS[i] for i in torch.randint(0, len(SPM_FRAGMENTS), (k,), generator=g).tolist()))
    return out


def wan_t5_module(repo):
    """Wan's wan/modules/t5.py at HEAD of repo, imported from a temporary package; its sibling tokenizers.py is
    stood in for by an empty module (only the encoder runs), and torch.cuda.current_device (called at import by
    T5EncoderModel's default argument) returns 'cpu' while it loads."""
    src = subprocess.run(["git", "-C", repo, "show", "HEAD:wan/modules/t5.py"], check=True, capture_output=True,
                         text=True).stdout
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    tmp = tempfile.mkdtemp(prefix="wan_t5_")
    pkg = os.path.join(tmp, "wan_t5_fixture")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "t5.py"), "w") as f:
        f.write(src)
    with open(os.path.join(pkg, "tokenizers.py"), "w") as f:
        f.write("class HuggingfaceTokenizer:\n    pass\n")
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, tmp)
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: "cpu"
    try:
        import importlib
        module = importlib.import_module("wan_t5_fixture.t5")
    finally:
        torch.cuda.current_device = saved
        sys.path.remove(tmp)
    return module, commit


def seeded_weights(model, cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    d, da, df, hd = cfg["dim"], cfg["dim_attn"], cfg["dim_ffn"], cfg["dim_attn"] // cfg["num_heads"]
    out = OrderedDict()
    for name, p in model.state_dict().items():
        r = torch.randn(p.shape, generator=g, dtype=torch.float64)
        if p.dim() == 1:
            v = 1 + 0.1 * r
        elif name.endswith(("attn.q.weight", "attn.k.weight")):
            v = r * d ** -0.5 * hd ** -0.25
        elif name.endswith("attn.o.weight"):
            v = r * da ** -0.5
        elif name.endswith("ffn.fc2.weight"):
            v = r * df ** -0.5
        elif name.endswith(("attn.v.weight", "ffn.gate.0.weight", "ffn.fc1.weight")):
            v = r * d ** -0.5
        else:  # token embedding, position tables
            v = r
        out[name] = v.to(torch.bfloat16)
    return out


HF = [(r"token_embedding\.weight", "shared.weight"), (r"norm\.weight", "encoder.final_layer_norm.weight"),
      (r"blocks\.(\d+)\.norm1\.weight", "encoder.block.{0}.layer.0.layer_norm.weight"),
      (r"blocks\.(\d+)\.attn\.([qkvo])\.weight", "encoder.block.{0}.layer.0.SelfAttention.{1}.weight"),
      (r"blocks\.(\d+)\.pos_embedding\.embedding\.weight",
       "encoder.block.{0}.layer.0.SelfAttention.relative_attention_bias.weight"),
      (r"blocks\.(\d+)\.norm2\.weight", "encoder.block.{0}.layer.1.layer_norm.weight"),
      (r"blocks\.(\d+)\.ffn\.gate\.0\.weight", "encoder.block.{0}.layer.1.DenseReluDense.wi_0.weight"),
      (r"blocks\.(\d+)\.ffn\.fc1\.weight", "encoder.block.{0}.layer.1.DenseReluDense.wi_1.weight"),
      (r"blocks\.(\d+)\.ffn\.fc2\.weight", "encoder.block.{0}.layer.1.DenseReluDense.wo.weight")]


def hf_name(name):
    """transformers' UMT5EncoderModel name of a Wan T5Encoder parameter (modeling_umt5.py's module tree)."""
    for pat, tmpl in HF:
        m = re.fullmatch(pat, name)
        if m:
            return tmpl.format(*m.groups())
    raise KeyError(name)


def save_safetensors(path, tensors):
    """The safetensors format (header JSON, then the raw little-endian bytes in header order)."""
    names = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64"}
    header, blobs, off = OrderedDict(), [], 0
    for k, t in tensors.items():
        t = t.contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def spm_ids(model, lines):
    """spm_encode --output_format=id, one line per text (no text holds '\\n' after cleaning)."""
    r = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"], input="".join(l + "\n" for l in lines),
                       capture_output=True, text=True, check=True)
    out = r.stdout.split("\n")[:len(lines)]
    return [[int(x) for x in o.split()] for o in out]


def train_spm(prefix, corpus, byte_fallback):
    # the byte-fallback model skips the NFKC normaliser: its 237 KB table would double the fixture's size, and the
    # byte-fallback rule does not depend on it
    rule = "identity" if byte_fallback else "nmt_nfkc"
    subprocess.run(["spm_train", f"--normalization_rule_name={rule}", f"--input={corpus}", f"--model_prefix={prefix}", "--vocab_size=384",
                    "--model_type=unigram", "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1",
                    "--character_coverage=1.0", "--hard_vocab_limit=false", "--num_threads=1", "--shuffle_input_sentence=false",
                    f"--byte_fallback={'true' if byte_fallback else 'false'}", "--minloglevel=2"],
                   check=True, capture_output=True)


class NoDowncast:
    """Inside: Tensor.float() leaves float64 tensors as they are, so the float32 upcasts Wan writes for bfloat16
    runs keep a float64 run in float64 (integer .float(), the bucket computation, is untouched)."""

    def __enter__(self):
        self.orig = torch.Tensor.float
        orig = self.orig
        torch.Tensor.float = lambda t, *a, **k: t if t.dtype == torch.float64 else orig(t, *a, **k)

    def __exit__(self, *exc):
        torch.Tensor.float = self.orig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wan-repo", default="/work/.mirror/Wan-Video+Wan2.1/repo")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    t5, commit = wan_t5_module(args.wan_repo)
    cfg = CONFIG

    # tokenizers
    g = torch.Generator().manual_seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for _ in range(3000):
                n = int(torch.randint(4, 16, (1,), generator=g))
                idx = torch.randint(0, len(WORDS), (n,), generator=g).tolist()
                f.write(" ".join(WORDS[i] for i in idx).capitalize() + ".\n")
        for name, bf in (("tiny", False), ("tiny_bf", True)):
            train_spm(os.path.join(tmp, name), corpus, bf)
            os.replace(os.path.join(tmp, name + ".model"), os.path.join(OUT, name + ".model"))
    cleaned = [wan_clean(p) for p in PROMPTS]
    assert all("\n" not in c for c in cleaned)
    raw = spm_ids(os.path.join(OUT, "tiny.model"), cleaned)
    bf_raw = spm_ids(os.path.join(OUT, "tiny_bf.model"), cleaned)
    ids = [r[:cfg["text_len"] - 1] + [1] for r in raw]
    assert max(len(r) for r in raw) > cfg["text_len"] - 1, "one prompt must be truncated"

    # encoder, Wan's own module, float64, padded batch
    model = t5.T5Encoder(cfg["vocab"], cfg["dim"], cfg["dim_attn"], cfg["dim_ffn"], cfg["num_heads"],
                         cfg["num_layers"], cfg["num_buckets"], shared_pos=cfg["shared_pos"], dropout=0.1).eval()
    W = seeded_weights(model, cfg)
    model = model.double()
    model.load_state_dict({k: v.double() for k, v in W.items()}, strict=True)
    B, T = len(ids), cfg["text_len"]
    batch = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    for b, r in enumerate(ids):
        batch[b, :len(r)] = torch.tensor(r)
        mask[b, :len(r)] = 1
    with torch.no_grad(), NoDowncast():
        out = model(batch, mask)
    assert out.dtype == torch.float64

    torch.save(W, os.path.join(OUT, "tiny_t5.pth"))
    hf = {"text_encoder." + hf_name(k): v for k, v in W.items()}
    hf["text_encoder.encoder.embed_tokens.weight"] = W["token_embedding.weight"]
    hf["text_encoder.decoder.final_layer_norm.weight"] = W["norm.weight"] * 2  # not the encoder's: ignored
    save_safetensors(os.path.join(OUT, "tiny_t5_hf.safetensors"), OrderedDict(sorted(hf.items())))
    exp = OrderedDict()
    for k, r in enumerate(ids):
        exp[f"ids.{k}"] = torch.tensor(r, dtype=torch.int64)
        exp[f"context.{k}"] = out[k, :len(r)].float()
        exp[f"bf_raw.{k}"] = torch.tensor(bf_raw[k], dtype=torch.int64)
    for k, p in enumerate(SPECIAL_PROMPTS):
        exp[f"special.{k}"] = torch.tensor(special_ids(os.path.join(OUT, "tiny.model"), p, cfg["text_len"]))
    save_safetensors(os.path.join(OUT, "expected.safetensors"), exp)
    cases = spm_cases()
    with open(os.path.join(OUT, "spm_cases.json"), "w") as f:
        json.dump([[c, a, b] for c, a, b in zip(cases, spm_ids(os.path.join(OUT, "tiny.model"), cases),
                                                spm_ids(os.path.join(OUT, "tiny_bf.model"), cases))],
                  f, indent=0, ensure_ascii=True)
        f.write("\n")
    with open(os.path.join(OUT, "special_prompts.txt"), "wb") as f:
        f.write("".join(p + "\n" for p in SPECIAL_PROMPTS).encode("utf-8"))
    with open(os.path.join(OUT, "prompts.txt"), "wb") as f:
        f.write("".join(p + "\n" for p in PROMPTS).encode("utf-8"))
    with open(os.path.join(OUT, "tiny_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "clean.json"), "w") as f:
        json.dump([[c, wan_clean(c)] for c in CLEAN_CASES], f, indent=0, ensure_ascii=True)
        f.write("\n")
    spm_version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "sentencepiece"], capture_output=True,
                                 text=True).stdout
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"wan_commit": commit, "wan_file": "wan/modules/t5.py", "config": cfg, "torch": torch.__version__,
                   "sentencepiece": spm_version, "prompts": len(PROMPTS), "lengths": [len(r) for r in ids],
                   "bf_raw_lengths": [len(r) for r in bf_raw],
                   "max_abs_context": [float(out[k, :len(r)].abs().max()) for k, r in enumerate(ids)]}, f, indent=1)
        f.write("\n")
    print("wrote", OUT, "lengths", [len(r) for r in ids], "byte-fallback lengths", [len(r) for r in bf_raw])


if __name__ == "__main__":
    main()
