# examples/pipeline.cc in PyTorch: python3 pipeline.py --steps=20. PyTorch 1.13's Pipe runs its
# stages in one process (one per device), on GPipe's schedule only, and cannot balance by time:
# the model is cut by hand where the C++ example's balance by time cuts it here (4,5).
import torch
import torch.nn as nn
from torch.distributed import rpc
from torch.distributed.pipeline.sync import Pipe
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from net import steps_flag

steps = steps_flag()
rpc.init_rpc("worker", rank=0, world_size=1,  # Pipe needs the RPC framework, even in one process
             rpc_backend_options=rpc.TensorPipeRpcBackendOptions(init_method="tcp://127.0.0.1:29511"))
torch.manual_seed(0)
layers = [nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
          nn.Linear(32 * 7 * 7, 10)]
model = nn.Sequential(nn.Sequential(*layers[:4]), nn.Sequential(*layers[4:]))
pipe = Pipe(model, chunks=4)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
test = datasets.FashionMNIST("/tmp/data", train=False, download=True, transform=norm)
train_loader = DataLoader(train, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
test_loader = DataLoader(test, batch_size=1000)

for epoch in range(2):
    for step, (x, y) in enumerate(train_loader, 1):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(pipe(x).local_value(), y)
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        if step == steps:
            break
print(f"balance {','.join(str(len(stage)) for stage in model)}")

model.eval()
with torch.no_grad():
    correct = sum((pipe(x).local_value().argmax(1) == y).sum().item() for x, y in test_loader)
print(f"2 stages: test accuracy {correct / len(test):.4f}")
torch.save(model.state_dict(), "/tmp/pipeline_example.pt")
rpc.shutdown()
