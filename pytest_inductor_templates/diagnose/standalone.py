"""The body of every repro.py: torch alone, no plugin. Its source is copied into the repro verbatim.

``check`` compiles a graph module with the recorded settings from a fresh Inductor cache, calls it and
eager on the same inputs, and compares them as the plugin does: per dtype (torch.testing's tolerances, atol
scaled to the output's magnitude) or the item's explicit tolerance; an output beyond it passes when it is about
as close to a float64 run as eager is (RMSE and worst element, 3x eager's plus one rounding; the plugin also
compares per slice). Exit codes: 0 the fault is gone, 1 the fault is there, 2 the repro could not run.
"""

import contextlib
import copy
import math

import torch

TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
FACTOR = 3.0
TRUST = 2.0**14


@contextlib.contextmanager
def float64_everywhere():
    """Every lower-precision floating tensor and dtype argument of every operator widened to float64."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    low = (torch.float16, torch.bfloat16, torch.float32)

    def wide(v):
        if isinstance(v, torch.dtype):
            return torch.float64 if v in low else v
        if isinstance(v, torch.Tensor) and v.dtype in low:
            return v.to(torch.float64)
        return v

    class Widen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            written = {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
            names = [a.name for a in func._schema.arguments]
            args = tuple(a if i < len(names) and names[i] in written else tree_map(wide, a) for i, a in enumerate(args))
            kwargs = {k: v if k in written else tree_map(wide, v) for k, v in (kwargs or {}).items()}
            return func(*args, **kwargs)

    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Widen():
            yield
    finally:
        torch.set_default_dtype(default)


def flat(out):
    return list(torch.utils._pytree.tree_leaves(out))


def float64_outputs(module, inputs):
    """``module``'s outputs on ``inputs``, every operator in float64 (flat); None where it cannot run so."""
    try:
        copied = copy.deepcopy(module)  # before widening: the mode would widen a held tensor's copy
        with float64_everywhere():
            return flat(copied(*inputs))
    except Exception:
        return None


def _rms(t):
    t = t[torch.isfinite(t)]
    return math.sqrt(float((t**2).mean())) if t.numel() else 0.0


def compare(compiled, eager, wide, tolerance=None):
    """Messages for each output of ``compiled`` that differs from ``eager`` beyond the rule; empty when none."""
    problems = []
    if len(flat(compiled)) != len(flat(eager)):
        return [f"compiled returned {len(flat(compiled))} outputs, eager {len(flat(eager))}"]
    for index, (c, e) in enumerate(zip(flat(compiled), flat(eager), strict=True)):
        f = wide[index] if wide is not None else None
        name = f"output {index}"
        if not isinstance(e, torch.Tensor):
            if c != e:
                problems.append(f"{name}: compiled {c!r}, eager {e!r}")
            continue
        if c.shape != e.shape or c.dtype != e.dtype:
            problems.append(f"{name}: compiled {c.dtype}{list(c.shape)}, eager {e.dtype}{list(e.shape)}")
            continue
        c, e = c.detach().cpu(), e.detach().cpu()
        if not e.is_floating_point():
            if not torch.equal(c, e):
                problems.append(f"{name}: {int((c != e).sum())} of {e.numel()} elements differ (exact compare)")
            continue
        cd, ed = c.double(), e.double()
        scale = float(ed[torch.isfinite(ed)].abs().max()) if bool(torch.isfinite(ed).any()) else 0.0
        if tolerance is None:
            rtol, atol = TOLERANCES.get(e.dtype, TOLERANCES[torch.float32])
            atol = max(atol * scale, torch.finfo(e.dtype).tiny)
        else:
            rtol, atol = tolerance
        bad = ~((cd - ed).abs() <= atol + rtol * ed.abs()) & ~(cd.isnan() & ed.isnan()) & ~(cd == ed)
        if not bool(bad.any()):
            continue
        worst = float((cd - ed).abs()[bad].max())
        text = f"{name}: {int(bad.sum())} of {e.numel()} beyond rtol {rtol:g} atol {atol:g}, max |diff| {worst:.3g}"
        if f is None or not bool(torch.isfinite(cd).all()) or not bool(torch.isfinite(ed).all()):
            problems.append(text)
            continue
        f = f.detach().cpu().double()
        roundoff = torch.finfo(e.dtype).eps / 2
        err_c, err_e = (cd - f).abs(), (ed - f).abs()
        if float(err_e.max()) > min(TRUST * roundoff, 0.25) * max(scale, torch.finfo(e.dtype).tiny):
            problems.append(text + "; the float64 run is too far from eager to judge by")
            continue
        rmse_c, rmse_e = _rms(cd - f), _rms(ed - f)
        rms_ok = rmse_c <= FACTOR * rmse_e + roundoff * _rms(ed)
        worst_ok = float(err_c.max()) <= FACTOR * float(err_e.max()) + roundoff * scale
        if not (rms_ok and worst_ok):
            problems.append(
                f"{text}; against float64: compiled RMSE {rmse_c:.3g}, eager {rmse_e:.3g}, "
                f"worst {float(err_c.max()):.3g} vs {float(err_e.max()):.3g}"
            )
    return problems


def _clone(values):
    return [v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v for v in values]


def compile_pool_started(timeout=120.0):
    """Start Inductor's compile pool and wait until it is up: a compile before that compiles every kernel in this
    process, one after another (on a GPU minutes for a fresh cache). (The plugin's ``compile.pool`` does the same;
    a repro cannot import the plugin.)"""
    import time

    try:
        from torch._inductor import async_compile

        threads = getattr(async_compile, "get_compile_threads", lambda: async_compile.config.compile_threads)()
        if (threads or 1) <= 1:
            return
        async_compile.AsyncCompile.warm_pool()
        deadline = time.monotonic() + timeout
        while not async_compile.AsyncCompile.use_process_pool() and time.monotonic() < deadline:
            time.sleep(0.05)
    except Exception:  # a pool that cannot start: Inductor compiles in this process
        pass


def check(
    module,
    inputs,
    options=None,
    patches=None,
    no_grad=True,
    tolerance=None,
    second_opinion=True,
    backend="inductor",
    fresh=True,
):
    """(exit code, message): the module compiled by ``backend`` with ``options`` (torch.compile's) under config
    ``patches`` from a fresh cache (``fresh``; the diagnosis checks in its own fresh cache, whose FX graph and AOT
    caches are off, and loads the kernels its checks compiled), against eager (with the float64 second opinion
    unless ``second_opinion`` is False: then an output beyond the tolerance fails)."""
    from torch._inductor import config
    from torch._inductor.utils import fresh_cache

    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    try:  # as given: eager's call may change its buffers (running stats, counters)
        pristine = copy.deepcopy(module)
    except Exception as error:
        return 2, f"the module cannot be copied: {type(error).__name__}: {error}"
    try:
        with grad:
            eager = module(*_clone(inputs))
    except Exception as error:
        return 2, f"eager raised {type(error).__name__}: {error}"
    with grad:
        wide = float64_outputs(pristine, _clone(inputs)) if second_opinion else None
    torch._dynamo.reset()
    tensors = [v for v in [*inputs, *module.parameters(), *module.buffers()] if isinstance(v, torch.Tensor)]
    kinds = {t.device.type for t in tensors}
    if "cpu" in kinds:  # (in an empty cache a probe process per ISA: only where C++ kernels may be compiled)
        try:  # the CPU's vector ISAs, from the usual cache: they choose compiler flags, not what a graph computes
            from torch._inductor.cpu_vec_isa import pick_vec_isa

            pick_vec_isa()
        except Exception:
            pass
    try:
        with fresh_cache() if fresh else contextlib.nullcontext(), config.patch(patches or {}), grad:
            if kinds - {"cpu"}:  # on a GPU the pool compiles the Triton kernels side by side
                compile_pool_started()
            compiled = torch.compile(pristine, backend=backend, options=options or None)(*_clone(inputs))
    except Exception as error:
        inner = error  # the backend's own error inside Dynamo's wrappers
        while getattr(inner, "inner_exception", None) is not None or inner.__cause__ is not None:
            inner = getattr(inner, "inner_exception", None) or inner.__cause__
        first = next((line.strip() for line in str(inner).splitlines() if line.strip()), "")
        return 1, f"compiled raised {type(inner).__name__}: {first}"
    finally:
        torch._dynamo.reset()
    problems = compare(compiled, eager, wide, tolerance)
    if problems:
        return 1, "compiled differs from eager:\n  " + "\n  ".join(problems)
    return 0, "compiled matches eager: the fault is gone"
