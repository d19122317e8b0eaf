"""From a red item to the fault: stage, setting, operator, drift or miscompile, and a standalone repro.

The lead calls ``diagnose(DiagnosisRequest(...))`` with plain data after an item's verdict; the work runs in a
child process, stopped at the request's budget, and the answer is a plain ``Diagnosis``.
"""

from .drawn import SavedDraw, item_draw
from .process import diagnose
from .request import DIAGNOSED, Diagnosis, DiagnosisRequest, ModelBuilder, PickledModel

__all__ = [
    "DIAGNOSED",
    "Diagnosis",
    "DiagnosisRequest",
    "ModelBuilder",
    "PickledModel",
    "SavedDraw",
    "diagnose",
    "item_draw",
]
