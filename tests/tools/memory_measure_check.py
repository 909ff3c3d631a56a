"""Checks explain memory --measure --json (the MLP, Adam, f32 or mixed precision) on N ranks.

  memory_measure_check.py JSONL N [TRAIN_JSON_DIR]
      one line per strategy (ddp, zero1, zero2, zero3, and for N = 2 pipeline and
      tensor_parallel) and rank; each rank's parameters, gradients and optimizer state equal the
      ZeRO paper's formula computed here for psi = 203,530 (784*256 + 256 + 256*10 + 10) and N,
      to the byte, and equal the predicted figures explain prints beside them. Mixed precision
      (the rows' "precision"): 2-byte parameters and gradients, an f32 master (4 bytes) beside
      Adam's moments, ZeRO-3's f32 flat shards serving as the masters. The pipeline's stages
      hold what the split by parameters gives them (fc1's 200,960 on rank 0, fc2's 2,570 on
      rank 1), predicted from the stage's own parameters ("stage_parameters"). Tensor parallelism over T = N splits everything
      but fc2's 10 biases: 10 + (psi - 10)/T parameters a rank. With TRAIN_JSON_DIR (files STRATEGY.json: the train
      tool's last JSON line of a run on the same ranks), equal the train tool's own counting-
      allocator figures for every rank too.
"""
import json
import sys

PSI = 784 * 256 + 256 + 256 * 10 + 10
ADAM = 8  # two f32 moments per parameter


FC1, FC2 = 784 * 256 + 256, 256 * 10 + 10


def formula(strategy, n, mixed, psi=PSI):
    b = 2 if mixed else 4          # bytes per parameter and per gradient
    k = ADAM + (4 if mixed else 0)  # optimizer bytes: the moments, and a master for half params
    if strategy == "pipeline":
        return b * psi // n, b * psi // n, k * psi // n
    if strategy == "tensor_parallel":
        mine = 10 + (psi - 10) // n
        return b * mine, b * mine, k * mine
    if strategy == "ddp":
        return b * psi, b * psi, k * psi
    if strategy == "zero1":
        return b * psi, b * psi, (ADAM + 4) * psi // n
    if strategy == "zero2":
        return b * psi, 4 * psi // n, (ADAM + 4) * psi // n
    # ZeRO-3: each unit (fc1: 200,960 parameters, fc2: 2,570) split evenly over N = 1 or 2; f32
    # flat shards whatever the precision (the masters)
    return 4 * psi // n, 4 * psi // n, ADAM * psi // n


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    train_dir = sys.argv[3] if len(sys.argv) > 3 else None
    rows = [json.loads(l) for l in open(path) if l.strip()]
    seen = [(r["strategy"], r["rank"]) for r in rows]
    strategies = ("ddp", "zero1", "zero2", "zero3") + (("pipeline", "tensor_parallel") if n > 1 else ())
    want = [(s, k) for s in strategies for k in range(n)]
    assert seen == want, (seen, want)
    for r in rows:
        assert r["psi"] == PSI and r["ranks"] == n, r
        got = (r["parameters_bytes"], r["gradients_bytes"], r["optimizer_bytes"])
        mixed = r["precision"] == "mixed"
        expected = formula(r["strategy"], n, mixed)
        predicted = (r["predicted_parameters_bytes"], r["predicted_gradients_bytes"],
                     r["predicted_optimizer_bytes"])
        if r["strategy"] == "pipeline":
            stage = (FC1, FC2)[r["rank"]]
            assert r["stage_parameters"] == stage, r
            expected = formula("pipeline", 1, mixed, stage)
        assert predicted == expected, (r["strategy"], predicted, expected)
        assert got == expected, (r["strategy"], r["rank"], got, expected)
        assert r["total_bytes"] == sum(got)
        assert r["peak_bytes"] > r["total_bytes"], r  # activations and the batch on top
        if train_dir and r["strategy"] in ("ddp", "zero1", "zero2", "zero3"):
            summary = json.loads(open(f"{train_dir}/{r['strategy']}.json").read())
            mine = summary["memory"]["per_rank"][r["rank"]]
            assert mine["rank"] == r["rank"]
            train = (mine["params"], mine["grads"], mine["optimizer"])
            assert got == train, (r["strategy"], r["rank"], got, "train tool:", train)
    print(f"{path}: {len(rows)} rows equal the formula" + (" and the train tool's" if train_dir else ""))


if __name__ == "__main__":
    main()
