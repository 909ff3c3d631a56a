# examples/gpt.cc in PyTorch: torchrun --nproc_per_node=2 gpt.py --steps=20 (gloo, CPU).
# The tokens are the files examples/gpt.cc stored (llm.c's layout, GPT-2's BPE), read as
# llm.c's train_gpt2.py reads them; the model is nanoGPT's, at examples/gpt.cc's size.
import glob
import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from net import steps_flag


def tokens(split):  # a 256-int32 header (magic 20240520), then uint16 tokens
    path = glob.glob("/var/cache/tessera/tokens/fortunes-*-gpt2-%s.bin" % split)[0]
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520 and header[1] == 1
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16, offset=1024).astype(np.int64))


class Windows(Dataset):  # window i: tokens [i T, i T + T + 1)
    def __init__(self, stream, seq_len):
        self.stream, self.seq_len = stream, seq_len

    def __len__(self):
        return (len(self.stream) - 1) // self.seq_len

    def __getitem__(self, i):
        w = self.stream[i * self.seq_len:(i + 1) * self.seq_len + 1]
        return w[:-1], w[1:]


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.attn_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2)
                   for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
        x = x + self.attn_proj((F.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context=64, layers=2, heads=2, width=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.h = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied to the token embedding


def lm_loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def validation_loss(model, val, windows=8):
    with torch.no_grad():
        return sum(lm_loss(model(x[None]), y[None]).item() for x, y in (val[i] for i in range(windows))) / windows


steps = steps_flag()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
train, val = Windows(tokens("train"), 32), Windows(tokens("val"), 32)
torch.manual_seed(0)
model = GPT(vocab=50304)
ddp = DistributedDataParallel(model)
decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("w")]
rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith("w"))]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95))
before = validation_loss(model, val)
loader = DataLoader(train, batch_size=8, sampler=DistributedSampler(train, world, rank, seed=0))
for step, (x, y) in enumerate(loader, 1):
    opt.zero_grad()
    loss = lm_loss(ddp(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step % 10 == 0:
        dist.all_reduce(mean := loss.detach().clone())
        if rank == 0:
            print("step %d loss %.4f" % (step, mean.item() / world))
    if step == steps:
        break
after = validation_loss(model, val)
if rank == 0:
    print("%d ranks, %d steps: validation loss %.4f -> %.4f (perplexity %.1f -> %.1f)"
          % (world, step, before, after, math.exp(before), math.exp(after)))
