"""RL training: the config and the arm read from a `dials` entry, one step (generate -> score ->
advantages -> loss -> update) and the batch it hands on, the per-step records, the loop with
checkpoints, the identity probe and adaptive group sizes."""
