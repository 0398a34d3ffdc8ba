#!/usr/bin/env bash
# bundle_test: the GPU node's first run, reproduced on any machine (no GPU
# needed). Packs the bundle from BUILD_DIR, unpacks it into an empty
# directory and runs it with nothing set -- env -i, PATH=/usr/bin:/bin, HOME on
# a 0700 directory, the system's bubblewrap hidden where a mount namespace
# allows -- as root and as an ordinary user (uid 4242), or as the caller
# alone when not root. Each identity must see:
#   anvil doctor --json: namespaces in force, with the bundle's own bwrap, and
#     the build cache usable by the sandbox's uid;
#   anvil eval of a seed: builds, then exit 3 (no GPU) or 0 (a GPU);
#   anvil eval of a source the policy refuses: REJECTED with the include and
#     its line, exit 5 (the candidate failed), text and --json, and the
#     candidate and its build stored with --db.
# Exit 77 (skipped) where the machine refuses user namespaces altogether.
#   deploy/bundle_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$(realpath "$1") BUILD=$(realpath "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ -z "${ANVIL_BUNDLE_TEST_DIR:-}" ]; then
  # Pack and unpack, then run the checks below in a child: in a mount
  # namespace where the system's bubblewrap is hidden, where one can be made.
  T=$(mktemp -d /tmp/anvil-bundle-test.XXXXXX)
  trap 'rm -rf "$T"' EXIT
  chmod 755 "$T"
  "$SRC/deploy/bundle" "$BUILD" "$T/pack" > "$T/bundle.log" 2>&1 || { cat "$T/bundle.log"; fail "deploy/bundle"; }
  mkdir -m 755 "$T/node"
  tar -C "$T/node" -xzf "$T/pack/anvil-bundle.tar.gz"
  rm -rf "$T/pack"
  if [ "$(id -u)" = 0 ] && [ -e /usr/bin/bwrap ] && unshare -m --propagation private true 2>/dev/null; then
    unshare -m --propagation private env ANVIL_BUNDLE_TEST_DIR="$T" bash -c \
      'mount --bind /dev/null /usr/bin/bwrap && exec "$0" "$@"' "$0" "$@"
  else
    ANVIL_BUNDLE_TEST_DIR="$T" "$0" "$@"
  fi
  exit $?
fi
T=$ANVIL_BUNDLE_TEST_DIR
A=$T/node/anvil
if [ -f /usr/bin/bwrap ] && [ -x /usr/bin/bwrap ]; then
  echo "note: the system's /usr/bin/bwrap is visible; checking that the bundle's is the one used"
else
  echo "system bwrap: hidden"
fi
cat > "$T/refused.cu" <<'CU'
// refused: reads a device as a header
#include <cuda_fp16.h>
#include "/dev/zero"
CU
chmod 644 "$T/refused.cu"

# as USER (uid or "root") with HOME: the command, with nothing else set
as() {
  local who=$1 home=$2; shift 2
  local run=(env -i PATH=/usr/bin:/bin HOME="$home")
  [ "$who" = root ] || run=(setpriv --reuid="$who" --regid="$who" --clear-groups "${run[@]}")
  ( cd "$home" && "${run[@]}" "$@" )
}
json() { python3 -c "import json,sys; d=json.loads(sys.stdin.readline()); print($1)"; }

check_identity() {
  local who=$1 home=$T/home-$1
  mkdir -m 700 "$home"
  [ "$who" = root ] || chown "$who:$who" "$home"
  echo "== as $who (HOME $home, mode 0700)"
  local doc
  doc=$(as "$who" "$home" "$A/bin/anvil" doctor --json) || fail "$who: doctor exit $?"
  local why
  why=$(echo "$doc" | json 'd["sandbox"]["why_not"]')
  if [ "$(echo "$doc" | json 'd["sandbox"]["isolation"]')" = refused ] && [[ $why != *"not found"* ]]; then
    echo "SKIPPED: this machine refuses namespaces to $who: $why"
    exit 77
  fi
  [ "$(echo "$doc" | json 'd["sandbox"]["isolation"]')" = namespaces ] ||
    fail "$who: isolation not namespaces: $(echo "$doc" | json 'd["sandbox"]')"
  [ "$(echo "$doc" | json 'd["sandbox"]["bwrap"]')" = "$A/bin/bwrap" ] ||
    fail "$who: bwrap is not the bundle's: $(echo "$doc" | json 'd["sandbox"]["bwrap"]')"
  [ "$(echo "$doc" | json 'd["sandbox"]["reachable"]')" = True ] ||
    fail "$who: $(echo "$doc" | json 'd["sandbox"].get("reachable_why")')"
  [ "$(echo "$doc" | json 'd["runner"]["path"]')" = "$A/bin/anvil-runner" ] || fail "$who: runner not the bundle's"
  [ "$(echo "$doc" | json 'd["cutlass"]["dir"]')" = "$A/share/anvil/cutlass" ] || fail "$who: CUTLASS not the bundle's"
  echo "doctor: namespaces with $A/bin/bwrap, cache $(echo "$doc" | json 'd["sandbox"]["build_cache"]')"

  local rc=0 out
  out=$(as "$who" "$home" "$A/bin/anvil" eval "$A/share/anvil/seeds/01_naive/kernel.cu" --shape 64x64x64 2>&1) || rc=$?
  grep -q "^build      VERDICT_PASSED" <<< "$out" || fail "$who: the seed did not build: $out"
  [ "$rc" = 3 ] || [ "$rc" = 0 ] || fail "$who: seed eval exit $rc (want 3 without a GPU): $out"
  echo "seed: built, exit $rc"

  rc=0
  out=$(as "$who" "$home" "$A/bin/anvil" --db "$home/anvil.db" eval "$T/refused.cu" --shape 64x64x64 2>&1) || rc=$?
  [ "$rc" = 5 ] || fail "$who: refused source exit $rc, want 5: $out"
  grep -q "^verdict    VERDICT_REJECTED" <<< "$out" || fail "$who: no REJECTED verdict: $out"
  grep -q 'line 3: #include "/dev/zero"' <<< "$out" || fail "$who: no reason with its line: $out"
  [ "$(as "$who" "$home" "$A/bin/anvil" --db "$home/anvil.db" doctor --json | json 'd["database"]["candidates"]')" = 1 ] ||
    fail "$who: the refused candidate was not stored"
  rc=0
  out=$(as "$who" "$home" "$A/bin/anvil" --json eval "$T/refused.cu" --shape 64x64x64) || rc=$?
  [ "$rc" = 5 ] || fail "$who: --json refused source exit $rc"
  [ "$(echo "$out" | json 'd["build"]["verdict"]')" = VERDICT_REJECTED ] || fail "$who: --json verdict: $out"
  [[ $(echo "$out" | json 'd["build"]["error"]') == *"line 3: #include"* ]] || fail "$who: --json reason: $out"
  echo "refused source: REJECTED, reason with its line, exit 5, stored"
}

if [ "$(id -u)" = 0 ]; then
  check_identity root
  check_identity 4242
else
  check_identity "$(id -u)"
fi
echo "PASS"
