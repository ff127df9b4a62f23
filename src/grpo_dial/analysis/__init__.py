"""Tables computed from pass rates and training records: difficulty, the controlled simulation,
the DAPO fit, the identity check, the length decomposition, real lengths, the allocation
comparison, and the plain-language summary."""
