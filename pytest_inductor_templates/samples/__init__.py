"""Samples: models with seeded inputs that the matrix runs under every template and device."""

from .base import Inputs, Sample, SampleError, Tolerance

__all__ = ["Inputs", "Sample", "SampleError", "Tolerance"]
