"""pytest plugin: run torch.compile / Inductor templates against eager, and benchmark them."""

from .templates.registry import Requirements, Template

__all__ = ["Requirements", "Template"]
__version__ = "0.1.0"
