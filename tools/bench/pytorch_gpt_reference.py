#!/usr/bin/python3
"""PyTorch eager (CPU) reference for train_bench's GPTs: the same training step (forward,
lm cross-entropy, backward, AdamW with betas (0.9, 0.95) and weight decay 0.1 on the Linear
weights only) of GPT-2 written out as nanoGPT writes it (tests/models/gpt_reference.py's
model, at gpt-nano's or GPT-2 124M's size; the vocabulary 50304), on random token ids, in f32 or
under CPU autocast (--amp bf16), printed in train_bench's format so side_by_side.sh sets the two
beside each other.

    /usr/bin/python3 tools/bench/pytorch_gpt_reference.py --models gpt2 --threads 1 \\
        --batch 4 --seq-len 64 --steps 10 [--amp off,bf16]

PyTorch 1.13 (Debian's python3-torch) has no fused scaled_dot_product_attention: its eager
attention materializes the [B, heads, T, T] scores, as nanoGPT's does there.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

clock = time.perf_counter  # --clock=cpu: time.process_time

CONFIGS = {  # layers, heads, width, context
    "gpt-nano": (4, 4, 128, 256),
    "gpt2": (12, 12, 768, 1024),
}
VOCAB = 50304  # GPT-2's 50257 padded to a multiple of 64
TOKENS = 50257


class Block(nn.Module):
    def __init__(self, heads, width):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.attn_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, name):
        super().__init__()
        layers, heads, width, context = CONFIGS[name]
        self.wte = nn.Embedding(VOCAB, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList([Block(heads, width) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def step_times(name, batch, seq_len, threads, warmup, steps, amp):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(name)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("w")]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith("w"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, TOKENS, (batch, seq_len))
    targets = torch.randint(0, TOKENS, (batch, seq_len))
    times = []
    for i in range(warmup + steps):
        start = clock()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(amp == "bf16")):
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, VOCAB).float(), targets.view(-1))
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append((clock() - start) * 1e3)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=0, help="0: the model's own (gpt2 4, gpt-nano 8)")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--amp", default="off", help="off, bf16 or both: off,bf16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"])
    args = parser.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print("%-10s %6s %8s %14s %12s %5s %15s %10s" % ("model", "batch", "threads", "median ms/step",
                                                     "min ms/step", "amp", "activation MiB",
                                                     "tokens/s"))
    for name in args.models.split(","):
        batch = args.batch or (4 if name == "gpt2" else 8)
        for threads in [int(t) for t in args.threads.split(",")]:
            for amp in args.amp.split(","):
                ms = step_times(name, batch, args.seq_len, threads, args.warmup, args.steps, amp)
                m = median(ms)
                print("%-10s %6d %8d %14.3f %12.3f %5s %15.2f %10.0f" % (
                    name, batch, threads, m, min(ms), amp, 0.0, batch * args.seq_len * 1e3 / m),
                    flush=True)


if __name__ == "__main__":
    main()
