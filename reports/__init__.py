"""Turns a finished run (profiler.rundir.results) into terminal tables, charts, HTML, PDF and trace files.

Import each name from the module that defines it (the package itself imports nothing, so importing one
module of it pulls in no matplotlib):

    run/generate.py        generate_reports(run_dir, *, html=True, pdf=True, traces=True) -> {name: relative path}
    run/terminal.py        render_summary(result_or_rundata, console): the terminal summary of one run
    run/html.py, run/pdf.py, exports/trace.py, exports/speedscope.py
                           write_html_report / write_pdf_report / write_chrome_trace / write_speedscope (run_dir)
    compare/analysis.py    compare_runs(before_dirs, after_dirs) -> ComparisonResult
    compare/report.py, compare/terminal.py
                           write_comparison_report(result, out_dir) / render_comparison(result, console)
"""
