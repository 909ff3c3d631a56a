# The CNN of examples/net.h, in PyTorch, for comparing the examples line by line.
import sys
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        h = self.pool(torch.relu(self.bn1(self.conv1(x))))
        h = self.pool(torch.relu(self.conv2(h)))
        return self.fc(torch.flatten(h, 1))


def steps_flag():
    for arg in sys.argv[1:]:
        if not arg.startswith("--steps="):
            sys.exit(f"unknown argument '{arg}' (expected --steps=N)")
        return int(arg[len("--steps="):])
    return 0
