"""grpo-dial: the group reward standard deviation as a dial, measured end to end.

Run `snakemake` (the default profile sets the cores). README.md is the front door; docs/ has every
rule and workflow/schemas/config.schema.yaml every key.
"""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/passrates.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/difficulty.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/length_bias.smk"
include: "workflow/rules/dapo.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/policy.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/real_lengths.smk"
include: "workflow/rules/channel.smk"
include: "workflow/rules/aware.smk"
include: "workflow/rules/aware_later.smk"
include: "workflow/rules/allocation.smk"
include: "workflow/rules/external.smk"
include: "workflow/rules/summary.smk"


rule all:
    input:
        all_targets(),
    default_target: True
    localrule: True  # no sbatch job for the target list under a cluster profile
