"""Entry points of the workflow's rules: one module per rule file (`workflow/rules/<name>.smk`).

Each stage reads its inputs, calls the library modules, and writes tidy tables: `stage(input,
output, params)` with plain mappings, run by `run.run_rule` under Snakemake, by `grpo-dial stage`,
or by a test. Nothing in the library imports this package.
"""
