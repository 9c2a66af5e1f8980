#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The packaging legs of scripts/test-matrix.sh (CONTRIBUTING.md, "Test legs"):
#   build    `python -m build` (the sdist, then a wheel from it), a wheel built straight from the
#            tree, `twine check`, and the two wheels' file lists and contents compared;
#   lowest   the wheel installed into a fresh virtualenv with every dependency of its metadata
#            (the runtime ones and every extra's) at the lowest version its bound allows
#            (`uv pip install --resolution lowest-direct`), and the host suite run against it;
#   highest  the same with the newest versions (`--resolution highest`).
# The host suite runs from a copy of the checkout without bpfkit/ (in a temporary directory),
# so `import bpfkit` finds the installed wheel only: the run prints bpfkit.__file__ and stops if
# it is not inside the leg's virtualenv. Each leg prints the versions it installed.
#
#   scripts/wheel-legs.sh [build|lowest|highest ...] [-- PYTEST ARGS]   (default: all three legs;
#                                                                        pytest: tests integration)
# Results (junit XML, each leg's `pip freeze`) go to $BPFKIT_RESULTS_DIR (scripts/results-dir.sh).
# uv is installed with pip into a tool virtualenv (build/wheel-legs/tools) beside build and twine;
# the package indexes and find-links are the machine's pip configuration's (`pip config list`).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON=${BPFKIT_PYTHON:-python3}
WORK=$REPO/build/wheel-legs
EXTRAS=test,numpy,metrics,otlp,pprof

legs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do legs+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
pytest_args=("$@")
[ ${#pytest_args[@]} -gt 0 ] || pytest_args=(tests integration)
[ ${#legs[@]} -gt 0 ] || legs=(build lowest highest)

source scripts/results-dir.sh
# The tests load bpf/'s objects (`make -C bpf`) and use the tools setup.sh installs.
scripts/setup.sh || exit 1

tools=$WORK/tools
if [ ! -x "$tools/bin/uv" ] || [ ! -x "$tools/bin/twine" ] || ! "$tools/bin/python" -c 'import build' 2>/dev/null; then
  "$PYTHON" -m venv "$tools" && "$tools/bin/pip" install -q --disable-pip-version-check build twine uv || exit 1
fi

# uv does not read pip's configuration: hand it the machine's indexes, find-links, constraints and
# CA bundle. Environment settings (PIP_*) win over the files, as for pip. unsafe-best-match:
# pip's rule (the best version over every index); uv's default takes a package from the first
# index that has it, whose versions may lack the lowest bound.
pip_config() {  # pip_config KEY: the value pip would use for KEY, empty if none.
  "$tools/bin/pip" config list 2>/dev/null | awk -v key="$1" '
    { split($0, kv, "="); name = kv[1]; sub(/^[^=]*=/, ""); gsub(/^'\''|'\''$/, "") }
    name == ":env:." key { env = $0 } name ~ ("\\." key "$") && name !~ /^:env:/ { file = $0 }
    END { print (env != "" ? env : file) }'
}
export UV_INDEX_STRATEGY=unsafe-best-match UV_NO_PROGRESS=1
v=$(pip_config index-url); [ -z "$v" ] || export UV_DEFAULT_INDEX=$v
v=$(pip_config extra-index-url); [ -z "$v" ] || export UV_INDEX=$v
v=$(pip_config find-links); [ -z "$v" ] || export UV_FIND_LINKS=${v// /,}
v=$(pip_config constraint); [ -z "$v" ] || export UV_CONSTRAINT=$v
v=$(pip_config cert); [ -z "$v" ] || export SSL_CERT_FILE=$v
unset PIP_CONSTRAINT

built=0
build_dists() {  # Builds $WORK/dist (sdist + wheel from it) and $WORK/direct (wheel from the tree).
  rm -rf "$WORK/dist" "$WORK/direct"
  "$tools/bin/python" -m build -o "$WORK/dist" . >"$WORK/build.log" 2>&1 \
    && "$tools/bin/python" -m build --wheel -o "$WORK/direct" . >>"$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; echo "build: python -m build failed (log: $WORK/build.log)"; return 1; }
  built=1
}

leg_build() {
  build_dists || return 1
  "$tools/bin/twine" check --strict "$WORK"/dist/* || return 1
  # The wheel built from the sdist and the one built from the tree: the same files, the same
  # bytes (RECORD aside, which lists them); then what the wheel must hold.
  "$tools/bin/python" - "$WORK"/dist/*.whl "$WORK"/direct/*.whl <<'EOF'
import sys
sys.path.insert(0, "tests")
from packaging_support import wheel_differences, wheel_members, wheel_problems
problems = wheel_differences(sys.argv[1], sys.argv[2]) + wheel_problems(sorted(wheel_members(sys.argv[1])))
for p in problems:
    print("build:", p)
print(f"build: {len(wheel_members(sys.argv[1]))} files in the wheel;",
      "the sdist-built and tree-built wheels agree and hold what they must" if not problems else "PROBLEMS above")
sys.exit(1 if problems else 0)
EOF
}

leg_install() {  # leg_install LEG RESOLUTION: a fresh virtualenv $WORK/LEG with the wheel installed.
  local venv=$WORK/$1
  rm -rf "$venv"
  "$tools/bin/uv" venv -q --python "$PYTHON" "$venv" || return 1
  local wheel; wheel=$(ls "$WORK"/dist/*.whl)
  # uv's lowest-direct lowers only the requirements it is given, not a wheel's own: they are
  # read from the wheel's METADATA (Requires-Dist, every extra's) and given beside it.
  "$tools/bin/python" - "$wheel" "$EXTRAS" >"$venv.requirements.txt" <<'EOF' || return 1
import sys
sys.path.insert(0, "tests")
from packaging.requirements import Requirement
from packaging_support import wheel_metadata
wheel, extras = sys.argv[1], sys.argv[2].split(",")
meta = wheel_metadata(wheel)
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ["", *extras]):
        req.marker = None
        print(req)
EOF
  "$tools/bin/uv" pip install -q --python "$venv/bin/python" --compile-bytecode --resolution "$2" \
    "bpfkit[$EXTRAS] @ file://$wheel" -r "$venv.requirements.txt" || { echo "$1: uv pip install --resolution $2 failed"; return 1; }
  "$tools/bin/uv" pip freeze --python "$venv/bin/python" >"$results/$1-freeze.txt"
  # The versions the wheel's own requirements got (the rest are their dependencies).
  "$venv/bin/python" - "$1" "$2" <<'EOF'
import re, sys
from importlib import metadata
leg, resolution = sys.argv[1:]
names = sorted({re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in metadata.requires("bpfkit") or []}, key=str.lower)
print(f"{leg}: installed with --resolution {resolution}: " + ", ".join(f"{n} {metadata.version(n)}" for n in names))
EOF
  echo "$1: the whole environment: $(grep -v '^bpfkit @' "$results/$1-freeze.txt" | tr '\n' ' ')"
}

test_tree() {  # test_tree VENV: prints a fresh copy of the checkout without bpfkit/, its .venv the leg's.
  local tree; tree=$(mktemp -d "${TMPDIR:-/tmp}/bpfkit-wheel-test.XXXXXX")
  tar -C "$REPO" -c --exclude=./bpfkit --exclude=./.venv --exclude=./.git --exclude=./build \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache --exclude=.hypothesis . | tar -C "$tree" -x
  ln -s "$1" "$tree/.venv"
  echo "$tree"
}

leg_run() {  # leg_run LEG: the host suite against the wheel in $WORK/LEG, from a copy of the tree.
  local venv=$WORK/$1 tree rc
  tree=$(test_tree "$venv")
  local where; where=$(cd "$tree" && "$venv/bin/python" -c 'import bpfkit; print(bpfkit.__file__)')
  echo "$1: bpfkit imported from $where"
  case "$where" in "$venv"/lib/*) ;; *) echo "$1: bpfkit is not the installed wheel"; rm -rf "$tree"; return 1;; esac
  (cd "$tree" && "$venv/bin/python" -m pytest -p no:cacheprovider --junitxml="$results/$1.xml" "${pytest_args[@]}")
  rc=$?
  rm -rf "$tree"
  return $rc
}

status=0
summary=()
for leg in "${legs[@]}"; do
  echo "=== wheel leg: $leg"
  case "$leg" in
    build) leg_build; rc=$? ;;
    lowest|highest)
      [ $built = 1 ] || build_dists || exit 1
      resolution=$([ "$leg" = lowest ] && echo lowest-direct || echo highest)
      leg_install "$leg" "$resolution" && leg_run "$leg"; rc=$? ;;
    *) echo "unknown leg $leg (build, lowest, highest)"; exit 2 ;;
  esac
  summary+=("$leg: $([ $rc = 0 ] && echo passed || echo "FAILED ($rc)")")
  [ $rc = 0 ] || status=1
done
printf 'wheel legs: %s\n' "${summary[@]}"
exit $status
