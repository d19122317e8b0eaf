"""The parts of benchmarks/planted_faults.py: faults and harmless changes, measures, one sample's run, the summary."""
