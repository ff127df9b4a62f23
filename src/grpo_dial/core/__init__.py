"""The math every other part stands on: the advantage estimators of the dial, the closed forms
and the pass-rate bands.

Imports nothing else of grpo_dial. `advantage` is torch only; `theory` is numpy/scipy only;
`bands` is numpy only.
"""
