"""``make gpu-smoke``: the first real GPU run, in one command, on a machine with an NVIDIA GPU.

    python -m benchmarks.gpu_smoke --out gpu-smoke.json [--workdir runs/gpu-smoke]

1. ``attune train-env`` builds the Megatron-LM and torchtitan training environments (pins below);
2. ``attune doctor`` checks each recipe on this machine;
3. a tiny Megatron-LM GPT (2 layers, mock data) and a tiny torchtitan model (``debugmodel``, a
   tokenizer and a dataset made here, nothing downloaded at run time) train for 20 steps on 1
   GPU, and on 2 when the machine has 2 (``attune bench``, the second one profiled);
4. a 3-trial campaign with the rules agent on each recipe (``attune tune``);
5. a summary (versions, GPU, tokens/s, statuses, profile split) on stdout and in ``--out``.

Every step is attune's own command line, run as a user would; a failing step is recorded with
its exit status and the rest still run. Without an NVIDIA GPU it stops at once, exit 2: it
never pretends. Building the environments downloads CUDA wheels (several GB) from the package
index and Megatron-LM from GitHub; set ATTUNE_TRAIN_PYTHON and ATTUNE_MEGATRON_PATH to use an
environment the machine already has.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from runners.versions import PINS as VERSION_SET

ROOT = Path(__file__).resolve().parent.parent
ATTUNE = [sys.executable, "-m", "bot.cli"]
STEPS, WARMUP = 20, 5

PINS = {
    "torch": VERSION_SET.torch,
    "cuda": VERSION_SET.cuda,
    "megatron": VERSION_SET.megatron_tag,
    "torchtitan": VERSION_SET.torchtitan,
}
"""attune's one version set (``runners.versions``), as ``attune train-env``'s flags."""


def gpus() -> list[dict[str, str]]:
    """The NVIDIA GPUs ``nvidia-smi`` lists (name, compute capability, memory); [] when none."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = "--query-gpu=name,compute_cap,memory.total"
    done = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
    )
    if done.returncode != 0:
        return []
    rows = [line.split(", ") for line in done.stdout.strip().splitlines() if line.strip()]
    return [{"name": r[0], "compute_cap": r[1], "memory": r[2]} for r in rows if len(r) == 3]


def megatron_recipe(devices: int, arch: str) -> dict[str, Any]:
    """A 2-layer GPT on mock data: Megatron-LM's own flags, bf16, TE layers."""
    args = ["--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "8"]
    args += ["--ffn-hidden-size", "2048", "--seq-length", "1024"]
    args += ["--max-position-embeddings", "1024", "--position-embedding-type", "rope"]
    args += ["--swiglu", "--normalization", "RMSNorm", "--disable-bias-linear", "--bf16"]
    args += ["--micro-batch-size", "4", "--global-batch-size", str(8 * devices)]
    args += ["--lr", "0.0003", "--min-lr", "0.00003", "--lr-decay-style", "cosine"]
    args += ["--train-iters", "1000", "--clip-grad", "1.0", "--weight-decay", "0.1"]
    args += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "32000"]
    args += ["--split", "99,1,0", "--eval-iters", "0", "--seed", "1234"]
    return {
        "framework": "megatron",
        "name": f"tiny-gpt-{devices}gpu",
        "world_size": devices,
        "gpu_arch": arch,
        "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
        "args": args,
    }


def torchtitan_recipe(devices: int) -> dict[str, Any]:
    return {
        "framework": "torchtitan",
        "name": f"debugmodel-{devices}gpu",
        "module": "llama3",
        "config": "llama3_debugmodel",
        "world_size": devices,
        "overrides": [
            "--training.local_batch_size",
            "4",
            "--training.global_batch_size",
            str(4 * devices),
            "--training.seq_len",
            "1024",
        ],
    }


def make_local_data(folder: Path) -> tuple[Path, Path]:
    """A BPE tokenizer of 2,000 tokens (debugmodel's vocabulary is 2048) trained here with the
    ``tokenizers`` package torchtitan depends on, and a JSON dataset of generated text in the
    shape of c4 (a ``text`` field): nothing is downloaded when the runs start."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    words = [f"w{i}{chr(97 + i % 26)}" for i in range(3000)]
    lines = [" ".join(words[(i * 7 + k * 13) % 3000] for k in range(200)) for i in range(2000)]
    data = folder / "dataset"
    data.mkdir(parents=True, exist_ok=True)
    with (data / "train.json").open("w") as out:
        out.writelines(json.dumps({"text": line}) + "\n" for line in lines)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>"])
    tokenizer.train_from_iterator(lines, trainer=trainer)
    assets = folder / "tokenizer"
    assets.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(assets / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (assets / "tokenizer_config.json").write_text(json.dumps(config))
    return assets, data


def run(step: str, argv: list[str], log: list[dict[str, Any]], env: dict[str, str]) -> int:
    """One attune command; its exit status and time go to ``log``."""
    print(f"[gpu-smoke] {step}: {' '.join(argv[2:])}", flush=True)
    start = time.monotonic()
    code = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
    log.append({"step": step, "exit": code, "seconds": round(time.monotonic() - start, 1)})
    return code


def settings_from(github_env: Path, env: dict[str, str]) -> None:
    """What ``attune train-env`` handed on (``NAME=value`` lines) into ``env``."""
    if github_env.is_file():
        for line in github_env.read_text().splitlines():
            name, _, value = line.partition("=")
            env[name] = value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("gpu-smoke.json"))
    p.add_argument("--workdir", type=Path, default=Path("runs/gpu-smoke"))
    args = p.parse_args(argv)
    found = gpus()
    if not found:
        print(
            "gpu-smoke needs a machine with at least one NVIDIA GPU (nvidia-smi lists none); "
            "nothing was run",
            file=sys.stderr,
        )
        return 2
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    arch = "sm" + found[0]["compute_cap"].replace(".", "")
    counts = [1, 2] if len(found) >= 2 else [1]
    assets, data = make_local_data(work / "local")
    env = {
        **os.environ,
        "ATTUNE_TORCHTITAN_ASSETS": str(assets),
        "ATTUNE_TORCHTITAN_DATASET": str(data),
        "HF_HUB_OFFLINE": "1",
    }
    log: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for framework in ("megatron", "torchtitan"):
        fw_env = dict(env)
        for n in counts:
            body = megatron_recipe(n, arch) if framework == "megatron" else torchtitan_recipe(n)
            recipe = work / f"{body['name']}.yaml"
            recipe.write_text(json.dumps(body, indent=2))  # JSON is YAML
            if n == counts[0]:
                handed = work / f"{framework}.env"
                pins = [f"--{k}={v}" for k, v in PINS.items()]
                cache = ["--cache", str(work / "cache"), "--github-env", str(handed)]
                run(
                    f"train-env {framework}",
                    [*ATTUNE, "train-env", str(recipe), *pins, *cache],
                    log,
                    fw_env,
                )
                settings_from(handed, fw_env)
                run(f"doctor {framework}", [*ATTUNE, "doctor", str(recipe)], log, fw_env)
            for profile in (False, True) if n == counts[-1] else (False,):
                out = work / f"{body['name']}{'-profiled' if profile else ''}.json"
                bench = [
                    *ATTUNE,
                    "bench",
                    str(recipe),
                    "--steps",
                    str(STEPS),
                    "--warmup",
                    str(WARMUP),
                    "--out",
                    str(out),
                    "--workdir",
                    str(out.with_suffix("")),
                ]
                code = run(
                    f"bench {body['name']}",
                    [*bench, *(["--profile"] if profile else [])],
                    log,
                    fw_env,
                )
                result = json.loads(out.read_text()) if out.is_file() else {}
                results.append(
                    {
                        "recipe": body["name"],
                        "devices": n,
                        "profiled": profile,
                        "exit": code,
                        "status": result.get("status"),
                        "tokens_per_second_per_device": result.get("score"),
                        "step1_loss": result.get("step1_loss"),
                        "profile": result.get("profile"),
                    }
                )
        campaign = work / f"tune-{framework}"
        run(
            f"tune {framework}",
            [
                *ATTUNE,
                "tune",
                str(work / f"{body['name']}.yaml"),
                "--agent",
                "rules",
                "--max-trials",
                "3",
                "--steps",
                str(STEPS),
                "--warmup",
                str(WARMUP),
                "--workdir",
                str(campaign),
            ],
            log,
            fw_env,
        )
    summary = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpus": found,
        "pins": PINS,
        "runs": results,
        "steps": log,
    }
    text = json.dumps(summary, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    ok = all(r["status"] == "ok" for r in results) and all(s["exit"] == 0 for s in log)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
