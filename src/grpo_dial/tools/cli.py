"""The `grpo-dial` command: quick closed-form answers and any pipeline stage outside Snakemake.

grpo-dial plan --p 0.05 0.3 --fidelity 0.9        group size a prompt needs
grpo-dial --version                                 the installed version
grpo-dial stage theory_tables --output group_size=gs.csv ... --params params.yaml
grpo-dial bench --workload fixed free --steps 20     our GRPO step against TRL's GRPOTrainer
grpo-dial memory --configfile config/gpu.yaml        predicted peak GPU memory of a config
grpo-dial cluster-check --profile workflow/profiles/slurm   every job fits a node of sinfo
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

from grpo_dial.stages.registry import RULES, stage_for
from grpo_dial.tools.memory_check import memory, repo


def _version() -> str:
    """The installed distribution's version, else the package's own (a source checkout)."""
    from importlib import metadata

    try:
        return metadata.version("grpo-dial")
    except metadata.PackageNotFoundError:
        from grpo_dial import __version__

        return __version__


def _pairs(items: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--{what} expects NAME=PATH, got {item!r}")
        pairs[name] = value
    return pairs


def _strictly_between_0_and_1(values: list[float], flag: str) -> None:
    """A one-line ValueError naming the flag and the first value not in the open (0, 1)."""
    for value in values:
        if not 0 < value < 1:  # NaN fails the comparison too
            raise ValueError(f"{flag} must lie strictly between 0 and 1, got {value:g}")


def plan(args: argparse.Namespace) -> None:
    """Print, per pass rate, the group size for the fidelity target and the silent rate at G.
    Pass rates and the fidelity must lie in the open (0, 1) and G be >= 1: otherwise a one-line
    error naming the flag, before anything is printed."""
    import numpy as np

    from grpo_dial.core import theory

    _strictly_between_0_and_1(args.p, "--p")
    _strictly_between_0_and_1([args.fidelity], "--fidelity")
    if args.group_size < 1:
        raise ValueError(f"--group-size must be an integer >= 1, got {args.group_size}")
    p = np.asarray(args.p, dtype=float)
    eps = 1.0 - args.fidelity
    exact = theory.group_size_exact(p, eps)
    closed = theory.group_size_closed_form(p, eps)
    print(f"fidelity target {args.fidelity:g}; silent rate and fidelity at G = {args.group_size}")
    print(
        f"{'p':>6} {'G exact':>8} {'G* closed':>10} {'nearest':>8} {'ceil':>6} "
        f"{'fidelity':>9} {'silent':>7}"
    )
    for i, pi in enumerate(p):
        print(
            f"{pi:6.3f} {exact[i]:8d} {closed[i]:10.1f} "
            f"{theory.round_group_size(closed[i], 'nearest'):8d} "
            f"{theory.round_group_size(closed[i], 'ceil'):6d} "
            f"{theory.fidelity(pi, args.group_size):9.3f} "
            f"{theory.silent_rate(pi, args.group_size):7.3f}"
        )


def rule_params(rule: str, rules_dir: Path) -> list[str]:
    """The names of `rule`'s params: block in the workflow's rule files under `rules_dir` but
    `code` (the rerun trigger run_rule drops); [] when no file defines the rule."""
    for smk in sorted(rules_dir.glob("*.smk")):
        lines = smk.read_text(encoding="utf-8").splitlines()
        if f"rule {rule}:" not in lines:
            continue
        names, inside = [], False
        for line in lines[lines.index(f"rule {rule}:") + 1 :]:
            if line and not line[0].isspace():
                break  # the next rule or top-level statement
            indent, text = len(line) - len(line.lstrip()), line.strip()
            if indent == 4 and text.endswith(":"):
                inside = text == "params:"
            elif inside and indent == 8 and (name := re.match(r"(\w+)\s*=", text)):
                names.append(name.group(1))
        names = [name for name in names if name != "code"]  # a rerun trigger, never a stage's
        return names
    return []


class _Params(dict):
    """A stage's params: a name the stage reads and the file left out is one line naming every
    param of the rule the file lacks (a ValueError), not a KeyError's traceback."""

    def __init__(self, values: dict, rule: str, names: list[str]) -> None:
        super().__init__(values)
        self.rule, self.names = rule, names

    def __missing__(self, key: str) -> object:
        missing = [name for name in self.names if name not in self] or [key]
        if key not in missing:
            missing.append(key)
        raise ValueError(
            f"stage {self.rule}: missing params {', '.join(map(str, missing))}; give them in the "
            "--params file (the rule's params: in workflow/rules)"
        )


def stage(args: argparse.Namespace) -> None:
    """Run one rule's stage with explicit inputs, outputs and a YAML file of params; a param the
    stage reads and the file lacks is one line naming the rule's missing params."""

    params = {}
    if args.params:
        path = Path(args.params)
        if not path.exists():
            raise ValueError(f"params file not found: {path}")
        from grpo_dial.dag.config_checks import read_config_file  # the config files' reader

        problem, params = read_config_file(path)
        if problem is not None:
            raise ValueError(problem)  # tabs, a duplicate key, a tag, a file too large
        params = params or {}
        if not isinstance(params, dict):
            raise ValueError(f"params file {path} must hold a mapping of names to values")
    params = _Params(params, args.name, rule_params(args.name, repo() / "workflow" / "rules"))
    stage_for(args.name)(_pairs(args.input, "input"), _pairs(args.output, "output"), params)


def _fresh_out(directory: str) -> Path:
    """./grpo-dial-<run name>, or with -2, -3, ... when that exists: never the run's folder."""
    base = Path.cwd() / f"grpo-dial-{Path(directory).resolve().name or 'run'}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def diagnose(args: argparse.Namespace) -> None:
    """Import a logged run, print its key numbers, write tables and a figure to --out."""
    from grpo_dial.stages.external import (
        diagnose_directory,
        numbers_lines,
        run_estimator_line,
        write_estimator,
    )  # fmt: skip
    from grpo_dial.stages.manifest import now

    started = now()
    spec = {"format": args.format, "path": args.directory, "threshold": args.threshold}
    for key in ("reward_column", "correct_column", "correct_from", "tokenizer", "group_size",
                "advantage_column"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    if args.reward_column and len(args.reward_column) == 1:
        spec["reward_column"] = args.reward_column[0]
    if args.reward_weights is not None:
        spec["reward_weights"] = args.reward_weights
    if args.eval_steps is not None:
        spec["eval_steps"] = args.eval_steps[0] if len(args.eval_steps) == 1 else args.eval_steps
    if args.columns:
        spec["columns"] = _pairs(args.columns, "columns")
    out = Path(args.out) if args.out else _fresh_out(args.directory)
    params = {"window_fraction": args.window, "n_boot": args.n_boot, "seed": 0, "fidelity": 0.9}
    record = _diagnose_record(args, out)
    # the engine config first: a bad option stops the command before any table is written
    estimator, line, entry = run_estimator_line(
        args.directory, args.engine_config, args.engine or args.format, args.engine_version
    )
    summary, report, warnings, manifest = diagnose_directory(spec, out, params, record, started)
    write_estimator(estimator, out)
    from grpo_dial.dag.provenance import MANIFEST, header_lines

    print(f"- Diagnosed: {args.directory} (--format {args.format}) into {out}")
    print("\n".join(header_lines(manifest, "Engine config files", str(out / MANIFEST))))
    print(report)
    width = max(len(m) for m in summary["metric"])
    for metric, value in zip(summary["metric"], summary["value"], strict=True):
        print(f"{metric:<{width}}  {value:.4g}")
    for line in warnings:
        print(f"warning: {line}")
    print("estimator: " + line)
    for numbers in numbers_lines(out, entry):
        print(numbers)
    print(f"tables and diagnosis.png written to {out}")


def _diagnose_record(args: argparse.Namespace, out: Path) -> dict:
    """diagnose's provenance in dag.provenance.run_record's keys: its arguments as the config
    (--out as resolved), the --engine-config files, and the arguments that differ from their
    defaults as the changes."""
    from grpo_dial.dag.provenance import config_sources, settings_changes

    def arguments(namespace: argparse.Namespace) -> dict:
        return {k: v for k, v in vars(namespace).items() if k not in ("func", "out")}

    ours = arguments(args)
    defaults = arguments(build_parser().parse_args(["diagnose", args.directory, "--format",
                                                    args.format]))  # fmt: skip
    return {
        "config": {**ours, "out": str(out)},
        "config_files": config_sources(args.engine_config or [], Path.cwd()),
        "overrides": {},
        "changes": settings_changes(ours, defaults),
    }


def bench(args: argparse.Namespace) -> None:
    """Time our step against TRL's GRPOTrainer (and the pipeline checks); print a table."""
    from grpo_dial.tools.bench import BenchOptions, format_report, run_bench, to_json

    workloads = tuple(w for w in args.workload if w != "pipeline")
    options = BenchOptions(
        workloads=workloads,
        steps=args.steps,
        warmup=args.warmup,
        threads=args.threads,
        pipeline="pipeline" in args.workload,
        settings={"device": args.device, **({"policy": args.policy} if args.policy else {})},
    )
    result = run_bench(options, progress=not args.json)
    print(to_json(result) if args.json else format_report(result))


class _DefaultsHelp(argparse.HelpFormatter):
    """Each option's help ends with "(default: ...)", unless it has none (None, a flag's False,
    an empty list) or its help already says what happens without it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or (isinstance(default, list | tuple) and not default)
            or "default" in text
        ):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list | tuple) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo-dial", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_plan = sub.add_parser("plan", help="group size a prompt of pass rate p needs")
    p_plan.add_argument("--p", type=float, nargs="+", required=True, help="pass rates in (0, 1)")
    p_plan.add_argument(
        "--fidelity", type=float, default=0.9, help="target phi = 1 - eps, in (0, 1)"
    )
    p_plan.add_argument(
        "--group-size", type=int, default=8, help="G (>= 1) to report silent rate at"
    )
    p_plan.set_defaults(func=plan)
    p_diag = sub.add_parser(
        "diagnose", help="quick look at a run logged by TRL, verl or any trainer"
    )
    p_diag.add_argument(
        "directory", help="TRL output_dir, verl rollout_data_dir, or a generic file"
    )
    p_diag.add_argument(
        "--format",
        choices=("trl", "verl", "generic"),
        required=True,
        help="who wrote the run, one of %(choices)s",
    )
    p_diag.add_argument(
        "--out",
        help="where tables and the figure go (default ./grpo-dial-<run name>, fresh); in a "
        "reused folder the files an earlier diagnose wrote are deleted first, no other file",
    )
    p_diag.add_argument(
        "--reward-column", nargs="+", help="the logged reward column(s); several are summed"
    )
    p_diag.add_argument(
        "--reward-weights", type=float, nargs="+", help="one weight per --reward-column (TRL)"
    )
    p_diag.add_argument("--threshold", type=float, default=0.0, help="correct iff reward > this")
    p_diag.add_argument("--correct-column", help="a column stating correctness directly")
    p_diag.add_argument(
        "--correct-from", help="'reward' (reward > threshold) or a 0/1 column such as verl's acc"
    )
    p_diag.add_argument("--group-size", type=int, help="G (num_generations / rollout.n)")
    p_diag.add_argument(
        "--eval-steps", type=int, nargs="+", help="TRL: GRPOConfig.eval_steps, or the steps"
    )
    p_diag.add_argument(
        "--columns",
        nargs="*",
        metavar="OURS=THEIRS",
        help="generic format: step=, prompt=, response=, reward= column names",
    )
    p_diag.add_argument("--tokenizer", help="local tokenizer path: lengths in tokens")
    p_diag.add_argument(
        "--advantage-column",
        help="TRL / verl: the logged column of each response's advantage, fitted by every dial "
        "setting (default: 'advantage' when present; generic: --columns advantage=...)",
    )
    p_diag.add_argument(
        "--engine-config",
        nargs="+",
        help="config or log files naming the engine's options (loss_type, adv_estimator, ...); "
        "the run's folder is read too",
    )
    p_diag.add_argument(
        "--engine",
        choices=("trl", "verl", "openrlhf"),
        help="whose options to read when the files name several engines (default: --format)",
    )
    p_diag.add_argument(
        "--engine-version",
        help="the engine's release (e.g. 1.16.0): its defaults and semantics; default: the "
        "release the run's files name, else the newest",
    )
    p_diag.add_argument("--window", type=float, default=0.1, help="first/last fraction of steps")
    p_diag.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates")
    p_diag.set_defaults(func=diagnose)
    p_stage = sub.add_parser("stage", help="run one pipeline stage outside Snakemake")
    p_stage.add_argument("name", choices=RULES)
    p_stage.add_argument(
        "--input", nargs="*", default=[], metavar="NAME=PATH", help="the rule's inputs (none)"
    )
    p_stage.add_argument(
        "--output", nargs="*", default=[], metavar="NAME=PATH", help="the rule's outputs (none)"
    )
    p_stage.add_argument("--params", help="YAML file with the stage's params")
    p_stage.set_defaults(func=stage)
    p_bench = sub.add_parser("bench", help="our GRPO step against TRL's GRPOTrainer (needs trl)")
    p_bench.add_argument(
        "--workload",
        nargs="+",
        choices=("fixed", "free", "pipeline"),
        default=["fixed", "free"],
        help="fixed: 24 new tokens, EOS suppressed; free: the arithmetic task; pipeline: "
        "difficulty analysis on 215,608 prompts, snakemake -n per config, torch at DAG build",
    )
    p_bench.add_argument("--steps", type=int, default=20, help="timed steps per side")
    p_bench.add_argument("--warmup", type=int, default=3, help="untimed steps per side first")
    p_bench.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p_bench.add_argument("--device", default="cpu", help="torch device of both policies")
    p_bench.add_argument(
        "--policy", help="free workload: saved policy (default results/policy/base)"
    )
    p_bench.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p_bench.set_defaults(func=bench)
    p_mem = sub.add_parser("memory", help="predicted peak memory of a config's GPU jobs")
    p_mem.add_argument("--configfile", nargs="+", required=True, help="overlays, as snakemake's")
    p_mem.add_argument("--prompt-len", type=int, default=256, help="longest prompt in tokens")
    p_mem.set_defaults(func=memory)
    from grpo_dial.tools.cluster_check import add_command  # grpo-dial cluster-check

    add_command(sub)
    for subparser in sub.choices.values():
        subparser.formatter_class = _DefaultsHelp
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        args.func(args)
    except ValueError as error:
        print(f"grpo-dial: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
