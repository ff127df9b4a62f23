"""dag.resources: the GPU job count and its one line on stderr."""

from grpo_dial.dag.resources import gpu_jobs


def test_gpu_jobs_says_its_count_on_stderr(capsys):
    assert gpu_jobs(1, visible=2) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "GPU jobs at once: 2 (visible GPUs: 2; --resources gpu=N to change)\n"
    assert gpu_jobs(0, visible=0) == 0
    assert capsys.readouterr().err == ""
