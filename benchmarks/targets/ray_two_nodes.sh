#!/usr/bin/env bash
# issue 62 on one host: a two-node local Ray cluster, the fake server whose model workers are Ray actors (one per node),
# profiled as today (the tree under the listener) and with --ray-address, then each failure mode; after each run,
# what of infer-prof's is left on the nodes (agents, their py-spy). Usage: benchmarks/targets/ray_two_nodes.sh [OUT]
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/infer-prof-ray-two-nodes}; rm -rf "$OUT"; mkdir -p "$OUT/tables"
PY=.venv/bin/python
$PY -c "import sys; sys.path.insert(0, 'tests/profiler/session/target'); import fake_ray_engine; print(fake_ray_engine.TABLE)" > "$OUT/tables/fake-ray.toml"
export INFER_PROF_ENGINE_TABLES="$OUT/tables"
printf 'description = "48 short requests at 8/s"\nseed = 0\nnum_requests = 48\nwarmup_requests = 1\nprompt_tokens = { dist = "fixed", value = 16 }\noutput_tokens = { dist = "fixed", value = 8 }\n[load]\nmode = "open-loop"\nrate = 8.0\n' > "$OUT/steady.toml"
sed 's/num_requests = 48/num_requests = 160/' "$OUT/steady.toml" > "$OUT/longer.toml"
ours() { ps -eww -o pid,args | grep -E "NodeAgent|infer-prof-ray-agent-" | grep -v grep || echo "  (none)"; }
field() { $PY -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$INFO" "$1"; }
$PY benchmarks/targets/local_ray_cluster.py 1 > "$OUT/cluster.log" 2>&1 &
CLUSTER=$!
for _ in $(seq 120); do grep -qs address "$OUT/cluster.log" && break; sleep 1; done
INFO=$(grep address "$OUT/cluster.log"); ADDR=$(field address); echo "cluster: $INFO"
$PY tests/profiler/session/target/fake_ray_server.py --ray-address "$ADDR" --nodes "$(field head),$(field second)" > "$OUT/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 120); do grep -qs "listening on" "$OUT/server.log" && break; sleep 1; done
URL=$(sed -n 's/.*listening on //p' "$OUT/server.log"); echo "server: $URL"
run() {
  local name=$1 scenario=$2; shift 2; local t0; t0=$(date +%s.%N)
  .venv/bin/infer-prof run --target "$URL" --scenario "$OUT/$scenario" --no-report --out "$OUT/$name" "$@" > "$OUT/$name.stdout" 2> "$OUT/$name.stderr"
  local rc=$?; echo "== $name: exit $rc in $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s"
  grep -E "^(Ray|node|infer-prof: error)" "$OUT/$name.stderr"; echo "left of ours:"; ours
}
run tree-only steady.toml
run with-ray steady.toml --ray-address "$ADDR"
run wrong-port steady.toml --ray-address 127.0.0.1:1
run http-port steady.toml --ray-address "${URL#http://}"
INFER_PROF_RAY_AGENT_CPUS=2 run no-cpu steady.toml --ray-address "$ADDR"
# the second node goes once both agents of this run are in their second chunk of samples
touch "$OUT/lost-starts"
( for _ in $(seq 600); do
    [ "$(find /tmp -maxdepth 2 -path '/tmp/infer-prof-ray-agent-*/*-2.log' -newer "$OUT/lost-starts" 2>/dev/null | wc -l)" -ge 2 ] && break
    sleep 0.2
  done
  sleep 1; kill -USR1 $CLUSTER ) &
run node-lost longer.toml --ray-address "$ADDR"
kill $SERVER; wait $SERVER 2>/dev/null
kill -TERM $CLUSTER; wait $CLUSTER; sleep 2
echo "left of ours at the end:"; ours
