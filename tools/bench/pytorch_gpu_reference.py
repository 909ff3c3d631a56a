"""PyTorch eager reference for tools/bench/gpu_bench.cc: the same GEMMs and the same ResNet-50
training step (224x224, batch 64 and 128, SGD with momentum, f32 and TF32), on the same GPU.

    python3 tools/bench/pytorch_gpu_reference.py [--batches 64,128 --steps 20 --gemm-n 8192]
"""
import argparse
import time

import torch
import torchvision


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def gemm_tflops(n, dtype):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    times = []
    for i in range(13):
        torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return 2 * n ** 3 / median(times) / 1e12


def resnet50_images_per_second(batch, steps):
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.arange(batch, device="cuda") % 1000
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(steps + 5):
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        if i >= 5:
            times.append(time.perf_counter() - start)
    return batch / median(times), torch.cuda.max_memory_allocated()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="64,128")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--gemm-n", type=int, default=8192)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = False  # heuristics, as tessera's algorithm choice
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    line = f"GEMM {args.gemm_n}^3 TFLOP/s:"
    for name, dtype in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        line += f"  {name} {gemm_tflops(args.gemm_n, dtype):.1f}"
    torch.backends.cuda.matmul.allow_tf32 = True
    line += f"  tf32 {gemm_tflops(args.gemm_n, torch.float32):.1f}"
    torch.backends.cuda.matmul.allow_tf32 = False
    print(line)
    print(f"{'model':8} {'batch':>6} {'math':>6} {'images/s':>12} {'peak MiB':>14}")
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        for batch in (int(b) for b in args.batches.split(",")):
            ips, peak = resnet50_images_per_second(batch, args.steps)
            print(f"{'resnet50':8} {batch:6d} {'tf32' if tf32 else 'f32':>6} {ips:12.1f} "
                  f"{peak / 1048576:14.0f}", flush=True)


if __name__ == "__main__":
    main()
