"""The math every other part stands on: the advantage estimators of the dial and the closed forms.

Imports nothing else of grpo_dial. `advantage` is torch only; `theory` is numpy/scipy only.
"""
