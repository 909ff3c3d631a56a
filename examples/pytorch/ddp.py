# examples/ddp.cc in PyTorch: torchrun --nproc_per_node=2 ddp.py --steps=20 (gloo, CPU).
import torch
import torch.distributed as dist
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
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
test = datasets.FashionMNIST("/tmp/data", train=False, download=True, transform=norm)
train_sampler = DistributedSampler(train, world, rank, seed=0)
train_loader = DataLoader(train, batch_size=64, sampler=train_sampler)
# PyTorch's DistributedSampler always pads; an unpadded split of the test set by hand.
test_loader = DataLoader(torch.utils.data.Subset(test, range(rank, len(test), world)), batch_size=1000)

for epoch in range(2):
    train_sampler.set_epoch(epoch)
    for step, (x, y) in enumerate(train_loader, 1):
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss /= world
        if rank == 0 and step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {mean_loss.item():.4f}")
        if step == steps:
            break

for b in model.buffers():  # BatchNorm statistics: rank 0's everywhere
    dist.broadcast(b, 0)
model.eval()
with torch.no_grad():
    correct = torch.tensor(float(sum((model(x).argmax(1) == y).sum().item() for x, y in test_loader)))
dist.all_reduce(correct)
if rank == 0:
    print(f"{world} ranks: test accuracy {correct.item() / len(test):.4f}")
    torch.save(model.state_dict(), "/tmp/ddp_example.pt")
