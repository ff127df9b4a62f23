"""Rule script: a thin call into grpo_dial.stages.aware.aware_figure."""

import sys
from pathlib import Path

# The repository's own source, so the rule also runs in a conda env without the package installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))  # noqa: F821

from grpo_dial.stages import aware  # noqa: E402
from grpo_dial.stages.run import run_rule  # noqa: E402

run_rule(aware.aware_figure, snakemake)  # noqa: F821 (injected by Snakemake)
