"""TRL's GRPOTrainer as a backend: translation (config), launch, run, identity probe, tables."""
