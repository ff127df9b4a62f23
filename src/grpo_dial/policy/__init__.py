"""The policy model: loading and building, the lean Llama forward, sampling and log-probs,
warm start, conversion of packaged weights, and device selection."""
