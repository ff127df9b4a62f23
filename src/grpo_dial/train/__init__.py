"""RL training: the run's config (the arm itself is read by grpo_dial.core.dial), one step
(generate -> score -> advantages -> loss -> update) and the batch it hands on, the per-step
records, the loop with checkpoints, the identity probe and adaptive group sizes."""
