"""`run --target URL`: a scenario driven over HTTP against any OpenAI-compatible server, measured client-side.

probe.py         who the server is (reachable, model, name/version, infer-prof serve and its pid)
client.py        the asyncio HTTP load (httpx, streaming), per-chunk timestamps, the client's CPU
remote.py        the profile window of an infer-prof serve
server_split.py  the server's split from py-spy samples and its spans, per thread, GIL waits
session.py       prepare -> drive -> record, one run directory
"""
