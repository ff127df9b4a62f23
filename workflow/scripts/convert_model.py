"""Rule `convert_smollm`: a thin call into grpo_dial.convert.convert_model."""

import sys
from pathlib import Path

# The repository's own source, so the rule also runs in a conda env without the package installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))  # noqa: F821

from grpo_dial import convert, stages  # noqa: E402

stages.run_rule(convert.convert_model, snakemake)  # noqa: F821 (injected by Snakemake)
