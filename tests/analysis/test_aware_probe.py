"""The one-step probe (analysis/aware/probe.py): the projection's sign and which J is which against
the kernel and against a real SGD step's weight change, a silent batch's exact 0, the table's
numbers by hand and the closed form's exact 0 for the constant normalizer."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from grpo_dial.analysis.aware.dose import LEVELS
from grpo_dial.analysis.aware.kernel import base_responses, mode_gradients, tail_kernel
from grpo_dial.analysis.aware.probe import PROBE_COLUMNS, mode_moves, predictions, probe_table
from grpo_dial.backends.own_cells import cell_config, probe_batches
from grpo_dial.core.dial import read_arm
from grpo_dial.data.tasks.aware import AwareTask

TRAIN = {"steps": 1, "prompts_per_step": 2, "group_size": 4, "lr": 0.5, "max_new_tokens": 12,
         "heldout_prompts": 1, "grad_clip": 1.0}  # fmt: skip


@pytest.fixture(scope="module")
def tiny():
    from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama

    task = AwareTask(score_truncated=True)
    tok = build_char_tokenizer(task.alphabet)
    spec = PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32)
    model = build_tiny_llama(spec, tok, seed=0).eval()
    problems = task.problems("train", 6, 0)
    r, _ = base_responses(model, tok, task, problems, 4, 12, 1.0, torch.Generator().manual_seed(3),
                          np.random.default_rng(3))  # fmt: skip
    e, c, _ = mode_gradients(model, tok, r)
    return task, tok, model, r, e, c


def test_mode_moves_is_minus_j_dot_grad_per_mode():
    jw, jc = torch.tensor([1.0, 2.0, 0.0]), torch.tensor([0.0, 1.0, -1.0])
    g = torch.tensor([3.0, -1.0, 2.0])
    assert mode_moves(g, jw, jc) == (-1.0, 3.0)  # -(3 - 2), -(-1 - 2)


def test_a_gradient_equal_to_j_wrong_moves_each_mode_by_minus_its_kernel_entry(tiny):
    """A loss whose gradient is J_~ (the estimate mode's mean continue logit): SGD's step lowers
    theta_~ by K_ee and theta_= by K_ec per unit lr, the kernel's own numbers."""
    task, tok, model, r, e, c = tiny
    k = tail_kernel(model, tok, r).iloc[0]
    assert k["k_ee"] != pytest.approx(k["k_ec"], rel=1e-2)  # the two entries tell J's apart
    w, cc = mode_moves(e, e, c)
    assert w == pytest.approx(-k["k_ee"], rel=1e-9) and cc == pytest.approx(-k["k_ec"], rel=1e-9)
    w, cc = mode_moves(c, e, c)
    assert w == pytest.approx(-k["k_ec"], rel=1e-9) and cc == pytest.approx(-k["k_cc"], rel=1e-9)


def _config(arm, seed=0):
    return cell_config(TRAIN, arm, 8, 0, seed)


def test_probe_batches_is_the_projection_of_a_real_sgd_steps_weight_change(tiny):
    """Batch 0 of the probe against one real step of the trainer (SGD at lr 1e-3, no clip, same
    seed): J_m . (w' - w) / lr is the probe's move of mode m; the probe leaves the weights."""
    from dataclasses import replace

    from grpo_dial.train import loop

    task, tok, model, _, e, c = tiny
    arm = read_arm({"preset": "grpo"})
    problems, heldout = task.problems("train", 8, 0), task.problems("heldout", 1, 0)
    before = [p.detach().clone() for p in model.parameters()]
    probe = probe_batches(model, tok, task, problems, heldout, arm.dial, _config(arm), 2, e, c)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert list(probe["batch"]) == [0, 1] and probe["grad_norm"].gt(0).all()
    assert probe["contrast"].to_numpy() == pytest.approx(probe["wrong"] - probe["correct"])

    lr = 1e-3
    config = replace(_config(arm), optimizer="sgd", grad_clip=None, lr=lr)
    stepped = type(model)(model.config).eval()
    stepped.load_state_dict(model.state_dict())
    run = loop.new_run(stepped, tok, None, problems, heldout, arm.dial, config, None)
    loop.run_step(run, task, arm.dial, config, 1)
    delta = torch.cat([(p.detach() - b).reshape(-1) for p, b in
                       zip(stepped.parameters(), before, strict=True)]).double()  # fmt: skip
    assert float(delta.abs().max()) > 0
    assert probe["wrong"].iloc[0] == pytest.approx(float(e @ delta) / lr, rel=1e-3, abs=1e-9)
    assert probe["correct"].iloc[0] == pytest.approx(float(c @ delta) / lr, rel=1e-3, abs=1e-9)
    assert probe["wrong"].iloc[0] != pytest.approx(probe["correct"].iloc[0], rel=1e-3)


def test_a_silent_batch_moves_nothing(tiny):
    """Every answer right (accuracy 1 in both modes): every group is silent, GRPO's advantage 0,
    the trainer's gradient exactly 0, so each mode's move is exactly 0."""
    _, tok, model, _, e, c = tiny
    task = AwareTask(compute_accuracy=1.0, estimate_accuracy=1.0, score_truncated=True)
    arm = read_arm({"preset": "grpo"})
    problems, heldout = task.problems("train", 8, 0), task.problems("heldout", 1, 0)
    probe = probe_batches(model, tok, task, problems, heldout, arm.dial, _config(arm), 2, e, c)
    assert (probe[["wrong", "correct", "contrast"]].to_numpy() == 0.0).all()
    assert (probe["grad_norm"] == 0.0).all()


def test_gradients_too_large_to_keep_give_the_same_adam_moves_in_two_passes(tiny):
    """keep_bytes below the batches' gradients: the squares' sum, then the same batches again
    (the trainer's draws repeat at lr 0), equal to keeping every gradient."""
    task, tok, model, _, e, c = tiny
    arm = read_arm({"preset": "grpo"})
    problems, heldout = task.problems("train", 8, 0), task.problems("heldout", 1, 0)
    args = (model, tok, task, problems, heldout, arm.dial, _config(arm), 3, e, c)
    kept, streamed = probe_batches(*args), probe_batches(*args, keep_bytes=0)
    assert kept["adam_contrast"].abs().gt(0).all()
    pd.testing.assert_frame_equal(kept, streamed, rtol=1e-12, atol=0)


def test_one_batch_is_a_probe(tiny):
    task, tok, model, _, e, c = tiny
    arm = read_arm({"preset": "grpo"})
    problems, heldout = task.problems("train", 8, 0), task.problems("heldout", 1, 0)
    one = probe_batches(model, tok, task, problems, heldout, arm.dial, _config(arm), 1, e, c)
    two = probe_batches(model, tok, task, problems, heldout, arm.dial, _config(arm), 2, e, c)
    assert list(one["batch"]) == [0]
    assert one["contrast"].iloc[0] == pytest.approx(two["contrast"].iloc[0], rel=1e-12)


def test_probe_batches_refuses_no_batches(tiny):
    task, tok, model, _, e, c = tiny
    arm = read_arm({"preset": "grpo"})
    with pytest.raises(ValueError, match="batches must be >= 1"):
        probe_batches(model, tok, task, [], [], arm.dial, _config(arm), 0, e, c)


def test_probe_table_by_hand():
    grpo = {"wrong": [0.3, 0.1, 0.5, 0.3], "correct": [0.1, 0.2, 0.1, 0.2]}
    other = {"wrong": [0.2, 0.0, 0.2, 0.2], "correct": [0.0, 0.1, 0.1, 0.0]}
    rows = []
    for d, v in (("grpo", grpo), ("other", other)):
        for b in range(4):
            rows.append({"level": "a60", "a": 0.6, "dial": d, "batch": b, "wrong": v["wrong"][b],
                         "correct": v["correct"][b], "contrast": v["wrong"][b] - v["correct"][b],
                         "grad_norm": [0.5, 2.0, 4.0, 1.0][b]})  # fmt: skip
    pred = pd.DataFrame({"level": "a60", "dial": ["grpo", "other"], "wrong": [0.4, 0.2],
                         "correct": [0.2, 0.2]})  # fmt: skip
    t = probe_table(pd.DataFrame(rows), pred, "grpo", grad_clip=1.0)
    assert list(t.columns) == PROBE_COLUMNS and len(t) == 6
    t = t.set_index(["dial", "quantity"])
    x = np.array([0.2, -0.1, 0.4, 0.1])  # grpo's contrast per batch
    sd = x.std(ddof=1)
    r = t.loc[("grpo", "contrast")]
    assert r["mean"] == pytest.approx(0.15) and r["sd"] == pytest.approx(sd)
    assert r["se"] == pytest.approx(sd / 2) and r["n_batches"] == 4
    half = 2.3533634 * sd / 2  # t_{0.95, 3}
    assert (r["lo"], r["hi"]) == pytest.approx((0.15 - half, 0.15 + half), rel=1e-6)
    assert r["predicted"] == pytest.approx(0.2) and r["ratio"] == pytest.approx(0.75)
    # clipped: batches 1 and 2 scaled by 1/2 and 1/4
    assert r["clipped_mean"] == pytest.approx((0.2 - 0.05 + 0.1 + 0.1) / 4)
    assert r["clip_share"] == 0.5 and r["grad_norm"] == pytest.approx(1.875)
    o = t.loc[("other", "wrong")]
    y, z = np.array(grpo["wrong"]), np.array(other["wrong"])
    ratio = z.mean() / y.mean()
    assert o["ratio_reference"] == pytest.approx(ratio)
    assert o["ratio_reference_se"] == pytest.approx((z - ratio * y).std(ddof=1) / 2 / y.mean())
    assert o["predicted_ratio_reference"] == pytest.approx(0.5)
    assert math.isnan(t.loc[("other", "contrast"), "ratio"])  # predicted 0: no ratio
    assert t.loc[("other", "contrast"), "predicted_ratio_reference"] == 0.0
    assert t.loc[("grpo", "wrong"), "ratio_reference"] == pytest.approx(1.0)


def test_probe_markdown_prints_the_tables_numbers():
    from grpo_dial.analysis.aware.dose import dose_fit
    from grpo_dial.analysis.aware.dose_report import probe_markdown

    rows = []
    for lev, a, shift in (("a0", 0.0, 0.0), ("a60", 0.6, 0.002), ("a80", 0.8, 0.003)):
        for b in range(3):
            rows.append({"level": lev, "a": a, "dial": "grpo", "batch": b, "wrong": 0.1 + shift,
                         "correct": 0.1 - 0.001 * b, "contrast": shift + 0.001 * b,
                         "grad_norm": 0.2})  # fmt: skip
    pred = pd.DataFrame({"level": ["a0", "a60", "a80"], "dial": "grpo",
                         "wrong": [0.1, 0.103, 0.104], "correct": [0.1, 0.1, 0.1]})  # fmt: skip
    table = probe_table(pd.DataFrame(rows), pred, "grpo", grad_clip=1.0)
    text = probe_markdown(table, dose_fit(table))
    row = next(line for line in text.splitlines() if line.startswith("| 0.6 | grpo | 3 |"))
    c = table.set_index(["level", "quantity"]).loc[("a60", "contrast")]
    assert f"| {1e3 * c['mean']:+.2f} [{1e3 * c['lo']:+.2f}, {1e3 * c['hi']:+.2f}] | +3.00 |" in row
    modes = [line for line in text.splitlines() if line.startswith("| 0.6 | grpo | +")]
    assert len(modes) == 1 and modes[0].split(" | ")[3] == "+103.00"  # wrong mode: 0.103
    assert row.endswith("| +1.00 +- 0.00 | +1.00 | 0 % |")
    blind = next(line for line in text.splitlines() if line.startswith("| 0.0 | grpo | 3 |"))
    assert blind.endswith("| +1.00 +- 0.00 | n/a | 0 % |")  # predicted 0 over 0: no ratio
    assert "| contrast | " in text and "| 3 |" in text.splitlines()[-1]


def test_probe_table_names_a_missing_column():
    with pytest.raises(ValueError, match=r"lack column\(s\) \['grad_norm'\]"):
        probe_table(pd.DataFrame(columns=["level", "a", "dial", "batch", "wrong", "correct",
                                          "contrast"]), pd.DataFrame(), "grpo")  # fmt: skip


def test_the_closed_form_predicts_the_constant_normalizer_exactly_zero_at_every_level():
    """Dr. GRPO's constant normalizer puts no push on the tail (length-blind weights), GRPO's
    1/|o| does at a > 0; alpha 0 + 1/|o| is GRPO's push scaled, the same ratio in both modes."""
    base = pd.DataFrame([{"core": 6.5, "tail_estimate": 3.3, "tail_compute": 3.2}])
    kernel = pd.DataFrame([{"k_ee": 62.0, "k_ec": 61.9, "k_cc": 61.8}])
    arms = {d: read_arm(f).dial for d, f in (
        ("grpo", {"preset": "grpo"}), ("dr_grpo", {"preset": "dr_grpo"}),
        ("nostd_sequence", {"preset": "dr_grpo", "length_norm": "sequence"}))}  # fmt: skip
    train = {"group_size": 8, "prompts_per_step": 16}
    pred = predictions(arms, base, kernel, list(LEVELS), {"estimate_rate": 0.5}, train)
    pred = pred.set_index(["level", "dial"])
    for lev in LEVELS:
        assert pred.loc[(lev, "dr_grpo"), "wrong"] == 0.0
        assert pred.loc[(lev, "dr_grpo"), "correct"] == 0.0
    g, n = pred.loc[("a60", "grpo")], pred.loc[("a60", "nostd_sequence")]
    assert g["wrong"] - g["correct"] > 0 and not math.isclose(g["wrong"], g["correct"])
    assert 0 < n["wrong"] - n["correct"] < g["wrong"] - g["correct"]  # the std factor left out


def test_check_kernel_accepts_the_kernels_own_j_and_names_the_first_mismatch():
    """J~ = (1, 2, 2), J= = (2, 0, 1): K_ee 9, K_ec 4, K_cc 5, k_diff |(-1, 2, 1)|^2 = 6 by hand;
    a table within 1e-3 passes, one entry off by 1 % is named in one line."""
    import torch

    from grpo_dial.analysis.aware.probe import check_kernel

    e = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64)
    c = torch.tensor([2.0, 0.0, 1.0], dtype=torch.float64)
    table = pd.DataFrame([{"k_ee": 9.0, "k_ec": 4.0, "k_cc": 5.0, "k_diff": 6.0}])
    check_kernel(e, c, table)
    check_kernel(e, c, table.assign(k_cc=5.004))  # within rtol 1e-3
    with pytest.raises(ValueError) as err:
        check_kernel(e, c, table.assign(k_diff=6.06))
    assert str(err.value) == (
        "the probe's J give k_diff = 6, aware/kernel.csv 6.06: not the kernel's base sample"
    )


def test_probe_markdown_rows_whole():
    """Every cell of a row and the table's header compared whole (make mutate: the mode cells and
    the header survived the partial checks of test_probe_markdown_prints_the_tables_numbers)."""
    from grpo_dial.analysis.aware.dose import dose_fit
    from grpo_dial.analysis.aware.dose_report import probe_markdown

    rows = [{"level": "a60", "a": 0.6, "dial": "grpo", "batch": b, "wrong": 0.004 + 0.001 * b,
             "correct": 0.002 - 0.001 * b, "contrast": 0.002 + 0.002 * b, "grad_norm": 2.0 - b}
            for b in range(3)]  # fmt: skip
    pred = pd.DataFrame({"level": ["a60"], "dial": "grpo", "wrong": [0.005], "correct": [0.001]})
    table = probe_table(pd.DataFrame(rows), pred, "grpo", grad_clip=1.0)
    lines = probe_markdown(table, dose_fit(table)).splitlines()
    # means: wrong 5e-3, correct 1e-3, contrast 4e-3; sd 1e-3, 1e-3, 2e-3; t(0.95, 2) = 2.91999
    h = 2.919986 / np.sqrt(3)
    cell = lambda m, sd: f"{m:+.2f} [{m - h * sd:+.2f}, {m + h * sd:+.2f}]"  # noqa: E731
    assert lines[0] == "## The one-step probe (aware_sweep/probe.csv)"
    assert lines[4] == ("| a | arm | batches | contrast | predicted | contrast / reference | "
                        "predicted | clipped share |")
    assert lines[6] == f"| 0.6 | grpo | 3 | {cell(4, 2)} | +4.00 | +1.00 +- 0.00 | +1.00 | 33 % |"
    # grad_norm 2, 1, 0: the clip at 1 cuts only the first, one batch of three
    assert lines[8:11] == ["Each mode's move, the same units.", "",
                           "| a | arm | wrong mode | predicted | right mode | predicted |"]
    assert lines[12] == f"| 0.6 | grpo | {cell(5, 1)} | +5.00 | {cell(1, 1)} | +1.00 |"
    assert len(lines) == 13  # one cell: dose_fit has nothing to fit, so no fit table
