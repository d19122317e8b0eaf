"""Models that change their own state in place: checked from the same state on both sides, not called
nondeterministic; a model that truly disagrees with itself still is."""

from __future__ import annotations

from pathlib import Path

from inner_runs import run_pytest_warm

from conftest import junit_properties

STATEFUL = """
import torch


class Accumulator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(8))

    def forward(self, x):
        self.acc.add_(x.sum(0))
        return self.acc


class Counter(torch.nn.Module):  # changes its state, returns a new tensor
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.calls


class NoisyAccumulator(Accumulator):  # changes its state by a random amount: nondeterministic from any state
    def forward(self, x):
        self.acc.add_(x.sum(0) + torch.rand(8))
        return self.acc


def test_accumulator(inductor_check):
    inductor_check(Accumulator(), torch.randn(4, 8))


def test_counter(inductor_check):
    inductor_check(Counter(), torch.randn(4, 8))


def test_noisy_accumulator(inductor_check):
    inductor_check(NoisyAccumulator(), torch.randn(4, 8))
"""


def test_a_model_returning_its_own_changed_state_is_checked_from_the_same_state(tmp_path: Path) -> None:
    """The accumulator (``self.acc.add_(x.sum(0)); return self.acc``) passes on a real compile, its record saying
    the state was restored; the noisy one is still eager_nondeterministic, from the same state."""
    (tmp_path / "test_stateful.py").write_text(STATEFUL)
    result = run_pytest_warm(
        tmp_path, "test_stateful.py", "--inductor-template=default", "--junitxml=run.xml", "-rs", "-p",
        "no:cacheprovider", "-W", "ignore::DeprecationWarning", "--inductor-cpu-probe=0",
    )  # fmt: skip
    output = result.stdout + result.stderr
    properties = junit_properties(tmp_path / "run.xml")
    accumulator = properties["test_stateful::test_accumulator[default]"]
    assert accumulator["inductor_outcome"] == "pass", output
    assert accumulator["inductor_check_rule"] == "first comparison"
    assert accumulator["inductor_reason"].startswith(
        "state restored: the model changes its own state in place (acc; out is acc)"
    ), accumulator["inductor_reason"]
    counter = properties["test_stateful::test_counter[default]"]
    assert counter["inductor_outcome"] == "pass", output
    assert counter["inductor_reason"].startswith("state restored: the model changes its own state in place (calls)")
    noisy = properties["test_stateful::test_noisy_accumulator[default]"]
    assert noisy["inductor_outcome"] == "eager_nondeterministic", output
    assert noisy["inductor_reason"].startswith(
        "eager disagrees with itself on the same input, from the same state (its changed state restored first): out:"
    ), noisy["inductor_reason"]
    assert result.returncode == 0, output  # two passed, one skipped
