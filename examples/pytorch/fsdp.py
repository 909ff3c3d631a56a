# examples/fsdp.cc in PyTorch: torchrun --nproc_per_node=2 fsdp.py --steps=20 (gloo, CPU).
import functools

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, FullStateDictConfig, StateDictType
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms
from net import Net, steps_flag

steps = steps_flag()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = FSDP(Net(), auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=1000))
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
sampler = DistributedSampler(train, world, rank, seed=0)
loader = DataLoader(train, batch_size=64, sampler=sampler)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for step, (x, y) in enumerate(loader, 1):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        model.clip_grad_norm_(5.0)
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss /= world
        if rank == 0 and step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {mean_loss.item():.4f}")
        if step == steps:
            break

# The whole model, gathered (collective), in an unwrapped Net.
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
    state = model.state_dict()
plain = Net()
plain.load_state_dict(state)
if rank == 0:
    torch.save(plain.state_dict(), "/tmp/fsdp_example.pt")
