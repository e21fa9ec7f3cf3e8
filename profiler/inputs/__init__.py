"""What users and servers hand infer-prof from outside a file it reads: addresses (a --target URL, a --ray cluster)
checked for form and tried with a bounded timeout, and a server's JSON replies read within a deadline."""
