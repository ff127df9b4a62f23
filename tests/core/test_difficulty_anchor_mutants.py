"""core.difficulty_anchor: the default update form is the paper's, and a bad form's line."""

import pytest

from grpo_dial.core.difficulty_anchor import START, AnchorState, anchor_before


def test_the_default_form_is_the_papers():
    # 'paper': the previous belief (y itself at the start), not the window mean 'released' gives
    state = AnchorState(0.25, (0.25, 0.75))
    assert anchor_before(START, 0.6) == 0.6 and anchor_before(state, 0.6) == 0.25
    assert anchor_before(state, 0.6, form="released", window=2) == pytest.approx(0.675)
    with pytest.raises(ValueError) as err:
        anchor_before(state, 0.6, form="mean")
    assert str(err.value) == (
        "anchor update 'mean' is not valid; choose one of paper, released, batch_std"
    )
