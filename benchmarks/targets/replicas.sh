#!/usr/bin/env bash
# issue 62's replicas on one host: two fake replica servers behind a fake router (tests/.../fake_replicas.py),
# profiled through the router, first a round robin with the replicas found from its connections, then a 3:1 router
# with them named by --replica; each run's replica table and balance line, and what is left of ours after.
# Usage: benchmarks/targets/replicas.sh [OUT]
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/infer-prof-replicas}; rm -rf "$OUT"; mkdir -p "$OUT/tables"
PY=.venv/bin/python
FAKE=tests/profiler/session/target/fake_replicas.py
$PY -c "import sys; sys.path.insert(0, 'tests/profiler/session/target'); import fake_replicas; print(fake_replicas.TABLE)" > "$OUT/tables/fake-replicas.toml"
export INFER_PROF_ENGINE_TABLES="$OUT/tables"
printf 'description = "120 short requests at 20/s"\nseed = 0\nnum_requests = 120\nwarmup_requests = 1\nprompt_tokens = { dist = "fixed", value = 16 }\noutput_tokens = { dist = "fixed", value = 8 }\n[load]\nmode = "open-loop"\nrate = 20.0\n' > "$OUT/load.toml"
start() {  # start NAME ARGS...: a fake server in the background; its URL in $URL
  local name=$1; shift
  $PY $FAKE "$@" > "$OUT/$name.log" 2>&1 &
  for _ in $(seq 100); do grep -qs "listening on" "$OUT/$name.log" && break; sleep 0.1; done
  URL=$(sed -n 's/.*listening on //p' "$OUT/$name.log")
}
start replica-a; A=$URL; PA=$!; start replica-b; B=$URL; PB=$!
echo "replicas: $A $B (one host)"
run() {  # run NAME WEIGHTS FLAGS...
  local name=$1 weights=$2; shift 2
  start "router-$name" --backends "$A,$B" --weights "$weights"; local router=$URL ROUTER=$!
  echo "== $name: router $router, weights $weights"
  echo "infer-prof run --target $router --scenario $OUT/load.toml --no-report --out $OUT/$name $*"
  COLUMNS=150 .venv/bin/infer-prof run --target "$router" --scenario "$OUT/load.toml" --no-report --out "$OUT/$name" "$@" \
    > "$OUT/$name.stdout" 2> "$OUT/$name.stderr"
  echo "exit $?"
  sed -n '/^Replicas behind the router/,/^Blind spot/p' "$OUT/$name.stdout" | grep -v '^Blind spot'
  kill $ROUTER; wait $ROUTER 2>/dev/null
}
run round-robin 1,1
run three-to-one 3,1 --replica "$A" --replica "$B"
kill $PA $PB; wait $PA $PB 2>/dev/null
echo "left of ours:"; ps -eww -o pid,args | grep -E "fake_replicas|py-spy record --pid ($PA|$PB) " | grep -v grep || echo "  (none)"
