"""grpo-dial: measure what the group reward standard deviation does in GRPO-style RL."""

__version__ = "0.1.0"
