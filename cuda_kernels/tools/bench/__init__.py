"""The benchmark harness: `python benchmark.py` (repo root) or `python -m cuda_kernels.tools.bench`.

table.py   the one op table: inputs, our call, torch's, the check, bytes and FLOPs, sweeps, rooflines
timing.py  CUDA events with an L2 flush and a head start, CUDA graphs, the stop rule and statistics
run.py     correctness first, then every implementation of a case timed in interleaved rounds
report.py  records, metrics, the terminal table, JSON, CSV, the plot and --compare
env.py     datasheet peaks, clocks, versions, commit: what produced the numbers
cli.py     the command line
"""
