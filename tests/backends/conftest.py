"""Markers of the backend tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "processes: launches 2 CPU processes with `accelerate launch` (torch.distributed over "
        "gloo); needs no GPU, about a minute",
    )
