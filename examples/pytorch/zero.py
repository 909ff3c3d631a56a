# examples/zero.cc in PyTorch: ZeroRedundancyOptimizer shards only the optimizer state (ZeRO-1)
# and needs DDP for the gradients; ZeRO-2 would need DeepSpeed or FSDP. torchrun --nproc_per_node=2.
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms
from net import Net, steps_flag

steps = steps_flag()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = Net()
ddp = DistributedDataParallel(model)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=2e-3,
                              weight_decay=1e-2)
schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
sampler = DistributedSampler(train, world, rank, seed=0)
loader = DataLoader(train, batch_size=64, sampler=sampler)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for step, (x, y) in enumerate(loader, 1):
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # grads are whole on every rank
        opt.step()
        loss_value = loss.detach().clone()
        dist.all_reduce(loss_value)
        loss_value = loss_value.item() / world
        if rank == 0 and step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {loss_value:.4f}")
        if step == steps:
            break
    schedule.step()
for b in model.buffers():
    dist.broadcast(b, 0)
opt.consolidate_state_dict(to=0)
if rank == 0:
    print(f"{world} ranks: last loss {loss_value:.4f}")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 2},
               "/tmp/zero_example.pt")
