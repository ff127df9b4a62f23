"""`make mutate`: mutation testing (mutmut 3) of chosen modules within a time budget.

Modules: --modules, or the src/grpo_dial files changed since the merge base with --base.
Each module is tested by the test files of its mirror folder (tests/core for
src/grpo_dial/core/...; also tests/engines for core/) that import it or a module of its folder
that imports it; mutmut then runs, per mutant, only those of them that call the mutated
function. The work happens in a scratch copy of the repository (mutmut writes mutants/ there).
Mutants are run in rounds, each a shuffled, even share of every module's mutants, until all are
done or the budget (seconds) is spent; an interrupted round keeps what finished.

Score = killed / (killed + survived), where a timeout counts as killed, a mutant no selected test
calls counts as survived, and the mutants listed in docs/mutation-equivalents.md are excluded
when the entry's diff is the diff its name makes now (--check-equivalents checks every entry)."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from fnmatch import fnmatch
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "src/grpo_dial"
EQUIVALENTS = REPO / "docs" / "mutation-equivalents.md"
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
SURVIVED = {"survived", "no tests"}
# mutmut 3.8's exit-code meanings (mutmut/stats.py)
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "caught by type check",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    -9: "segfault",
    2: "interrupted",
    None: "not checked",
}
# test folders that exercise a package besides its mirror: tests/engines holds verl's own
# estimators and losses against core's
EXTRA_TESTS = {"core": ("engines",)}
PYTEST_ARGS = ["-m", "not workflow and not slurm", "-p", "no:cacheprovider"]


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout


def changed_modules(base: str) -> list[str]:
    """The package's .py files changed (committed or not) since the merge base with `base`."""
    try:
        merge_base = git("merge-base", base, "HEAD").strip()
    except subprocess.CalledProcessError:
        sys.exit(f"mutate: base ref {base!r} not found (set BASE=<ref>)")
    names = git("diff", "--name-only", merge_base).split()
    return [n for n in names if n.startswith(PACKAGE + "/") and n.endswith(".py")]


def check_module(path: str) -> str:
    if not (path.startswith(PACKAGE + "/") and path.endswith(".py")):
        sys.exit(f"mutate: {path!r} is not a .py file under {PACKAGE}/")
    if not (REPO / path).is_file():
        sys.exit(f"mutate: module {path!r} not found")
    return path


def dotted(module: str) -> str:
    return module[len("src/") : -len(".py")].replace("/", ".")


def uses(module: str) -> re.Pattern:
    """Matches an import of `module` (by dotted name, from its package, or relative)."""
    name = dotted(module)
    parent, stem = name.rsplit(".", 1)
    return re.compile(
        rf"{re.escape(name)}\b|from ({re.escape(parent)}|\.) import (\([^)]*|[^\n]*)\b{stem}\b"
        rf"|from \.{stem} import"
    )


def importers_of(module: str) -> list[str]:
    """`module` and every module of its own folder that imports it, directly or through another
    (core/advantage.py imports core/estimators.py, which imports core/engine_estimators.py)."""
    found = [module]
    siblings = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / module).parent.glob("*.py"))
        if p.name != "__init__.py"
    ]
    for m in found:
        pattern = uses(m)
        found += [s for s in siblings if s not in found and pattern.search((REPO / s).read_text())]
    return found


def tests_for(module: str) -> list[str]:
    """Test files of the module's mirror folder (and of the folders in EXTRA_TESTS for its
    package: tests/engines for core/) named test_<stem>*, or importing the module or a module of
    its own folder that imports it (dag/plan.py for dag/arms.py)."""
    parts = Path(module).relative_to(PACKAGE).parts
    folder = REPO / "tests" / Path(*parts[:-1])
    while not folder.is_dir():
        folder = folder.parent
    folders = [folder] + [REPO / "tests" / f for f in EXTRA_TESTS.get(parts[0], ())]
    stem = Path(module).stem
    patterns = [uses(m) for m in importers_of(module)]
    found = []
    for test in sorted(t for f in folders for t in f.rglob("test_*.py")):
        if "workflow" in test.relative_to(REPO / "tests").parts:
            continue
        text = test.read_text()
        if test.name.startswith(f"test_{stem}") or any(p.search(text) for p in patterns):
            found.append(str(test.relative_to(REPO)))
    return found


class Equivalent(NamedTuple):
    """An entry of docs/mutation-equivalents.md: why the mutant is equivalent, and its diff (the
    removed and added lines, each as `-text` / `+text` with blanks collapsed), or None."""

    why: str
    diff: tuple[str, ...] | None


ENTRY = re.compile(r"^\s*[-|]\s*`(grpo_dial\.[\w.]+__mutmut_\d+)`\s*[:|]\s*(.*)$")


def diff_line(line: str) -> str:
    return line[0] + " ".join(line[1:].split())


def equivalents(text: str | None = None) -> dict[str, Equivalent]:
    """Mutant name -> Equivalent, from docs/mutation-equivalents.md (or `text`): a line
    `- `name`: why`, then a fenced ```diff block of the mutated lines (`-before`, `+after`)."""
    if text is None:
        text = EQUIVALENTS.read_text() if EQUIVALENTS.exists() else ""
    out: dict[str, Equivalent] = {}
    name, block = None, None
    for line in text.splitlines():
        stripped = line.strip()
        if block is not None:
            if stripped == "```":
                out[name] = out[name]._replace(diff=tuple(block))
                block = None
            elif stripped[:1] in ("-", "+"):
                block.append(diff_line(stripped))
            continue
        if (m := ENTRY.match(line)) is not None:
            name = m.group(1)
            out[name] = Equivalent(m.group(2), None)
        elif stripped == "```diff" and name is not None and out[name].diff is None:
            block = []
        elif stripped and not line.startswith(" "):
            name = None
    return out


def mutant_diffs(module_file: Path, dotted_name: str) -> dict[str, tuple[str, ...]]:
    """Mutant name -> its diff (`-before`, `+after` lines, blanks collapsed), for every mutant
    mutmut makes of the module's source now (its own generator: the same names and numbers)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    made = mutate_file_contents(str(module_file), module_file.read_text())
    lines = made.code.splitlines()
    spans = made.line_span_by_function_name

    def body(key: str, as_name: str) -> list[str]:
        span = spans[key]
        text = lines[span.start - 1 : span.end]
        return [t.replace(key, as_name, 1) for t in text]

    out = {}
    for key in made.mutant_names:
        orig = key.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
        changed = difflib.unified_diff(body(orig, "f"), body(key, "f"), n=0, lineterm="")
        out[f"{dotted_name}.{key}"] = tuple(
            diff_line(t) for t in changed if t[:1] in "-+" and not t.startswith(("---", "+++"))
        )
    return out


def equivalent_problems(
    entries: dict[str, Equivalent], root: Path = REPO, modules: list[str] | None = None
) -> list[str]:
    """One line per entry (of `modules`, or all) that no longer names the mutant it describes:
    its module or mutant is gone (stale), it carries no diff, or the mutant of that name now
    changes other lines than the entry's diff (mismatch)."""
    by_module: dict[str, list[str]] = defaultdict(list)
    for name in entries:
        by_module[name.rsplit(".", 1)[0]].append(name)
    problems = []
    for module, names in sorted(by_module.items()):
        path = root / "src" / (module.replace(".", "/") + ".py")
        if modules is not None and str(path.relative_to(root)) not in modules:
            continue
        diffs = mutant_diffs(path, module) if path.is_file() else {}
        for name in sorted(names):
            want = entries[name].diff
            if not path.is_file():
                problems.append(f"{name}: stale, module {path.relative_to(root)} not found")
            elif name not in diffs:
                problems.append(f"{name}: stale, mutmut makes no mutant of that name now")
            elif want is None:
                problems.append(f"{name}: no ```diff block; it is now {' '.join(diffs[name])}")
            elif diffs[name] != want:
                problems.append(
                    f"{name}: mismatch, the entry's diff is {' '.join(want)} but the mutant of "
                    f"that name is now {' '.join(diffs[name])}"
                )
    return problems


def scratch_copy(work: Path, modules: list[str], tests: list[str]) -> None:
    """The repository's files (tracked and untracked, not ignored) and mutmut's config."""
    files = git("ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / name)
    top = sorted({Path(n).parts[0] for n in filter(None, files)} - {"src", "tests"})
    pyproject = (REPO / "pyproject.toml").read_text()
    if "[tool.mutmut]" in pyproject:
        sys.exit("mutate: pyproject.toml has [tool.mutmut]; tools/mutate.py writes its own")
    config = {
        "source_paths": ["src"],
        "only_mutate": modules,
        "also_copy": [t for t in top if (work / t).exists()],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": PYTEST_ARGS,
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in config.items()]
    (work / "pyproject.toml").write_text(pyproject + "\n".join(lines) + "\n")


def mutmut_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return env


def run_mutmut(work: Path, args: list[str], deadline: float, log) -> bool:
    """Run `mutmut args` in `work`; at the deadline send SIGINT (mutmut keeps finished results)."""
    exe = Path(sys.executable).parent / "mutmut"
    proc = subprocess.Popen(
        [str(exe), *args],
        cwd=work,
        env=mutmut_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return False
        time.sleep(1)
    return True


def results(work: Path, modules: list[str]) -> dict[str, dict[str, str]]:
    """Module -> {mutant name: status} from mutmut's meta files."""
    out = {}
    for module in modules:
        meta = work / "mutants" / (module + ".meta")
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        out[module] = {k: STATUS.get(v, "suspicious") for k, v in codes.items()}
    return out


def sample_rounds(names: dict[str, list[str]], seed: int) -> dict[str, list[str]]:
    """Each module's mutants in a fixed shuffled order, so any prefix share is an even sample."""
    order = {}
    for module, keys in names.items():
        keys = sorted(keys)
        random.Random(f"{seed}:{module}").shuffle(keys)
        order[module] = keys
    return order


def package_of(module: str) -> str:
    parts = dotted(module).split(".")
    return ".".join(parts[:3] if parts[1] == "backends" else parts[:2])


def score_line(killed: int, survived: int) -> str:
    if killed + survived == 0:
        return "n/a"
    return f"{100 * killed / (killed + survived):.1f}% ({killed}/{killed + survived})"


def report(work: Path, modules: list[str], entries: dict[str, Equivalent], out: Path) -> None:
    """The score tables and survivors.md; the equivalent entries of `modules` whose diff is not
    their mutant's are reported and not excluded."""
    problems = equivalent_problems(entries, work, modules)
    bad = {line.split(":", 1)[0] for line in problems}
    equiv = {k for k in entries if k not in bad}
    status = results(work, modules)
    by_package: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    survivors = []
    print(f"\n{'module':48} {'mutants':>7} {'run':>5} {'equiv':>5}  score")
    for module in modules:
        s = status[module]
        eq = [k for k in s if k in equiv]
        killed = sum(1 for k, v in s.items() if v in KILLED and k not in equiv)
        surv = [k for k, v in s.items() if v in SURVIVED and k not in equiv]
        survivors += [(k, s[k]) for k in sorted(surv)]
        p = by_package[package_of(module)]
        p[0] += len(s)
        p[1] += killed + len(surv)
        p[2] += len(eq)
        p[3] += killed
        print(
            f"{module:48} {len(s):7} {killed + len(surv):5} {len(eq):5}  "
            f"{score_line(killed, len(surv))}"
        )
    print(f"\n{'package':48} {'mutants':>7} {'run':>5} {'equiv':>5}  score")
    for package, (total, run, eq, killed) in sorted(by_package.items()):
        print(f"{package:48} {total:7} {run:5} {eq:5}  {score_line(killed, run - killed)}")
    exe = Path(sys.executable).parent / "mutmut"
    with out.open("w") as f:
        for name, st in survivors:
            diff = subprocess.run(
                [str(exe), "show", name], cwd=work, env=mutmut_env(), capture_output=True, text=True
            ).stdout
            f.write(f"## {name} ({st})\n{diff}\n")
    if problems:
        print("\nequivalent entries that no longer name the mutant they describe (not excluded):")
        print("\n".join(problems))
    print(f"\n{len(survivors)} surviving mutants (diffs: {out})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", nargs="*", default=None, help="src/grpo_dial/... .py files")
    ap.add_argument("--base", default="main", help="default scope: changed since")
    ap.add_argument("--budget", type=float, default=600, help="seconds for the whole run")
    ap.add_argument("--tests", nargs="*", default=None, help="test files (default: the mirror's)")
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=0, help="the sampling order's seed")
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="run only the mutants whose name matches one of these globs ('*x_estimator_mass__*')",
    )
    ap.add_argument(
        "--check-equivalents",
        action="store_true",
        help="only check that every entry of docs/mutation-equivalents.md names its mutant",
    )
    a = ap.parse_args()
    if a.check_equivalents:
        entries = equivalents()
        problems = equivalent_problems(entries)
        print("\n".join(problems) or f"{len(entries)} equivalent entries, each names its mutant")
        sys.exit(1 if problems else 0)
    start = time.monotonic()
    deadline = start + a.budget

    modules = [check_module(m) for m in a.modules] if a.modules else changed_modules(a.base)
    if not modules:
        print(f"mutate: no module under {PACKAGE}/ changed since {a.base}; nothing to do")
        return
    if a.tests:
        tests = a.tests
    else:
        tests = sorted({t for m in modules for t in tests_for(m)})
        for m in modules:
            print(f"{m} -> {' '.join(tests_for(m)) or '(no test file found)'}")
    if not tests:
        sys.exit("mutate: no test file exercises these modules (pass --tests / TESTS=...)")

    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="grpo-dial-mutate-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "mutants").exists():
        scratch_copy(work, modules, tests)
    log_path = work / "mutmut.log"
    print(f"scratch copy and mutmut's log: {work}")
    with log_path.open("a") as log:
        # generation and the per-test stats (cached in mutants/); the filter matches nothing
        run_mutmut(work, ["run", "--max-children", str(a.max_children), "__none__"], deadline, log)
        names = {m: list(s) for m, s in results(work, modules).items()}
        if a.only:
            names = {m: [k for k in s if any(fnmatch(k, g) for g in a.only)]
                     for m, s in names.items()}
        if not any(names.values()):
            sys.exit(f"mutate: mutmut made no mutants (see {log_path})")
        order = sample_rounds(names, a.seed)
        total = sum(map(len, order.values()))
        share, rate = 0.1, None
        while time.monotonic() < deadline:
            status = results(work, modules)
            todo = {m: [k for k in order[m] if status[m].get(k) == "not checked"] for m in modules}
            left = sum(map(len, todo.values()))
            if not left:
                break
            if rate is not None:  # fill the time left, keeping a margin
                share = min(1.0, rate * (deadline - time.monotonic()) * 0.9 / left)
            batch = [k for m in modules for k in todo[m][: max(1, math.ceil(share * len(todo[m])))]]
            t0 = time.monotonic()
            print(f"round: {len(batch)} of {left} mutants left ({total} in all)", flush=True)
            finished = run_mutmut(
                work, ["run", "--max-children", str(a.max_children), *batch], deadline, log
            )
            after = results(work, modules)
            done = sum(1 for m in modules for k in todo[m] if after[m].get(k) != "not checked")
            rate = done / max(time.monotonic() - t0, 1.0)
            if not finished:
                print("budget spent: stopped mutmut; the finished mutants count")
    print(f"ran {time.monotonic() - start:.0f} s of a {a.budget:.0f} s budget")
    report(work, modules, equivalents(), work / "survivors.md")


if __name__ == "__main__":
    main()
