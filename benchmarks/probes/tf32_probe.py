"""Why an fp32 convolution differs between eager and Inductor on CUDA: TF32, measured against fp64.

Prints, for the built-in conv_bn sample under the default template, each side's RMSE and worst error
against the fp64 model, and the error that TF32 rounding of inputs and parameters alone causes, with
cuDNN's TF32 allowed (PyTorch's default) and disallowed. Usage (GPU machine): python benchmarks/probes/tf32_probe.py
"""

from __future__ import annotations

import torch

from pytest_inductor_templates.check.float64 import round_to_tf32
from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES


def _error_vs(a: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """RMSE and worst absolute error of ``a`` against the float64 ``ref``."""
    diff = (a.double() - ref.double()).abs()
    return float(diff.pow(2).mean().sqrt()), float(diff.max())


def main() -> None:
    sample = next(s for s in BUILTIN_SAMPLES if s.id.endswith("conv_bn"))
    device = torch.device("cuda")
    for allow in (True, False):
        torch.backends.cudnn.allow_tf32 = allow
        torch._dynamo.reset()
        model = sample.make_model(device).eval()
        x = sample.make_inputs(device)[0].args[0]
        with torch.no_grad():
            eager = model(x)
            compiled = torch.compile(model)(x)
            model64 = sample.make_model(device).eval().to(torch.float64)
            exact = model64(x.double())
            for tensor in [*model64.parameters(), *model64.buffers()]:
                if tensor.is_floating_point():
                    tensor.copy_(round_to_tf32(tensor))
            rounded = model64(round_to_tf32(x.double()))
        print(
            f"cudnn.allow_tf32={allow}: eager vs fp64 (rmse, max) {_error_vs(eager, exact)}; "
            f"compiled vs fp64 {_error_vs(compiled, exact)}; TF32 rounding alone {_error_vs(rounded, exact)}; "
            f"compiled vs eager max {float((compiled - eager).abs().max()):.3g}"
        )


if __name__ == "__main__":
    main()
