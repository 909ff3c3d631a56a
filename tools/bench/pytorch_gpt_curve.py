#!/usr/bin/python3
"""PyTorch's side of gpt_curve: the GPT that tools/bench/gpt_curve trained under DDP, trained
again in PyTorch eager from the same initial weights (DIR/init.safetensors), on the same windows
in the same order (DIR/run.json: each step's windows, rank by rank, taken as one batch of all
ranks' windows, whose mean loss is the mean of the ranks' means that DDP averages), with the
same AdamW (betas 0.9, 0.95, weight decay 0.1 on the Linear weights, eps 1e-8), the gradient
clipped to norm 1, and the same validation windows. Writes DIR/pytorch.jsonl, prints both curves
side by side, and exits 1 if any evaluation differs from tessera's by more than --tolerance
(relative; default 2%).

    /usr/bin/python3 tools/bench/pytorch_gpt_curve.py DIR [--threads 2] [--tolerance 0.02]

The model is pytorch_gpt_reference.py's (nanoGPT's GPT-2, the plain attention).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gpt_reference import GPT  # noqa: E402


def load_safetensors(path):
    """name -> float32 tensor (safetensors: an 8-byte header length, a JSON header, the data)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, v in header.items():
        assert v["dtype"] == "F32", (name, v["dtype"])
        a, b = v["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).copy()).view(v["shape"])
    return out


def pytorch_name(name):
    """tessera's parameter name (models/gpt.h) -> pytorch_gpt_reference.GPT's."""
    if name.startswith("embed."):
        return name[len("embed."):]
    if name.startswith("ln_f."):
        return name
    layer, rest = name.split(".", 1)
    rest = {"attn.c_attn": "c_attn", "attn.c_proj": "attn_proj", "mlp.c_fc": "c_fc",
            "mlp.c_proj": "mlp_proj"}.get(rest.rsplit(".", 1)[0], rest.rsplit(".", 1)[0]) + "." + rest.rsplit(".", 1)[1]
    return "h." + layer[1:] + "." + rest


def read_tokens(path):
    """llm.c's token file: 256 int32 (magic 20240520, version, count), then uint16 tokens."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520, (path, header[0])
    return np.fromfile(path, dtype=np.uint16, offset=1024, count=int(header[2])).astype(np.int64)


def windows(tokens, indices, seq_len):
    x = np.stack([tokens[i * seq_len: i * seq_len + seq_len] for i in indices])
    y = np.stack([tokens[i * seq_len + 1: i * seq_len + seq_len + 1] for i in indices])
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.02)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = json.load(open(os.path.join(args.dir, "run.json")))
    model = GPT(run["model"])
    state = load_safetensors(os.path.join(args.dir, "init.safetensors"))
    own = dict(model.named_parameters())
    assert len(state) == len(own), (sorted(state), sorted(own))
    with torch.no_grad():
        for name, t in state.items():
            own[pytorch_name(name)].copy_(t)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("w")]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith("w"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=run["lr"], betas=(0.9, 0.95), eps=1e-8)
    train, val = read_tokens(run["train_file"]), read_tokens(run["val_file"])
    T, vocab = run["seq_len"], model.wte.weight.shape[0]

    def validation_loss():
        with torch.no_grad():
            total, n = 0.0, run["val_windows"]
            for first in range(0, n, 8):
                chunk = list(range(first, min(first + 8, n)))
                x, y = windows(val, chunk, T)
                total += F.cross_entropy(model(x).view(-1, vocab), y.view(-1)).item() * len(chunk)
            return total / n

    tessera = {r["step"]: r["val_loss"] for r in map(json.loads, open(os.path.join(args.dir, "tessera.jsonl")))}
    ours = {0: validation_loss()}
    steps = run["steps"]
    for k, per_rank in enumerate(steps, 1):
        x, y = windows(train, [i for rank in per_rank for i in rank], T)
        opt.zero_grad()
        F.cross_entropy(model(x).view(-1, vocab), y.view(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if k % run["eval_every"] == 0 or k == len(steps):
            ours[k] = validation_loss()
            print(f"step {k:4d}  validation loss {ours[k]:.4f}", file=sys.stderr, flush=True)
    with open(os.path.join(args.dir, "pytorch.jsonl"), "w") as f:
        for k, v in ours.items():
            f.write(json.dumps({"step": k, "val_loss": v}) + "\n")
    worst = 0.0
    print(f"{run['model']}, {run['ranks']} ranks x {run['batch']} windows of {T} tokens, lr {run['lr']}")
    print(" step    tessera    pytorch  difference")
    for k in sorted(ours):
        diff = abs(tessera[k] - ours[k]) / ours[k]
        worst = max(worst, diff)
        print(f"{k:5d}  {tessera[k]:9.6f}  {ours[k]:9.6f}  {100 * diff:8.4f}%")
    print(f"largest difference {100 * worst:.3f}% (tolerance {100 * args.tolerance:g}%)")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
