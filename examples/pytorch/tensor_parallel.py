# examples/tensor_parallel.cc in PyTorch: torchrun --nproc_per_node=2 tensor_parallel.py --steps=20
# (gloo, CPU). PyTorch 1.13 has no tensor parallelism, so Megatron-LM's pieces are written here:
# a column-parallel classifier whose logits stay split by class, a cross-entropy over the split
# logits that never gathers them, and an argmax over them; 2 tensor-parallel ranks per replica,
# DDP over the replicas.
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms
from net import steps_flag


class CopyToParallelRegion(torch.autograd.Function):  # the same x on every rank; dL/dx summed
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ColumnParallelLinear(nn.Module):  # this rank's rows of a full Linear
    def __init__(self, full, group):
        super().__init__()
        self.group = group
        self.classes = torch.arange(full.out_features).tensor_split(dist.get_world_size(group))[
            dist.get_rank(group)]
        self.weight = nn.Parameter(full.weight.detach()[self.classes].clone())
        self.bias = nn.Parameter(full.bias.detach()[self.classes].clone())

    def forward(self, x):
        return F.linear(CopyToParallelRegion.apply(x, self.group), self.weight, self.bias)


class ClassParallelCrossEntropy(torch.autograd.Function):  # mean loss of logits split by class
    @staticmethod
    def forward(ctx, logits, y, classes, group):
        m = logits.max(1).values
        dist.all_reduce(m, dist.ReduceOp.MAX, group=group)
        shifted = logits - m[:, None]
        local = y - classes[0]
        mine = (local >= 0) & (local < len(classes))
        x_y = torch.where(mine, shifted.gather(1, local.clamp(0, len(classes) - 1)[:, None])[:, 0], 0.0)
        sums = torch.stack([shifted.exp().sum(1), x_y])
        dist.all_reduce(sums, group=group)
        ctx.save_for_backward(shifted.exp() / sums[0][:, None], local, mine)
        return (sums[0].log() - sums[1]).mean()

    @staticmethod
    def backward(ctx, grad):
        p, local, mine = ctx.saved_tensors
        p = p.clone()
        p[mine, local[mine]] -= 1
        return grad * p / len(p), None, None, None


def parallel_argmax(logits, head):  # the best (value, class) over the group's ranks
    value, index = logits.max(1)
    values = [torch.empty_like(value) for _ in range(dist.get_world_size(head.group))]
    indices = [torch.empty_like(index) for _ in values]
    dist.all_gather(values, value, group=head.group)
    dist.all_gather(indices, index + head.classes[0], group=head.group)
    return torch.stack(indices).gather(0, torch.stack(values).argmax(0)[None])[0]


def make_net():
    torch.manual_seed(0)  # the same full weights whether the classifier is split or not
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * 7 * 7, 10))


steps = steps_flag()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert world % 2 == 0, f"run it on an even number of ranks (2 tensor-parallel ranks per replica), not {world}"
tp_groups = [dist.new_group([2 * d, 2 * d + 1]) for d in range(world // 2)]
dp_groups = [dist.new_group(list(range(t, world, 2))) for t in range(2)]
tp_group, dp_group, replica, replicas = tp_groups[rank // 2], dp_groups[rank % 2], rank // 2, world // 2

model = make_net()
head = model[8] = ColumnParallelLinear(model[8], tp_group)
ddp = DistributedDataParallel(model, process_group=dp_group)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
loader = DataLoader(train, batch_size=64, sampler=DistributedSampler(train, replicas, replica, seed=0))
for step, (x, y) in enumerate(loader, 1):
    loss = ClassParallelCrossEntropy.apply(ddp(x), y, head.classes, tp_group)
    opt.zero_grad()
    loss.backward()  # the head's gradient is local; the features' is summed over the TP group
    opt.step()
    if rank == 0 and step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}")
    if step == steps:
        break

# The full weights under the ordinary names: the plain network takes them.
for b in model.buffers():
    dist.broadcast(b, dist.get_global_rank(dp_group, 0), group=dp_group)
state = model.state_dict()
for name in ("weight", "bias"):
    parts = [torch.empty_like(state[f"8.{name}"]) for _ in range(2)]
    dist.all_gather(parts, state[f"8.{name}"], group=tp_group)
    state[f"8.{name}"] = torch.cat(parts)
plain = make_net()
plain.load_state_dict(state)
model.eval()
plain.eval()
test = datasets.FashionMNIST("/tmp/data", train=False, download=True, transform=norm)
correct = disagreements = 0
with torch.no_grad():
    for x, y in DataLoader(test, batch_size=1000):
        classes = parallel_argmax(model(x), head)
        disagreements += (classes != plain(x).argmax(1)).sum().item()
        correct += (classes == y).sum().item()
if rank == 0:
    print(f"{world} ranks (2 tensor-parallel x {replicas} data-parallel): test accuracy "
          f"{correct / len(test):.4f}; the head holds {len(head.classes)} of 10 classes on this rank; "
          f"the plain network disagrees on {disagreements} images")
assert disagreements == 0, f"the tensor-parallel and the plain network disagree on {disagreements} test images"
