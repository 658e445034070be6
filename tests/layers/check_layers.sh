#!/bin/bash
# Imports only point down: every #include "..." in src/ and apps/ names a file of the including
# folder's floor or a lower one, and no folders include each other in a loop.
#
#   bash tests/layers/check_layers.sh [REPO_ROOT]
#
# The floors, lowest first (a folder may include its own floor and those below it). backend/cpu
# and backend/cuda are part of backend; apps/ is the top. A folder of src/ missing from the table
# fails the check: a new folder takes its place here first.
#
# And nothing above the backend names the CPU op set: no file under src/ outside src/backend/
# spells `cpu::` (the model, decoding and benchmarks compute through Backend ops,
# backend/backend.h, so that every backend runs them).
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2

floors='
0 core
1 io tokenizer dist backend
2 model data
3 optim infer eval
4 serve ckpt
5 bench train
6 sizing aegis
7 apps
'

# Every include as "file line from-folder to-folder": the folder of src/DIR/FILE.h is DIR; an include
# without a slash names a file beside the includer.
edges=$(find src apps -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \
          -o -name '*.inc' -o -name '*.in' \) | LC_ALL=C sort | while read -r f; do
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" /dev/null
done | awk -F: '
  {
    file = $1; line = $2; text = $0
    sub(/^[^"]*"/, "", text); sub(/".*$/, "", text)
    n = split(file, p, "/"); from = (p[1] == "apps") ? "apps" : p[2]
    if (index(text, "/") == 0) to = from
    else { split(text, q, "/"); to = q[1] }
    print file, line, from, to
  }')

cpu_calls=$(grep -rn --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
  --include='*.inc' 'cpu::' src | grep -v '^src/backend/')
cpu_ok=1
if [[ -n "$cpu_calls" ]]; then
  echo "$cpu_calls" | sed 's/$/   <- names cpu:: above the backend (call the Backend op instead)/'
  cpu_ok=0
fi

echo "$edges" | awk -v floors="$floors" '
  BEGIN {
    n = split(floors, rows, "\n")
    for (i = 1; i <= n; ++i) {
      k = split(rows[i], w, " ")
      for (j = 2; j <= k; ++j) floor[w[j]] = w[1]
    }
    bad = 0
  }
  NF == 4 {
    file = $1; line = $2; from = $3; to = $4
    if (!(from in floor)) { unknown[from] = file; next }
    if (!(to in floor)) { printf "%s:%s: includes from \"%s\", a folder with no floor\n", file, line, to; bad = 1; next }
    if (floor[to] > floor[from]) {
      printf "%s:%s: upward import: %s (floor %d) includes %s (floor %d)\n", file, line, from, floor[from], to, floor[to]
      bad = 1
    }
    if (from != to) { key = from " " to; if (!(key in seen)) { seen[key] = file ":" line; edge[from] = edge[from] " " to } }
  }
  # A cycle between folders: depth-first search over the folder graph, grey = on the path.
  function visit(v,    k, m, list, w) {
    colour[v] = 1; path[++depth] = v
    m = split(edge[v], list, " ")
    for (k = 1; k <= m; ++k) {
      w = list[k]
      if (colour[w] == 1) { report(w); continue }
      if (colour[w] == 0) visit(w)
    }
    colour[v] = 2; --depth
  }
  function report(w,    i, start, s) {
    for (i = 1; i <= depth; ++i) if (path[i] == w) start = i
    s = ""
    for (i = start; i <= depth; ++i) s = s path[i] " -> "
    s = s w
    printf "cycle between folders: %s (", s
    for (i = start; i <= depth; ++i) printf "%s%s", (i > start ? ", " : ""), seen[path[i] " " (i < depth ? path[i + 1] : w)]
    printf ")\n"
    bad = 1
  }
  END {
    for (f in unknown) { printf "%s: folder \"%s\" has no floor in tests/layers/check_layers.sh\n", unknown[f], f; bad = 1 }
    for (v in edge) if (colour[v] == 0) visit(v)
    if (bad) exit 1
    printf "layers: %d folder imports, all pointing down, no cycle\n", length(seen)
  }'
layers_rc=$?
if [[ $cpu_ok == 1 ]]; then
  echo "layers: no cpu:: outside src/backend/"
else
  exit 1
fi
exit $layers_rc
