# examples/amp.cc in PyTorch (CPU autocast is bf16-only in 1.13; on a GPU, device_type="cuda").
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from net import Net, steps_flag

steps = steps_flag()
torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True, transform=norm)
loader = DataLoader(train, batch_size=64, shuffle=True)
step = skipped = 0
for x, y in loader:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    scale = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped += scaler.get_scale() < scale
    step += 1
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f} scale {scaler.get_scale()}")
    if step == steps:
        break
print(f"{step} steps, last loss {loss.item():.4f}, loss scale {scaler.get_scale()}, {skipped} skipped")
raise SystemExit(0 if loss.item() < 2.0 else 1)
