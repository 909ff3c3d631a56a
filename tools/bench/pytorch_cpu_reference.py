"""PyTorch eager (CPU) reference for train_bench's ImageNet-style ResNets (issue 15): the same
training step, forward + cross-entropy + backward + SGD with momentum, on a fixed batch of
random 3x224x224 images, printed in train_bench's format so side_by_side.sh can set the two
beside each other.

    /usr/bin/python3 tools/bench/pytorch_cpu_reference.py --models resnet18,resnet50 \
        --threads 1 --steps 10

Needs Debian's python3-torch and python3-torchvision (apt). torchvision's ResNets are the
architecture of tessera's models/resnet.cc (7x7/2 stem, 3x3/2 max pooling, stride on the 3x3
convolution of a Bottleneck, 1x1 projections, BN after every convolution). PyTorch 1.13 runs
its CPU convolutions on oneDNN.
"""
import argparse
import time

import torch
import torchvision


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def step_times(name, batch, threads, warmup, steps):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=1000)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224)
    y = torch.arange(batch) % 10
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        elapsed = (time.perf_counter() - start) * 1e3
        if i >= warmup:
            times.append(elapsed)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    print("%-10s %6s %8s %14s %12s" % ("model", "batch", "threads", "median ms/step",
                                       "min ms/step"))
    for name in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            ms = step_times(name, args.batch, threads, args.warmup, args.steps)
            print("%-10s %6d %8d %14.3f %12.3f" % (name, args.batch, threads, median(ms),
                                                   min(ms)), flush=True)


if __name__ == "__main__":
    main()
