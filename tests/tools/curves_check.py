"""Checks a train --metrics file and explain curves' figures against the file itself.

  curves_check.py metrics FILE TRAIN_OUTPUT STEPS EPOCHS
      every line parses; STEPS*EPOCHS step lines and EPOCHS epoch lines, steps numbered 1..;
      the running mean of the step losses is each "step k/N  loss X" line the tool printed, and
      the epoch lines' train_loss and test_accuracy are its epoch lines'.
  curves_check.py summary JSONL FILE...
      explain curves --json's line per run equals the figures computed here from each FILE.
"""
import json
import re
import sys


def lines_of(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def check_metrics(path, output_path, steps, epochs):
    rows = lines_of(path)
    step_rows = [r for r in rows if r["kind"] == "step"]
    epoch_rows = [r for r in rows if r["kind"] == "epoch"]
    assert len(rows) == steps * epochs + epochs, (len(rows), steps, epochs)
    assert len(step_rows) == steps * epochs and len(epoch_rows) == epochs
    assert [r["step"] for r in step_rows] == list(range(1, steps * epochs + 1))
    for r in step_rows:
        for key in ("epoch", "elapsed_seconds", "loss", "lr", "images_per_second"):
            assert isinstance(r[key], (int, float)), (key, r)
    output = open(output_path).read()
    printed = re.findall(r"epoch (\d+)/\d+  step (\d+)/\d+  loss ([0-9.]+)", output)
    assert printed, "no progress lines in the output"
    for epoch, k, loss in printed:
        epoch, k = int(epoch), int(k)
        mine = [r["loss"] for r in step_rows if r["epoch"] == epoch][:k]
        mean = sum(mine) / len(mine)
        # printed with 4 decimals, the file holds 6 significant digits
        assert abs(mean - float(loss)) <= 5e-5 + 1e-5 * len(mine), (epoch, k, mean, loss)
    printed_epochs = re.findall(r"epoch (\d+)/\d+  train_loss ([0-9.]+)  test_accuracy ([0-9.]+)", output)
    assert len(printed_epochs) == epochs, printed_epochs
    for (epoch, loss, accuracy), r in zip(printed_epochs, epoch_rows):
        assert int(epoch) == r["epoch"]
        assert abs(r["train_loss"] - float(loss)) <= 5e-5 + 1e-6, (r, loss)
        assert abs(r["test_accuracy"] - float(accuracy)) <= 5e-5 + 1e-6, (r, accuracy)
    print(f"{path}: {len(step_rows)} steps, {len(epoch_rows)} epochs, {len(printed)} printed losses agree")


def check_summary(jsonl, paths):
    got = lines_of(jsonl)
    assert len(got) == len(paths), (len(got), paths)
    for g, path in zip(got, paths):
        rows = lines_of(path)
        steps = [r for r in rows if r["kind"] == "step"]
        epochs = [r for r in rows if r["kind"] == "epoch"]
        want = {
            "run": path,
            "steps": len(steps),
            "epochs": len(epochs),
            "last_step": steps[-1]["step"],
            "final_loss": steps[-1]["loss"],
            "mean_images_per_second": sum(r["images_per_second"] for r in steps) / len(steps),
            "elapsed_seconds": max(r["elapsed_seconds"] for r in rows),
        }
        if epochs:
            want["final_train_loss"] = epochs[-1]["train_loss"]
            want["best_accuracy"] = max(r["test_accuracy"] for r in epochs)
        assert set(g) == set(want), (sorted(g), sorted(want))
        for key, value in want.items():
            if isinstance(value, str):
                assert g[key] == value, (key, g[key], value)
            else:
                assert abs(g[key] - value) <= 1e-9 * max(1.0, abs(value)), (path, key, g[key], value)
    print(f"{jsonl}: {len(got)} runs agree")


if __name__ == "__main__":
    if sys.argv[1] == "metrics":
        check_metrics(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "summary":
        check_summary(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"unknown check {sys.argv[1]}")
