# examples/custom_module.cc in PyTorch (torchvision's FashionMNIST).
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from net import Net, steps_flag

steps = steps_flag()
torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
train = datasets.FashionMNIST("/tmp/data", train=True, download=True,
                              transform=transforms.Compose([transforms.RandomHorizontalFlip(), norm]))
test = datasets.FashionMNIST("/tmp/data", train=False, download=True, transform=norm)
train_loader = DataLoader(train, batch_size=64, shuffle=True)
test_loader = DataLoader(test, batch_size=1000)

for epoch in range(2):
    model.train()
    for step, (x, y) in enumerate(train_loader, 1):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        if step == steps:
            break


@torch.no_grad()
def evaluate(m):
    m.eval()
    correct = sum((m(x).argmax(1) == y).sum().item() for x, y in test_loader)
    return correct / len(test)


accuracy = evaluate(model)
torch.save(model.state_dict(), "/tmp/custom_module.pt")
reloaded = Net()
reloaded.load_state_dict(torch.load("/tmp/custom_module.pt"))
reloaded_accuracy = evaluate(reloaded)
print(f"test accuracy {accuracy:.4f}, after reloading the weights {reloaded_accuracy:.4f}")
raise SystemExit(0 if accuracy == reloaded_accuracy else 1)
