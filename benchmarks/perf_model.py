"""The step-time model (perfmodel/) against published training throughput.

    python benchmarks/perf_model.py [--json] [--plot PATH] [--fit]

Reads benchmarks/data/published_steps.yaml (each row a published tokens/s/GPU with its source
and full layout; see benchmarks/data/SOURCES.md), turns each layout into the effective config
the framework would resolve (Megatron-LM's argument names, torchtitan's config keys), predicts
it with ``perfmodel.predict_step`` on the row's hardware and prints, per row, predicted vs
published; the median and p90 absolute error per split (calibrate / report), per source and per
GPU generation; and for each single-lever pair whether the predicted change goes the published
way (pairs whose published change is at least 5%). ``--plot`` draws predicted against published.
``--fit`` searches the factors marked ``fitted`` in registry/hardware/factors.yaml on the
calibration rows only (median absolute log error, coordinate descent) and prints the values to
write there. Targets: median <= 15%, p90 <= 30%, direction >= 85%.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.models import EffectiveConfig  # noqa: E402
from perfmodel import hardware as hardware_data  # noqa: E402
from perfmodel import part, predict_step  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_steps.yaml"
MODELS: dict[str, dict[str, Any]] = {
    name: dict(num_layers=L, hidden_size=h, num_attention_heads=a, ffn_hidden_size=f)
    for name, L, h, a, f in (
        ("llama3-8b", 32, 4096, 32, 14336),
        ("llama3-70b", 80, 8192, 64, 28672),
        ("llama3.1-405b", 126, 16384, 128, 53248),
    )
}
"""Llama 3 / 3.1 (Meta's model cards; torchtitan's llama3 flavors): SwiGLU, GQA 8, vocab 128256."""
FLAVORS = {"llama3-8b": "8B", "llama3-70b": "70B", "llama3.1-405b": "405B"}
TARGETS = {"median": 0.15, "p90": 0.30, "direction": 0.85}


def megatron_values(r: dict[str, Any]) -> dict[str, Any]:
    dp = r["gpus"] // (r["tp"] * r["pp"] * r["cp"])
    if r["model"] == "gpt3-175b":
        model: dict[str, Any] = dict(
            num_layers=96, hidden_size=12288, num_attention_heads=96, ffn_hidden_size=49152,
            padded_vocab_size=51200, attention_backend="unfused", normalization="LayerNorm",
        )  # fmt: skip
    else:
        model = dict(MODELS[r["model"]], group_query_attention=True, num_query_groups=8)
        model.update(swiglu=True)
        model.update(padded_vocab_size=128256, normalization="RMSNorm", add_bias_linear=False)
        model.update(kv_channels=128, untie_embeddings_and_output_weights=True)
    return {
        **model,
        "seq_length": r["seq"],
        "micro_batch_size": r["micro_batch"],
        "global_batch_size": r["global_batch"],
        "num_microbatches": r["global_batch"] // (r["micro_batch"] * dp),
        "tensor_model_parallel_size": r["tp"],
        "pipeline_model_parallel_size": r["pp"],
        "virtual_pipeline_model_parallel_size": r["vpp"] if r["vpp"] > 1 else None,
        "context_parallel_size": r["cp"],
        "data_parallel_size": dp,
        "world_size": r["gpus"],
        "sequence_parallel": r["tp"] > 1,
        "recompute_granularity": None if r["recompute"] == "none" else r["recompute"],
        "use_megatron_fsdp": bool(r["fsdp"]),
        "data_parallel_sharding_strategy": "optim_grads_params",
        "use_distributed_optimizer": r["distributed_optimizer"],
        "overlap_grad_reduce": r["overlap"],
        "overlap_param_gather": r["overlap"],
        "bf16": r["precision"] == "bf16",
        "fp16": r["precision"] == "fp16",
        "fp8": "hybrid" if r["fp8"] != "none" else None,
        "fp8_recipe": r["fp8"],
        "tp_comm_overlap": r["tp_comm_overlap"],
    }


def torchtitan_values(r: dict[str, Any]) -> dict[str, Any]:
    dp = r["fsdp"] or 1
    local = r["global_batch"] // dp if r["pp"] > 1 else r["micro_batch"]
    quant = {"none": [], "tensorwise": ["Float8Linear [tensorwise]"]}
    return {
        "module": "llama3",
        "model_spec.flavor": FLAVORS[r["model"]],
        "model_spec.quantization": quant.get(r["fp8"], [f"Float8Linear [{r['fp8']}]"]),
        "world_size": r["gpus"],
        "training.seq_len": r["seq"],
        "training.local_batch_size": local,
        "gradient_accumulation_steps": r["global_batch"] // (local * dp),
        "parallelism.data_parallel_shard_degree": dp,
        "parallelism.tensor_parallel_degree": r["tp"],
        "parallelism.pipeline_parallel_degree": r["pp"],
        "parallelism.pipeline_parallel_microbatch_size": r["micro_batch"],
        "parallelism.pipeline_parallel_schedule": r["schedule"],
        "parallelism.context_parallel_degree": r["cp"],
        "activation_checkpoint": r["recompute"],
        "compile.enable": r["compile"],
        "compile.enable_async_tensor_parallel": r["async_tp"],
        "training.mixed_precision_param": "bfloat16",
        "training.mixed_precision_reduce": "float32",
    }


def effective_of(r: dict[str, Any]) -> EffectiveConfig:
    values = megatron_values(r) if r["framework"] == "megatron" else torchtitan_values(r)
    return EffectiveConfig(
        framework=r["framework"], framework_version="published", values=values, devices=r["gpus"]
    )


def predicted(r: dict[str, Any]) -> float:
    return predict_step(effective_of(r), r["hardware"]).tokens_per_s_per_device


def _p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.9 * len(s)) - 1)]


def evaluate(rows: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> dict[str, Any]:
    results = []
    for r in rows:
        p = predicted(r)
        results.append({**r, "predicted": p, "error": p / r["published"] - 1})
    by_id = {x["id"]: x for x in results}
    groups: dict[str, list[float]] = {}
    for x in results:
        gen = part(x["hardware"]).generation
        keys = [f"split {x['split']}", f"source {x['source']}", f"generation {gen}", "all"]
        if x["split"] == "report":
            keys += [f"report: source {x['source']}", f"report: generation {gen}"]
        for key in keys:
            groups.setdefault(key, []).append(abs(x["error"]))
    stats = {
        k: {"rows": len(v), "median": statistics.median(v), "p90": _p90(v)}
        for k, v in sorted(groups.items())
    }
    checked = []
    for pr in pairs:
        a, b = by_id[pr["a"]], by_id[pr["b"]]
        published = b["published"] / a["published"] - 1
        model = b["predicted"] / a["predicted"] - 1
        agree = (published > 0) == (model > 0)
        held_out = a["split"] == b["split"] == "report"
        checked.append(
            {**pr, "published": published, "predicted": model, "agree": agree, "report": held_out}
        )
    counted = [c for c in checked if abs(c["published"]) >= 0.05]
    held = [c for c in counted if c["report"]]
    return {
        "rows": results,
        "stats": stats,
        "pairs": checked,
        "direction": _share(counted),
        "pairs_counted": len(counted),
        "direction_report": _share(held),
        "pairs_report": len(held),
    }


def _share(pairs: list[dict[str, Any]]) -> float:
    return sum(c["agree"] for c in pairs) / len(pairs) if pairs else float("nan")


def print_report(out: dict[str, Any]) -> None:
    print(f"{'row':38} {'hardware':19} {'split':9} {'published':>9} {'predicted':>9} {'error':>7}")
    for x in out["rows"]:
        print(
            f"{x['id']:38} {x['hardware']:19} {x['split']:9} {x['published']:9.1f} "
            f"{x['predicted']:9.1f} {x['error']:+7.1%}"
        )
    print(f"\n{'group':32} {'rows':>4} {'median |err|':>12} {'p90 |err|':>9}")
    for k, s in out["stats"].items():
        print(f"{k:32} {s['rows']:4d} {s['median']:12.1%} {s['p90']:9.1%}")
    print("\nsingle-lever pairs (published change -> predicted change):")
    for c in out["pairs"]:
        mark = "same way" if c["agree"] else "WRONG WAY"
        small = "" if abs(c["published"]) >= 0.05 else "  (under 5%: not counted)"
        print(f"  {c['a']} -> {c['b']} [{c['lever']}]: {c['published']:+.1%} -> "
              f"{c['predicted']:+.1%} {mark}{small}")  # fmt: skip
    rep = out["stats"].get("split report", out["stats"]["all"])
    print(
        f"\nreport rows: median {rep['median']:.1%} (target <= {TARGETS['median']:.0%}), "
        f"p90 {rep['p90']:.1%} (target <= {TARGETS['p90']:.0%}); direction "
        f"{out['direction']:.0%} of {out['pairs_counted']} pairs (target >= "
        f"{TARGETS['direction']:.0%}); on pairs of report rows only "
        f"{out['direction_report']:.0%} of {out['pairs_report']}"
    )


def plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 6))
    ax = fig.add_subplot()
    marks = {"calibrate": "o", "report": "^"}
    for source, color in (("torchtitan", "C0"), ("megatron-bridge", "C1"), ("megatron-lm", "C2")):
        for split, marker in marks.items():
            xs = [x for x in out["rows"] if x["source"] == source and x["split"] == split]
            ax.scatter([x["published"] for x in xs], [x["predicted"] for x in xs], c=color,
                       marker=marker, label=f"{source} ({split})", s=22)  # fmt: skip
    lo, hi = 10, 60000
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.plot([lo, hi], [lo * 1.3, hi * 1.3], "k:", lw=0.6)
    ax.plot([lo, hi], [lo / 1.3, hi / 1.3], "k:", lw=0.6)
    ax.set(xscale="log", yscale="log", xlabel="published tokens/s/GPU")
    ax.set(ylabel="predicted tokens/s/GPU", title="perfmodel vs published (dotted: ±30%)")
    ax.legend(fontsize=7)
    fig.savefig(str(path), dpi=110, bbox_inches="tight")


def fit(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Coordinate descent over the ``fitted`` factors on the calibration rows."""
    calibration = [r for r in rows if r["split"] == "calibrate"]
    factors = hardware_data.load_factors().factors
    names = [n for n, f in factors.items() if f.origin == "fitted"]

    def loss() -> float:
        errors = [abs(math.log(predicted(r) / r["published"])) for r in calibration]
        return statistics.median(errors) + statistics.fmean(errors)

    for _ in range(4):
        for name in names:
            best = (loss(), factors[name].value)
            for step in (0.8, 0.9, 0.95, 1.05, 1.1, 1.25):
                trial = round(best[1] * step, 3)
                factors[name] = factors[name].model_copy(update={"value": trial})
                current = loss()
                if current < best[0]:
                    best = (current, trial)
            factors[name] = factors[name].model_copy(update={"value": best[1]})
    return {n: factors[n].value for n in names}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args()
    data = yaml.safe_load(DATA.read_text())
    if args.fit:
        for name, value in fit(data["rows"]).items():
            print(f"{name}: {value}")
        return 0
    out = evaluate(data["rows"], data["pairs"])
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    else:
        print_report(out)
    if args.plot:
        plot(out, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
