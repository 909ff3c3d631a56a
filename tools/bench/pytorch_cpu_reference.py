"""PyTorch eager (CPU) reference for train_bench: the same training step, forward +
cross-entropy + backward + SGD with momentum, on a fixed batch of random images (ImageNet-style
ResNets: batch 8 of 3x224x224; ResNet-20: batch 128 of 1x28x28), in f32 or under CPU autocast
(--amp bf16), printed in train_bench's format so side_by_side.sh can set the two beside each
other.

    /usr/bin/python3 tools/bench/pytorch_cpu_reference.py --models resnet18,resnet50 \
        --threads 1 --steps 10 [--amp off,bf16]

Needs Debian's python3-torch and python3-torchvision (apt). torchvision's ResNets are the
architecture of tessera's models/resnet.cc (7x7/2 stem, 3x3/2 max pooling, stride on the 3x3
convolution of a Bottleneck, 1x1 projections, BN after every convolution); ResNet-20 is written
out below as models/resnet.cc builds it (option-A shortcuts). PyTorch 1.13 runs its CPU
convolutions on oneDNN, and under bf16 autocast its convolutions and linears in bf16 (batch norm
takes the bf16 input as it comes). No allocator statistics on the CPU: the activation column is
left at 0.
"""
import argparse
import time

import torch
import torchvision


clock = time.perf_counter  # --clock=cpu: time.process_time


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


class BasicBlockA(torch.nn.Module):
    """CIFAR ResNet block with an option-A shortcut (subsample, zero-pad the channels)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            short = torch.nn.functional.pad(short, (0, 0, 0, 0, 0, self.pad))
        return torch.relu(out + short)


def resnet20(in_channels=1, classes=10):
    layers = [torch.nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(16),
              torch.nn.ReLU()]
    cin = 16
    for stage, width in enumerate([16, 32, 64]):
        for i in range(3):
            layers.append(BasicBlockA(cin, width, 2 if stage > 0 and i == 0 else 1))
            cin = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, classes)]
    return torch.nn.Sequential(*layers)


def input_shape(name):
    return (128, 1, 28, 28) if name == "resnet20" else (8, 3, 224, 224)


def build(name):
    if name == "resnet20":
        return resnet20()
    return getattr(torchvision.models, name)(num_classes=1000)


def step_times(name, batch, threads, warmup, steps, amp, channels_last=False):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, shape = build(name), input_shape(name)
    if batch:
        shape = (batch,) + shape[1:]
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(*shape)
    if channels_last:  # PyTorch's recipe: the model and its input in torch.channels_last
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    y = torch.arange(shape[0]) % 10
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        start = clock()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(amp == "bf16")):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        elapsed = (clock() - start) * 1e3
        if i >= warmup:
            times.append(elapsed)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=0, help="0: the model's own (8, or 128)")
    parser.add_argument("--amp", default="off", help="off, bf16 or both: off,bf16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--channels-last", action="store_true",
                        help="model and input in torch.channels_last (train_bench --channels-last)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="cpu: the process's CPU time (as train_bench --clock=cpu), which "
                             "at one thread leaves out time spent waiting for a busy core")
    args = parser.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print("%-10s %6s %8s %14s %12s %5s %15s" % ("model", "batch", "threads", "median ms/step",
                                                "min ms/step", "amp", "activation MiB"))
    for name in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            for amp in args.amp.split(","):
                ms = step_times(name, args.batch, threads, args.warmup, args.steps, amp,
                                args.channels_last)
                batch = args.batch or input_shape(name)[0]
                print("%-10s %6d %8d %14.3f %12.3f %5s %15.2f" % (name, batch, threads, median(ms),
                                                               min(ms), amp, 0.0), flush=True)


if __name__ == "__main__":
    main()
