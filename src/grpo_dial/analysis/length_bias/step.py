"""One update of a free-length tail through the project's own advantage and aggregation code.

For a (J, G) block of groups with rewards r, a flag "uses theta_w" and tail lengths T after a
core of c tokens, the on-policy update of each prompt's tail parameters is

    u_w[j] = sum_{i in j, uses theta_w} A_i w_i s_i,     s_i = (1 - q_i) T_i - q_i

with A from `advantage.advantages` (`keep_mask` drops DAPO's silent groups), w_i the weight the
arm's aggregator (`advantage.make_aggregator`) gives every token of response i when M groups are
normalized together and the batch loss is scaled by M, and s the geometric tail's score. This
equals minus the gradient of sum_b M * policy_loss_b with per-token log-probs (continue tokens
log q, the stop decision log(1 - q)) at ratio 1; tests check it against that autograd.

lambda-GRPO's weights (length_norm 'lambda') need each response's group within its batch:
w_i = M f_i / S_b, f_i = G softmax_{j in g}(h_j^lambda)_i (core.token_weights.lambda_factors).
vmap cannot trace the torch.unique inside lambda_factors, and f depends on the group alone, so the
factors are computed once for every group of the block and only the token normalizer S_b is
vmapped over batches (core.token_weights.unified_weights); the other normalizers keep the
vmapped aggregator unchanged.

The engines' estimators: OPO's length-weighted baseline and the whitening over tokens get each
response's length |o_i| = c + T_i, and an estimator with batch statistics (the whitening, the
batch std, GPG) takes them over each batch of M groups (`batch_advantages`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import vmap

from grpo_dial.core.advantage import advantages, keep_mask, make_aggregator
from grpo_dial.core.dial import Dial
from grpo_dial.core.registry import advantage_estimators
from grpo_dial.core.token_weights import lambda_factors, unified_weights, weighted_sum


def response_weights(
    lengths: np.ndarray, keep: np.ndarray, dial: Dial, rows: int, m: int
) -> np.ndarray:
    """(N,) w_i = d [M * aggregate_b] / d l_it for every token of response i: the arm's
    aggregator (advantage.make_aggregator, with the group ids for lambda-GRPO) on (N, W) masks,
    vmapped over batches of `rows` responses (M groups of rows / M); a dropped row (keep False)
    has no tokens and weight 0."""
    length = torch.from_numpy(np.asarray(lengths, dtype=np.int64))  # (N,)
    pos = torch.arange(int(length.max()))[None, :]  # (1, W)
    mask = (pos < length[:, None]) & torch.from_numpy(np.asarray(keep, dtype=bool))[:, None]
    loss = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)  # (N, W)
    nb, width = length.numel() // rows, mask.shape[1]
    if dial.length_norm == "lambda":
        ids = torch.arange(length.numel() // (rows // m)).repeat_interleave(rows // m)  # (N,)
        f = lambda_factors(mask.sum(-1), ids, dial.lambda_value, dial.lambda_r)  # (N,)

        def batch_loss(token_loss, batch_mask, factors):
            return weighted_sum(token_loss, unified_weights(batch_mask, factors))

        per_batch = vmap(batch_loss)(
            loss.view(nb, rows, width), mask.view(nb, rows, width), f.view(nb, rows)
        )  # (nb,)
    else:
        per_batch = vmap(make_aggregator(dial))(
            loss.view(nb, rows, width), mask.view(nb, rows, width)
        )  # (nb,)
    (grad,) = torch.autograd.grad(m * per_batch.sum(), loss)  # (N, W)
    return grad[:, 0].numpy()  # the first token of every kept response is in its mask


def batch_advantages(
    rewards: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor, dial: Dial, rows: int
) -> np.ndarray:
    """(N,) advantages.advantages with the responses' lengths where the dial needs them (OPO,
    whitening over tokens); an estimator with batch statistics (the batch std, GPG's B/M, the
    whitening) takes them over each batch of `rows` responses, as a trainer's step does."""
    needs = {n for e in advantage_estimators(dial) for n in e.needs}
    context = {"lengths": lengths} if "lengths" in needs else {}
    batched = dial.whiten != "none" or dial.std_scope == "batch" or dial.gpg_scale != "none"
    if not batched:
        return advantages(rewards, ids, dial, **context).numpy()
    out = [
        advantages(rewards[i : i + rows], ids[i : i + rows], dial,
                   **{k: v[i : i + rows] for k, v in context.items()}).numpy()
        for i in range(0, rewards.numel(), rows)
    ]  # fmt: skip
    return np.concatenate(out)


def tail_updates(
    rewards: np.ndarray,
    uses_w: np.ndarray,
    tails: np.ndarray,
    theta_w: np.ndarray,
    theta_c: np.ndarray,
    core_length: int,
    dial: Dial,
    groups_per_batch: int = 1,
    batch_order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(J,) u_w, u_c = sum_i A_i w_i s_i over each prompt's responses using theta_w (theta_c):
    A from advantage.advantages (keep_mask drops DAPO's silent groups), w from the arm's
    aggregator (response_weights), s = (1 - q) T - q the tail score; (J, G) rewards, uses-theta_w
    flags and tail lengths; batch b holds prompts batch_order[b M:(b+1) M] (default in order).
    Equals minus the gradient of sum_b M * policy_loss_b w.r.t. theta on policy (tested)."""
    j, g = rewards.shape
    m = groups_per_batch
    if j % m:
        raise ValueError(f"{j} groups do not split into batches of {m}")
    order = np.arange(j) if batch_order is None else np.asarray(batch_order)
    r = torch.from_numpy(np.asarray(rewards, dtype=np.float64)[order].reshape(-1))  # (N,)
    ids = torch.arange(j).repeat_interleave(g)  # (N,)
    w = np.asarray(uses_w, dtype=bool)[order].reshape(-1)  # (N,)
    t = np.asarray(tails, dtype=np.int64)[order].reshape(-1)  # (N,)
    adv = batch_advantages(r, ids, torch.from_numpy(core_length + t), dial, m * g)  # (N,)
    keep = keep_mask(r, ids, dial).numpy()  # (N,) DAPO: silent groups dropped
    theta = np.where(w, np.repeat(theta_w[order], g), np.repeat(theta_c[order], g))  # (N,)
    q = 0.5 * (1.0 + np.tanh(0.5 * theta))  # (N,) sigmoid
    push = adv * response_weights(core_length + t, keep, dial, m * g, m) * ((1 - q) * t - q)  # (N,)
    per = push.reshape(j, g)  # (J, G)
    wg = w.reshape(j, g)
    out_w, out_c = np.empty(j), np.empty(j)
    out_w[order] = np.where(wg, per, 0.0).sum(axis=1)
    out_c[order] = np.where(wg, 0.0, per).sum(axis=1)
    return out_w, out_c


def draw_tails(uniform: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Geometric tails by inversion, T = floor(log U / log q): one uniform per response, so every
    arm consumes its stream identically (common random numbers)."""
    log_q = -np.logaddexp(0.0, -theta)  # log sigmoid(theta), overflow-free
    return np.floor(np.log1p(-uniform) / log_q).astype(np.int64)
