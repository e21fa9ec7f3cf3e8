"""The composition root: it builds the engine, drives load through it, measures and decides; the commands that face
the user stand above it, in cli/, and it imports neither them nor reports/.

Rooms, by role (docs/architecture.md draws the arrows between them):

    session/     build the engine, drive a scenario's load, record the run
    collectors/  spans, GC pauses, py-spy samples, torch.profiler windows, NVML, counters
    analysis/    breakdown, stack classification, serving metrics, the verdict: pure functions
    checks/      golden, verify, selftest and its planted injections
    budget/      CI budgets: the file, the check, JUnit/BMF output
    overhead/    what profiling costs: estimates, whole-run and in-run A/B
    rundir/      the run-directory contract reports read: schema, atomic writes, environment, samples
    stats.py     the one statistics module (Mann-Whitney U, bootstrap intervals)
"""
