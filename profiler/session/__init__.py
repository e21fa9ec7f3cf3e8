"""Build the engine, drive a scenario's load through it and record the run: the profiler's sessions.

Import each name from the module that defines it (the package itself imports nothing, so
`infer_prof.profiler.session.options` pulls in neither torch nor pandas):

    options.py     EngineOptions, parse_size                  the shared engine options
    builder.py     load_for_options, build_engine, BuiltEngine  model and engine assembly
    session.py     run_session, SessionHooks, SessionOutcome, default_run_dir   one profiled session
    runner.py      run_once, ModelCache                       a run from code, models loaded once
    counting.py    run_counting                               the deterministic counting run
"""
