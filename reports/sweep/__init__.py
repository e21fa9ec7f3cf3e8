"""The crossover map of a sweep directory (profiler.rundir.sweepdir): terminal summary, sweep.html and
sweep.pdf, and the map of the difference between two sweeps.

Import each name from the module that defines it: analysis.py (read_crossover, build_crossover, Crossover),
terminal.py (render_sweep_summary), report.py (write_sweep_report), compare.py (compare_sweeps) and
compare_report.py (render_sweep_comparison, write_sweep_comparison).
"""
