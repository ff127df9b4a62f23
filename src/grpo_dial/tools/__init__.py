"""Command-line tools: the `grpo-dial` command and the benchmark against TRL."""
