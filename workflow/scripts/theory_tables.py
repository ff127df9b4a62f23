"""Rule `theory_tables`: a thin call into grpo_dial.stages.theory_tables (which also runs outside Snakemake)."""

import sys
from pathlib import Path

# The repository's own source, so the rule also runs in a conda env without the package installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))  # noqa: F821

from grpo_dial.stages import theory_tables, run_rule  # noqa: E402

run_rule(theory_tables, snakemake)  # noqa: F821 (injected by Snakemake)
