"""Sweeps: one `infer-prof run` per combination of axis values, into a directory of run directories and
two merged tables (where Python becomes the bottleneck, across model sizes and loads).

Import each name from the module that defines it (the package itself imports nothing, so
`infer_prof.profiler.sweep.spec` pulls in neither torch nor Ray):

    spec.py     load_sweep, builtin_sweeps, SweepSpec                      the sweep file
    grid.py     build_cells, run_order, Cell, CellKey                       the grid
    run.py      run_sweep, write_tables, prepare_cells, RayTarget, SweepOutcome   a whole sweep, locally or on Ray
    hooks.py    SweepHooks                                                  what a face watches
"""
