"""Fit a cluster run to its cluster: threads follow the allocation, every job fits a node.

Three things go wrong on a real SLURM cluster without this (docs/cluster.md):
- threads: Snakemake caps a job's threads at `--cores`, which the default workflow profile sets to
  the *submitting* machine's cores (`cores: all`, loaded beside `--profile`, wins key by key); a
  2-core login node gave `train` 2 threads inside an 8-CPU allocation. Under a cluster profile
  (`jobs:` set, so Snakemake plans nodes, not local cores) every rule with a `cpus_per_task` in
  `set-resources` gets threads = cpus_per_task, and the cap is lifted to the largest request.
- fit: a job that asks for more CPUs, memory or GPUs than any node of its partition has is accepted
  by sbatch and pends forever (Reason=PartitionConfig). Before the first submission every job's
  request is compared with `sinfo`, and the run stops in one line naming the rule and the request.
- status: the executor plugin (2.4.0 and later) never notices a cancelled job through sacct, and
  squeue only works while MinJobAge outlasts its polling; the status command is chosen from
  `scontrol show config` and said in one line (grpo_dial.tools.cluster_status).

Standard library only at DAG build (inside the Snakefile); the CLI also reads the profile (yaml).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grpo_dial.tools.cluster_status import (
    choose_status_command,
    plugin_version,
    profile_status_settings,
    query_slurm_config,
    status_settings,
)

SINFO_FORMAT = "%N|%P|%c|%m|%G"  # node, partition (default marked *), CPUs, memory MB, GRES


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    default: bool  # the partition is the cluster's default
    cpus: int
    mem_mb: int
    gpus: dict[str, int]  # GPU type ("" when untyped) -> count


@dataclass(frozen=True)
class Request:
    rule: str
    cpus: int
    mem_mb: int | None
    gpus: int
    gpu_model: str | None
    partition: str | None

    def __str__(self) -> str:
        parts = [f"cpus_per_task={self.cpus}"]
        if self.mem_mb is not None:
            parts.append(f"mem_mb={self.mem_mb}")
        parts.append(f"gpu={self.gpus}" + (f" ({self.gpu_model})" if self.gpu_model else ""))
        if self.partition:
            parts.append(f"slurm_partition={self.partition}")
        return " ".join(parts)


def _number(text: str) -> int:
    """sinfo numbers: '20702', '20702+' (nodes differ), '64G' never appears with %m (MB)."""
    match = re.match(r"\d+", text.strip())
    return int(match.group()) if match else 0


def parse_gres(gres: str) -> dict[str, int]:
    """GPU counts by type in a GRES string: 'gpu:a100:4(S:0-1),gpu:2' -> {'a100': 4, '': 2}."""
    gpus: dict[str, int] = {}
    for item in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", item).strip().split(":")
        if fields[0] != "gpu":
            continue
        if len(fields) == 2:
            kind, count = "", fields[1]
        elif len(fields) >= 3:
            kind, count = fields[1], fields[2]
        else:
            kind, count = "", "1"
        gpus[kind] = gpus.get(kind, 0) + _number(count)
    return gpus


def parse_sinfo(text: str) -> list[Node]:
    """Nodes from `sinfo -h -N -o '%N|%P|%c|%m|%G'` (one line per node and partition)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, partition, cpus, mem, gres = (line.split("|") + [""] * 5)[:5]
        nodes.append(
            Node(
                name=name.strip(),
                partition=partition.strip().rstrip("*"),
                default=partition.strip().endswith("*"),
                cpus=_number(cpus),
                mem_mb=_number(mem),
                gpus=parse_gres(gres),
            )
        )
    return nodes


def _int(value) -> int | None:
    """A resource value as an int; None when unset or not yet known (a TBD string, a callable)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def job_request(rule: str, resources: dict, threads: int) -> Request:
    """What the SLURM executor submits for a job: -c (cpus_per_task, else threads), --mem,
    --gpus (gpu, or the count in gres 'gpu[:type]:n'), -p."""
    cpus = _int(resources.get("cpus_per_task")) or threads or 1
    mem = _int(resources.get("mem_mb"))
    per_cpu = _int(resources.get("mem_mb_per_cpu"))
    if mem is None and per_cpu is not None:
        mem = per_cpu * cpus
    gpus = _int(resources.get("gpu")) or 0
    model = resources.get("gpu_model") or None
    gres = resources.get("gres")
    if isinstance(gres, str) and gres.startswith("gpu"):
        from_gres = parse_gres(gres)
        gpus = max(gpus, sum(from_gres.values()))
        model = model or next((kind for kind in from_gres if kind), None)
    partition = resources.get("slurm_partition") or None
    return Request(rule, cpus, mem, gpus, str(model) if model else None, partition)


def misfit(request: Request, nodes: list[Node]) -> str | None:
    """None when some node of the request's partition holds it; else one line saying why not."""
    if request.partition:
        pool = [node for node in nodes if node.partition == request.partition]
        where = f"partition '{request.partition}'"
        if not pool:
            known = sorted({node.partition for node in nodes})
            return (
                f"rule {request.rule} asks for slurm_partition={request.partition}, which "
                f"sinfo does not list (partitions: {', '.join(known) or 'none'})"
            )
    else:
        pool = [node for node in nodes if node.default] or nodes
        where = f"the default partition '{pool[0].partition}'" if pool else "the cluster"
    if not pool:
        return f"rule {request.rule} asks for {request}, but sinfo lists no nodes"

    def gpus(node: Node) -> int:
        return node.gpus.get(request.gpu_model, 0) if request.gpu_model else sum(node.gpus.values())

    for node in pool:
        if (
            node.cpus >= request.cpus
            and gpus(node) >= request.gpus
            and (request.mem_mb is None or node.mem_mb >= request.mem_mb)
        ):
            return None
    largest = max(pool, key=lambda node: (gpus(node), node.cpus, node.mem_mb))
    kind = f"{request.gpu_model} " if request.gpu_model else ""
    return (
        f"rule {request.rule} asks for {request}, but no node of {where} has that "
        f"(largest: {largest.name} with {largest.cpus} CPUs, {largest.mem_mb} MB, "
        f"{gpus(largest)} {kind}GPUs); it would pend forever. Lower the request in the "
        f"profile (set-resources: {request.rule}) or use one sized to this cluster "
        f"(workflow/profiles/slurm_small; docs/cluster.md)"
    )


def query_sinfo() -> list[Node] | None:
    """This cluster's nodes, or None when sinfo is missing or fails (then nothing is checked)."""
    if shutil.which("sinfo") is None:
        return None
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", SINFO_FORMAT],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_sinfo(out)


def check_jobs(requests: list[Request], nodes: list[Node]) -> str | None:
    """The first misfit among the requests (one per rule is enough), or None."""
    seen = set()
    for request in requests:
        if request in seen:
            continue
        seen.add(request)
        if (problem := misfit(request, nodes)) is not None:
            return problem
    return None


def is_cluster_run(workflow) -> bool:
    """Snakemake plans jobs on nodes (`jobs:` given, as in a cluster profile), not local cores."""
    return workflow.global_resources["_nodes"].value is not None


def threads_follow_allocation(workflow) -> dict[str, int]:
    """Under a cluster profile: threads = cpus_per_task for every rule that sets it in
    set-resources, and --cores (Snakemake's thread cap, also passed to each job) = the largest
    such request. Returns {rule: threads} changed (empty for a local run)."""
    if not is_cluster_run(workflow):
        return {}
    settings = workflow.resource_settings
    cpus = {}
    for rule, resources in settings._parsed_overwrite_resources.items():
        if "cpus_per_task" in resources and (n := _int(resources["cpus_per_task"].value)):
            cpus[rule] = n
    if not cpus:
        return {}
    from snakemake.resources import Resource  # the snakemake running this workflow

    # a cached dict; what it holds reaches every spawned job as --set-threads
    threads = settings._parsed_overwrite_threads
    for rule, n in cpus.items():
        threads[rule] = Resource("_cores", n)
    cores = max(cpus.values())
    settings.cores = cores  # each job's `--cores`
    workflow.global_resources["_cores"] = cores
    return cpus


def install(workflow, error: type[Exception]) -> None:
    """Call once from the Snakefile (common.smk): threads now; before the first job is submitted
    (onstart; SLURM executor only, so local and dry runs are untouched) the status command that
    works here and the fit of every job's request."""
    threads_follow_allocation(workflow)

    def check(_log) -> None:
        plugin = getattr(workflow, "executor_plugin", None)
        if workflow.local_exec or plugin is None or plugin.name != "slurm":
            return
        settings = workflow.executor_settings
        init, requested = status_settings(settings)
        choice = choose_status_command(
            query_slurm_config(),
            init,
            requested,
            shutil.which("sacct") is not None,
            plugin_version(),
        )
        if choice.fatal:
            raise error(f"cluster check: {choice.note}")
        settings.status_command = choice.command  # the plugin reads it at every status query
        print(f"grpo-dial: {choice.note}", file=sys.stderr)
        nodes = query_sinfo()
        if not nodes:
            print("grpo-dial: sinfo gave no nodes; job requests not checked", file=sys.stderr)
            return
        requests = [
            job_request(
                job.rule.name,
                {k: getattr(v, "value", v) for k, v in job.resources.items()},
                job.threads,
            )
            for job in workflow.dag.needrun_jobs()
        ]
        if (problem := check_jobs(requests, nodes)) is not None:
            raise error(f"cluster check: {problem}")

    workflow.onstart(check)


# ------------------------------------------------------------------ grpo-dial cluster-check
# Job headers of a dry run: submitted to SLURM (True) or run on the login node (False)
JOB_HEADERS = {"rule": True, "checkpoint": True, "localrule": False, "localcheckpoint": False}


def dry_run_requests(stdout: str) -> list[Request]:
    """The request of every submitted job block that `snakemake -n` prints: a header
    (`rule NAME:`, `checkpoint NAME:`; local ones skipped), then `threads: N` only when N > 1,
    then `resources: k=v, ...`. Each block starts at 1 thread: a block without a threads line
    does not inherit the previous block's."""
    requests, rule, threads = [], None, 1
    for line in stdout.splitlines():
        line = line.strip()
        word, _, name = line.partition(" ")
        if word in JOB_HEADERS and name.endswith(":") and " " not in name:
            rule = name[:-1] if JOB_HEADERS[word] else None
            threads = 1
        elif line.startswith("threads:"):
            threads = int(line.split()[1])
        elif line.startswith("resources:") and rule is not None:
            pairs = [part.strip().split("=", 1) for part in line[len("resources:") :].split(",")]
            requests.append(job_request(rule, dict(p for p in pairs if len(p) == 2), threads))
            rule, threads = None, 1
    return requests


def cluster_check_command(args) -> None:
    """Every job of a dry run under the profile (all of them: --forceall) against the nodes."""
    if not Path("Snakefile").exists():
        raise ValueError("cluster-check runs snakemake: call it in the repository root")
    if args.sinfo:
        nodes = parse_sinfo(Path(args.sinfo).read_text())
        source = args.sinfo
    else:
        nodes, source = query_sinfo(), "sinfo"
    if not nodes:
        raise ValueError(
            f"no nodes from {source}; on a machine without SLURM give --sinfo FILE "
            f"(the cluster's `sinfo -h -N -o '{SINFO_FORMAT}'`)"
        )
    command = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--profile", args.profile]
    for flag, values in (("--configfile", args.configfile), ("--config", args.config)):
        if values:
            command += [flag, *values]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ValueError(f"the dry run under {args.profile} failed: {last}")
    requests = dry_run_requests(done.stdout)
    if (problem := check_jobs(requests, nodes)) is not None:
        raise ValueError(f"cluster check: {problem}")
    rules = len({request.rule for request in requests})
    print(
        f"cluster check: {len(requests)} jobs of {rules} rules under {args.profile} each fit "
        f"a node of {len(nodes)} ({source})"
    )
    if not args.sinfo and (config := query_slurm_config()) is not None:  # on the cluster
        init, requested = profile_status_settings(Path(args.profile))
        choice = choose_status_command(
            config, init, requested, shutil.which("sacct") is not None, plugin_version()
        )
        if choice.fatal:
            raise ValueError(f"cluster check: {choice.note}")
        print(f"cluster check: {choice.note}")


def add_command(sub) -> None:
    """`grpo-dial cluster-check` on the CLI's subparsers."""
    parser = sub.add_parser("cluster-check", help="does every job of a profile fit a node (sinfo)")
    parser.add_argument("--profile", required=True, help="e.g. workflow/profiles/slurm_small")
    parser.add_argument("--configfile", nargs="*", help="config overlays, as snakemake's")
    parser.add_argument("--config", nargs="*", metavar="KEY=VALUE", help="as snakemake's")
    parser.add_argument("--sinfo", help="a saved `sinfo -h -N -o '%%N|%%P|%%c|%%m|%%G'` (offline)")
    parser.set_defaults(func=cluster_check_command)
