"""RL training: the config, one step (generate -> score -> advantages -> loss -> update), the
per-step records, the loop with checkpoints, the identity probe and adaptive group sizes."""
