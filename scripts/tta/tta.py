#!/usr/bin/python3
"""Time to accuracy: one trainer of mpi_examples/, under each network profile of scripts/netem.sh,
with each implementation of the gradient sum; or (--ablation) OptiReduce's fill policy and
Hadamard setting under injected loss. Run through scripts/tta.sh; see its --help.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
import runner  # noqa: E402

SHORT = {"steps": 200, "eval_every": 20, "target": 80.0, "reps": 1, "timeout": 900}
FULL = {"steps": 1500, "eval_every": 50, "target": 85.0, "reps": 3, "timeout": 3600}
ABLATION_SHORT = {"steps": 200, "eval_every": 20, "target": 80.0, "reps": 1, "timeout": 900}
ABLATION_FULL = {"steps": 800, "eval_every": 40, "target": 84.0, "reps": 2, "timeout": 3600}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="scripts/tta.sh", description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full comparison (hours): longer runs, 3 repetitions")
    p.add_argument("--ablation", action="store_true",
                   help="instead: OPTIREDUCE_FILL x OPTIREDUCE_HADAMARD under OPTIREDUCE_FAULT_DROP (no namespace)")
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"),
                   help="build with lib/liboptireduce.so and bin/train_mlp (default: build, or $BUILD_DIR)")
    p.add_argument("--trainer", choices=["torch", "cpp"], default="torch",
                   help="torch: mpi_examples/train_torch.py; cpp: build/bin/train_mlp (no Gloo)")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp", help="torch trainer's model")
    p.add_argument("--hidden", type=int, default=1024, help="MLP hidden units (784-H-10)")
    p.add_argument("--profiles", default="clean,tail-3,loss-1,loss-3",
                   help="netem.sh profiles, comma-separated (a profile netem.sh rejects is skipped)")
    p.add_argument("--impls", default="openmpi,gloo,optireduce-ucx,optireduce-udp,optireduce-ofi",
                   help="comma-separated; unavailable ones are skipped with a message")
    p.add_argument("--steps", type=int, help="training steps: the fixed budget")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--target", type=float, help="target test accuracy, percent")
    p.add_argument("--reps", type=int, help="repetitions of every run (medians are reported)")
    p.add_argument("--timeout", type=int, help="seconds after which one run is killed")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test images (0: all)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--drops", default="0.01,0.05,0.10", help="--ablation: OPTIREDUCE_FAULT_DROP values")
    p.add_argument("--fills", default="zero,local", help="--ablation: OPTIREDUCE_FILL values")
    p.add_argument("--hadamards", default="off,on,auto", help="--ablation: OPTIREDUCE_HADAMARD values")
    p.add_argument("--out", help="results directory (default results/tta, results/tta-full or results/tta-ablation)")
    p.add_argument("--note", action="append", default=[], help="a line for the notes of the results (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    a = p.parse_args(argv)
    preset = (ABLATION_FULL if a.full else ABLATION_SHORT) if a.ablation else (FULL if a.full else SHORT)
    for key, value in preset.items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    a.build_dir = os.path.abspath(a.build_dir if os.path.isabs(a.build_dir) else os.path.join(runner.REPO, a.build_dir))
    if a.out is None:
        a.out = os.path.join("results", "tta-ablation" if a.ablation else "tta-full" if a.full else "tta")
    a.out = os.path.abspath(a.out if os.path.isabs(a.out) else os.path.join(runner.REPO, a.out))
    for name in ("steps", "eval_every", "reps", "timeout", "ranks", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return a


def machine():
    load = os.getloadavg()
    cores = os.cpu_count()
    return {"host": platform.node(), "cores": cores, "load_average": list(load),
            "describe": f"{cores} cores, load average {load[0]:.1f} at the start (shared with other work: "
                        "figures are comparable within this run only)"}


def git_head():
    r = subprocess.run(["git", "-C", runner.REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def check_prerequisites(args):
    missing = []
    if not os.path.exists(runner.library(args.build_dir)):
        missing.append(runner.library(args.build_dir))
    if args.trainer == "cpp" and not os.path.exists(os.path.join(args.build_dir, "bin", "train_mlp")):
        missing.append(os.path.join(args.build_dir, "bin", "train_mlp"))
    if missing:
        sys.exit(f"tta: not found: {', '.join(missing)}; build first: "
                 f"cmake -S {runner.REPO} -B {args.build_dir} && cmake --build {args.build_dir} -j2")
    if not os.path.isdir(args.data):
        sys.exit(f"tta: no Fashion-MNIST in {args.data}: apt-get install dataset-fashion-mnist (scripts/setup.sh)")
    if args.trainer == "torch":
        r = subprocess.run([runner.PYTHON, "-c", "import torch, mpi4py, numpy"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"tta: {runner.PYTHON} cannot import torch, mpi4py and numpy: apt-get install python3-torch "
                     f"python3-mpi4py python3-numpy\n{r.stderr.strip()[-300:]}")


def plan_tta(args, notes):
    profiles = []
    for profile in [p for p in args.profiles.split(",") if p]:
        ok, why = (True, "") if args.dry_run else runner.profile_supported(profile)
        if ok:
            profiles.append(profile)
        else:
            notes.append(f"profile {profile} skipped: {why}")
            print(f"tta: skipping profile {profile}: {why}", flush=True)
    impls = []
    for impl in [i for i in args.impls.split(",") if i]:
        if impl not in runner.IMPLEMENTATIONS:
            sys.exit(f"tta: unknown implementation {impl}; known: {', '.join(runner.IMPLEMENTATIONS)}")
        why = ""
        if impl in ("gloo", "backend-udp") and args.trainer != "torch":
            why = f"{impl} needs the torch trainer"
        elif impl == "optireduce-ofi" and not args.dry_run:
            ok, why = runner.ofi_available(args, args.out)
            why = "" if ok else f"OPTIREDUCE_TRANSPORT=ofi not usable in this build ({why})"
        if why:
            notes.append(f"{impl} skipped: {why}")
            print(f"tta: skipping {impl}: {why}", flush=True)
        else:
            impls.append(impl)
    jobs = []
    for rep in range(args.reps):
        # The profile order rotates from one repetition to the next, so a slow phase of the shared
        # machine does not always hit the same profile.
        order = profiles[rep % len(profiles):] + profiles[:rep % len(profiles)] if profiles else []
        for profile in order:
            for impl in impls:
                jobs.append({"profile": profile, "impl": impl, "rep": rep, "env": {}})
    return profiles, impls, jobs


def plan_ablation(args):
    jobs = [{"profile": "none", "impl": "openmpi", "rep": rep, "env": {}} for rep in range(args.reps)]
    for rep in range(args.reps):
        for drop in args.drops.split(","):
            for fill in args.fills.split(","):
                for had in args.hadamards.split(","):
                    # LOSS_BUDGET=1: the loss is really applied instead of sending calls back to
                    # exact mode (the budget's own fallback would hide what fill and Hadamard do).
                    env = {"OPTIREDUCE_FAULT_DROP": drop, "OPTIREDUCE_FILL": fill, "OPTIREDUCE_HADAMARD": had,
                           "OPTIREDUCE_LOSS_BUDGET": "1", "OPTIREDUCE_FAULT_SEED": str(1 + rep)}
                    jobs.append({"profile": "none", "impl": "optireduce-ucx", "rep": rep, "env": env,
                                 "drop": drop, "fill": fill, "hadamard": had})
    return ["none"], ["openmpi", "optireduce-ucx"], jobs


def main(argv):
    args = parse_args(argv)
    check_prerequisites(args)
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    notes = list(args.note)
    if args.ablation:
        profiles, impls, jobs = plan_ablation(args)
    else:
        profiles, impls, jobs = plan_tta(args, notes)
    if not jobs:
        sys.exit("tta: nothing to run (no profile or implementation left)")
    model = f"{args.model}" + (f"-{args.hidden}" if args.model == "mlp" or args.trainer == "cpp" else "")
    describe = (f"{'train_torch.py' if args.trainer == 'torch' else 'train_mlp'} {model} on Fashion-MNIST, "
                f"{args.ranks} ranks x batch {args.batch}, lr {args.lr}, {args.steps} steps, evaluation every "
                f"{args.eval_every} steps (not counted), target {args.target:g} %, {args.reps} repetition(s)")
    if args.ablation:
        describe += ("; OptiReduce bounded over UCX/TCP on the plain loopback, chunks discarded on receipt with "
                     "OPTIREDUCE_FAULT_DROP, OPTIREDUCE_LOSS_BUDGET=1")
    results = {"title": "OptiReduce: fill policy and Hadamard under injected loss" if args.ablation
               else "OptiReduce: time to accuracy", "mode": "ablation" if args.ablation else "tta",
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": machine(), "git_head": git_head(), "profiles": profiles, "implementations": impls, "notes": notes,
               "config": {k: v for k, v in vars(args).items() if k not in ("dry_run", "note")} | {"describe": describe},
               "runs": []}
    results_path = os.path.join(args.out, "results.json")
    print(f"tta: {len(jobs)} runs: {describe}", flush=True)
    print(f"tta: results in {args.out}", flush=True)

    started = time.monotonic()
    for i, job in enumerate(jobs, 1):
        tag = "-".join([job["profile"], job["impl"]] + [job[k] for k in ("drop", "fill", "hadamard") if k in job]
                       + [f"r{job['rep']}"])
        run_dir = os.path.join(args.out, "runs", tag)
        os.makedirs(run_dir, exist_ok=True)
        json_path = os.path.join(run_dir, "train.jsonl")
        for stale in ("train.jsonl", "netem.json"):
            if os.path.exists(os.path.join(run_dir, stale)):
                os.remove(os.path.join(run_dir, stale))
        cmd = runner.job_command(args.trainer, job["impl"], args, json_path, tag, job["env"])
        if job["profile"] != "none":
            cmd = runner.netem_wrap(job["profile"], os.path.join(run_dir, "netem.json"), cmd)
        elapsed = time.monotonic() - started
        eta = "" if i == 1 else f", about {elapsed / (i - 1) * (len(jobs) - i + 1) / 60:.0f} min left"
        print(f"[{i}/{len(jobs)}] {tag} ({elapsed / 60:.1f} min elapsed{eta})", flush=True)
        if args.dry_run:
            print("    " + runner.describe_cmd(cmd))
            continue
        rc, seconds = runner.run(cmd, os.path.join(run_dir, "log.txt"), args.timeout, f"{job['impl']:>15}")
        start, evals, end = runner.read_records(json_path)
        netem = None
        if os.path.exists(os.path.join(run_dir, "netem.json")):
            with open(os.path.join(run_dir, "netem.json")) as f:
                netem = json.load(f)
        entry = {k: v for k, v in job.items()} | {"tag": tag, "rc": rc, "seconds": seconds, "start": start,
                                                  "evals": evals, "end": end, "netem": netem}
        results["runs"].append(entry)
        if rc != 0:
            print(f"    {tag}: FAILED (exit {rc}{', timed out' if rc == 124 else ''}); see {run_dir}/log.txt",
                  flush=True)
        results["machine"]["load_average_end"] = list(os.getloadavg())
        with open(results_path, "w") as f:  # after every run: an interrupted sweep keeps what it had
            json.dump(results, f, indent=1)
    if args.dry_run:
        return 0
    table, pngs = report.write(results, args.out)
    print()
    print(table)
    print()
    print(f"tta: table {os.path.join(args.out, 'table.md')}; data {results_path}")
    for png in pngs:
        print(f"tta: plot {png}")
    failed = [r["tag"] for r in results["runs"] if r["rc"] != 0]
    if failed:
        print(f"tta: {len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if len(failed) == len(results["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
