"""What the plugin resolved for a pytest session (templates, matrix, samples, where triples run), and the plugin's
state in ``config.stash``: the options, the timing policy, the thread scope and that session."""

from __future__ import annotations

import sys
import tempfile
import types
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from ..diagnose import standby
from ..engine.cell import CheckPolicy, Verdict
from ..engine.diagnosis import LEDGER, DiagnosisPlan, RunLedger, needs_diagnosis, repro_folder
from ..engine.triples import TripleCache
from ..integrations.auto_workers import AutoWorkers
from ..integrations.benchmark import timing_switched_off_by, user_chose_timer
from ..integrations.xdist import XdistHooks, pinned_gpus, shared_host, timed_device, worker_count
from ..machine import Device, visible_devices
from ..samples.base import Sample
from ..samples.sources import select_samples, weights_line
from ..settings import Settings
from ..templates import selection as selection_module
from ..templates.matrix import Case, select_devices
from ..templates.registry import EAGER, TemplateRegistry
from ..templates.user import TemplateDefinitionError, add_user_templates, hook_definitions, load_templates_file
from ..timing import cores, host_lock
from ..timing.policy import TimingPolicy
from ..timing.processes import most_processes_for
from ..timing.threads import COMPILE_THREADS, ThreadScope, compile_threads_share, xdist_workers
from ..tolerance import Tolerance
from ..worker import protocol
from ..worker.client import WorkerProcess
from ..worker.remote import RemoteTriples
from .deferred import Deferred

TEMPLATES_MARKER = "inductor_templates"


def build_registry(config: pytest.Config, settings: Settings) -> TemplateRegistry:
    """Built-in templates, then the templates file's, then conftest's."""
    registry = TemplateRegistry()
    try:
        file_option = settings.get("inductor_templates_file")
        if file_option is not None:
            path = file_option.path()
            try:
                definitions = load_templates_file(path)
            except TemplateDefinitionError as error:
                raise file_option.usage_error(str(error)) from None
            add_user_templates(registry, definitions, str(path.name))
        results = config.hook.pytest_inductor_templates(config=config)
        add_user_templates(registry, hook_definitions(results), "conftest")
    except TemplateDefinitionError as error:
        raise pytest.UsageError(str(error)) from None
    return registry


class InductorSession:
    """What the plugin resolved for this pytest session: templates, the matrix, the samples."""

    def __init__(
        self,
        registry: TemplateRegistry,
        columns: list[selection_module.Selection],
        devices: list[Device],
        visible: list[Device],
        samples: list[Sample],
        tolerance: Tolerance | None = None,
        policy: CheckPolicy | None = None,
        left_out: list[tuple[str, str]] | None = None,
        triples: TripleCache | RemoteTriples | None = None,
        timeout: float | None = None,
        split: cores.Split | None = None,
    ) -> None:
        self.registry = registry
        self.left_out = left_out or []  # (template, why) that --inductor-template=all leaves out here
        self.columns = columns
        self.devices = devices
        self.visible = visible
        self.samples = samples
        self.tolerance = tolerance
        self.policy = policy or CheckPolicy()
        self.triples = triples if triples is not None else TripleCache(tolerance, self.policy)
        self.timeout = timeout  # --inductor-timeout
        self.split = split  # the CPUs of timings and of work, where compiles go on beside timings

    @classmethod
    def from_settings(cls, config: pytest.Config, settings: Settings) -> InductorSession:
        registry = build_registry(config, settings)
        visible = visible_devices()
        policy = CheckPolicy(settings.require_effect, settings.second_opinion, settings.tf32, settings.fresh_cache)
        devices = select_devices(settings.get("inductor_devices"), visible)
        split = cpu_split(config, settings, devices)
        triples: TripleCache | RemoteTriples
        if settings.isolated:
            triples = remote_triples(config, settings, policy, plugin_state(config).timing, devices, split)
        else:
            triples = TripleCache(settings.tolerance, policy, settings.memory_budget)
        return cls(
            registry,
            selection_module.resolve(settings, registry, visible),
            devices,
            visible,
            select_samples(settings),
            settings.tolerance,
            policy,
            selection_module.left_out_by_all(settings, registry, visible),
            triples,
            settings.timeout,
            split,
        )

    def times_without_benchmark(self, case: Case) -> bool:
        """Whether to time although pytest-benchmark switched itself off: under pytest-xdist, a worker times the
        sample items of the device type it was given (CUDA when the workers share the GPUs, the CPU when the matrix
        holds it alone), into the records."""
        return isinstance(self.triples, RemoteTriples) and self.triples.timed_device == case.device.type

    @cached_property
    def sample_cases(self) -> list[Case]:
        """The sample matrix: the eager row first, then every selected column, per device."""
        eager = selection_module.Selection(template=self.registry[EAGER])
        columns = [eager] + [c for c in self.columns if c.compiles]
        return [Case(column, device) for device in self.devices for column in columns]

    @cached_property
    def matrix_cases(self) -> list[tuple[str, str]]:
        """(template label, device name) of every cell of the matrix, samples' and user tests'."""
        cases = [(c.selection.label, c.device.name) for c in self.sample_cases]
        cases += [(column.label, device.name) for column in self.columns for device in self.devices]
        return list(dict.fromkeys(cases))

    def test_params(self, node: pytest.Item, with_device: bool) -> list[Any]:
        """``pytest.param``s of (selection[, device]) for a user test, honouring its marker."""
        columns = [c for c in self.columns if c.compiles] or self.columns
        marker = node.get_closest_marker(TEMPLATES_MARKER)
        excluded: set[str] = set()
        if marker is not None:
            unknown = [n for n in [*marker.args, *marker.kwargs.get("exclude", ())] if n not in self.registry]
            if unknown:
                pytest.fail(
                    f"@pytest.mark.{TEMPLATES_MARKER}: {self.registry.unknown_name_message(unknown[0])}",
                    pytrace=False,
                )
            if marker.args:
                base = columns[0]
                if base.backend != selection_module.DEFAULT_BACKEND and any(
                    self.registry[n].settings for n in marker.args
                ):
                    pytest.fail(
                        f"@pytest.mark.{TEMPLATES_MARKER}: templates set Inductor options, which backend "
                        f"{base.backend!r} cannot take",
                        pytrace=False,
                    )
                columns = [
                    selection_module.Selection(
                        template=self.registry[name],
                        backend=base.backend,
                        fullgraph=base.fullgraph,
                        dynamic=base.dynamic,
                        origin=f"@pytest.mark.{TEMPLATES_MARKER}",
                    )
                    for name in marker.args
                ]
            excluded = set(marker.kwargs.get("exclude", ()))
        params = []
        for column in columns:
            for device in self.devices if with_device else self.devices[:1]:
                case = Case(column, device)
                reason = case.problem(self.visible)
                if column.label in excluded:
                    reason = f"template {column.label!r} excluded by @pytest.mark.{TEMPLATES_MARKER}"
                values = (column, torch_device(device)) if with_device else (column,)
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                params.append(pytest.param(*values, id=case.id if with_device else column.label, marks=marks))
        return params

    def header_lines(self) -> list[str]:
        import torch

        first = self.columns[0]
        visible = ", ".join(
            d.name + (f" ({d.description}, sm {d.capability[0]}.{d.capability[1]})" if d.capability else "")
            for d in self.visible
        )
        dynamic = {None: "auto", True: "true", False: "false"}[first.dynamic]
        lines = [
            f"inductor-templates: torch {torch.__version__}; visible devices: {visible}",
            f"inductor-templates: {', '.join(c.description for c in self.columns)} {first.came_from}; "
            f"backend {first.backend}, fullgraph {first.fullgraph}, dynamic {dynamic}",
            f"inductor-templates: devices: {', '.join(d.name for d in self.devices)}",
        ]
        lines += [f"inductor-templates: overridden by the command line: {o}" for o in first.overridden]
        lines += [f"inductor-templates: all: left out {name}: {why}" for name, why in self.left_out]
        for column in self.columns:
            settings = ", ".join(f"{k}={v!r}" for k, v in column.effective_settings.items()) or "none (defaults)"
            lines.append(f"inductor-templates: {column.label}: effective Inductor settings: {settings}")
            if column.config_patches:
                lines.append(
                    f"inductor-templates: {column.label}: applied as a scoped config patch: "
                    + ", ".join(column.config_patches)
                )
            if column.inference_only:
                lines.append(
                    f"inductor-templates: {column.label}: inference only: compiled calls run under torch.no_grad()"
                )
            for device in self.devices:
                case = Case(column, device)
                if problem := case.problem(self.visible):
                    lines.append(f"inductor-templates: skipped: {problem}")
                elif note := case.fallback_note:
                    lines.append(f"inductor-templates: fallback: {note}")
        if self.samples:
            lines.append(
                f"inductor-templates: {len(self.samples)} sample(s) x {len(self.sample_cases)} "
                "case(s) (eager row included)"
            )
            lines.append(f"inductor-templates: {self.triples.description}")
            if weights := weights_line(self.samples):
                lines.append(f"inductor-templates: {weights}")
        if self.timeout is not None:
            lines.append(f"inductor-templates: a sample item is stopped after {self.timeout:g} s (--inductor-timeout)")
        if self.split is not None:
            lines.append(
                "inductor-templates: compiles that leave the GPU alone go on beside CUDA timings "
                f"(--inductor-compile-beside-timing): timings on CPUs {cores.cpu_list(self.split.timing)}, work on "
                f"CPUs {cores.cpu_list(self.split.work)}"
            )
        if self.policy.fresh_cache:
            lines.append(
                "inductor-templates: compile caches: an empty one for each triple and user test "
                "(--inductor-fresh-cache): every compile is cold"
            )
        return lines

    def xdist_hooks(self, config: pytest.Config, settings: Settings, auto: AutoWorkers | None = None) -> XdistHooks:
        """The controller's pytest-xdist hooks: the matrix's cells (to record a crashed user test) and, for
        sample runs, the GPUs the workers share and the device type whose sample items they time; ``auto``: how
        ``-n auto`` was sized."""
        devices = settings.get("inductor_devices")
        cuda = sum(d.type == "cuda" for d in self.visible)
        gpus = pinned_gpus(config, cuda, str(devices.value).strip() if devices else None) if self.samples else []
        cpu_alone = bool(self.samples) and all(d.type == "cpu" for d in self.devices)
        workers = worker_count(config)  # 0 without -n: no xdist worker times anything
        timed = None if not workers else "cuda" if gpus else "cpu" if cpu_alone else None
        untimed = timing_switched_off_by(config) if settings.isolated else "--inductor-isolation=none"
        samples = bool(self.samples) and settings.isolated
        return XdistHooks(gpus, self.matrix_cases, timed, untimed, workers, settings.lock_log, auto,
                          samples, self.split)  # fmt: skip


def templates_listing(config: pytest.Config, settings: Settings) -> str:
    """``--inductor-list-templates``: every template, its settings, and whether it runs here."""
    import torch

    from ..templates.listing import listing

    return listing(build_registry(config, settings), visible_devices(), torch.__version__)


def torch_device(device: Device) -> Any:
    import torch

    return torch.device(device.name)


def conftest_modules(config: pytest.Config) -> list[tuple[str, str]]:
    """(module name, file) of every conftest.py the session has loaded, outermost first."""
    found = []
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if isinstance(plugin, types.ModuleType) and file and Path(file).name == "conftest.py":
            found.append((plugin.__name__, file))
    return sorted(found, key=lambda module: (len(Path(module[1]).parts), module[1]))


def repeat_processes(settings: Settings, devices: list[Device]) -> int:
    """The processes beside an item's own that repeat its timings: as many as the session's devices may use (the most
    of any: on CUDA seven by default; on the CPU none)."""
    return max(most_processes_for(settings.timing_processes, device.type) for device in devices) - 1


def cpu_split(config: pytest.Config, settings: Settings, devices: list[Device]) -> cores.Split | None:
    """The host's CPUs split between timings and work (``--inductor-compile-beside-timing=on``), or None: off, or
    nothing to split for (no other process times beside this session's work: no ``-n`` and one timing process, or
    timing switched off)."""
    if not settings.compile_beside_timing:
        return None
    chosen = settings.get("inductor_compile_beside_timing")
    assert chosen is not None
    if not settings.isolated:
        raise chosen.usage_error("needs --inductor-isolation=process: in the pytest process nothing runs beside")
    if any(device.type != "cuda" for device in devices):
        raise chosen.usage_error("needs CUDA devices only: a CPU timing would share its CPUs with the compiles")
    split = cores.host_split(gpus=len({device.name for device in devices}))
    if not split.timing:
        raise chosen.usage_error("needs two or more CPU cores this process may run on, and Linux")
    if not (worker_count(config) or repeat_processes(settings, devices)) or timing_switched_off_by(config):
        return None
    return split


def remote_triples(
    config: pytest.Config,
    settings: Settings,
    policy: CheckPolicy,
    timing: TimingPolicy,
    devices: list[Device],
    split: cores.Split | None = None,
) -> RemoteTriples:
    """The session's triples in a worker process set up like this one (its ``sys.path``, its conftest files,
    its intra-op threads), with the repeat processes its ``devices``' timings use; ``split``: the CPUs of timings
    and of work, where compiles go on beside timings."""

    # the repeaters compile from the cache the first process filled, so they start no compile pool of their own;
    # they work side by side, so outside pytest-xdist (which shares its own lock) this session keeps their timings
    # apart from their work with a lock of its own
    repeats = repeat_processes(settings, devices)
    sharing, own_lock = shared_host(config), None
    if sharing is None and repeats and host_lock.available():
        own_lock = tempfile.mkdtemp(prefix="inductor-templates-lock-")
        sharing = host_lock.Sharing(own_lock, log=host_lock.new_log(settings.lock_log), split=split)

    def hello(diagnose: bool = False) -> protocol.Hello:
        return protocol.Hello(list(sys.path), conftest_modules(config), settings.tolerance, policy,
                              settings.memory_budget, timing.threads, sharing, diagnose)  # fmt: skip

    work_cpus = len(sharing.split.work) if sharing is not None and sharing.split is not None else None
    share = compile_threads_share(xdist_workers(), work_cpus)  # each xdist worker's sample worker: its share
    environment = {COMPILE_THREADS: str(share)} if share is not None else {}
    keeps_ready = settings.diagnose and standby.worth_keeping(xdist_workers())  # a diagnosis process ready
    worker = WorkerProcess(lambda: hello(keeps_ready), environment=environment)  # the repeaters diagnose nothing
    repeaters = [WorkerProcess(hello, environment={COMPILE_THREADS: "1"}) for _ in range(repeats)]
    return RemoteTriples(
        worker, settings.recycle_triples, settings.recycle_rss, timed_device(config), repeaters, own_lock
    )


@dataclass
class PluginState:
    """The plugin's state for one pytest session: its options (read once), timing policy, intra-op thread scope,
    and the resolved session, made on first use (only where the plugin is used)."""

    config: pytest.Config
    options: Settings
    timing: TimingPolicy
    threads: ThreadScope
    resolved: InductorSession | None = None
    auto_workers: AutoWorkers | None = None  # how -n auto was sized, when the plugin sized it
    own_ledger: Path | None = None  # the diagnosis ledger's folder where pytest keeps no temporary folder
    deferred: Deferred = field(default_factory=Deferred)  # failures diagnosed after the items (a run budget)

    @property
    def defers_diagnoses(self) -> bool:
        """Whether failed sample items are diagnosed after the run's items, cheapest first: with a run budget."""
        return self.options.diagnose and self.options.diagnose_run_budget is not None

    def time_for_workers(self, workers: int) -> None:
        """In pytest-xdist's controller of ``workers``: the timing policy they run with (their share of the CPUs),
        for the header and ``machine_info``."""
        if workers > 1:
            self.timing = TimingPolicy.from_settings(self.options, workers, user_chose_timer(self.config))

    @property
    def session(self) -> InductorSession:
        """The resolved session, made (and every option checked) on first use."""
        if self.resolved is None:
            self.resolved = InductorSession.from_settings(self.config, self.options)
        return self.resolved

    def diagnosis_plan(self, item: pytest.Item, verdict: Verdict) -> DiagnosisPlan | None:
        """The plan of a diagnosis of ``item``'s failed check, counted against the run's cap and budget (in the
        run's ledger, which every xdist worker shares; a plan past them says why it is refused); None when the
        check did not fail or diagnoses are off."""
        if not (self.options.diagnose and needs_diagnosis(verdict)):
            return None
        ledger = self.ledger()
        granted = ledger.claim(self.options.diagnose_budget)
        folder = repro_folder(self.options.repro_dir, item.nodeid)
        budget, refused = (granted, None) if isinstance(granted, float) else (0.0, granted)
        processes = self.options.diagnose_processes
        return DiagnosisPlan(budget, folder, item.nodeid, conftest_modules(self.config), processes,
                             ledger if refused is None else None, refused)  # fmt: skip

    def ledger(self) -> RunLedger:
        """The run's diagnosis ledger, in the run's temporary folder (pytest-xdist's controller's: its workers'
        folders lie inside it)."""
        factory = getattr(self.config, "_tmp_path_factory", None)  # absent under -p no:tmpdir: this process's count
        if factory is not None:
            base = factory.getbasetemp()
            run = base.parent if hasattr(self.config, "workerinput") else base
        else:
            self.own_ledger = self.own_ledger or Path(tempfile.mkdtemp(prefix="inductor-diagnoses-"))
            run = self.own_ledger
        return RunLedger(run / LEDGER, self.options.diagnose_max, self.options.diagnose_run_budget)


STATE_KEY = pytest.StashKey[PluginState]()


def plugin_state(config: pytest.Config) -> PluginState:
    """The plugin's state, made the first time it is asked for (the command line's main hook, or configure in a
    pytest-xdist worker)."""
    if STATE_KEY not in config.stash:
        options = Settings(config)
        timing = TimingPolicy.from_settings(options, timer_chosen=user_chose_timer(config))
        config.stash[STATE_KEY] = PluginState(config, options, timing, ThreadScope(timing.threads))
    return config.stash[STATE_KEY]
