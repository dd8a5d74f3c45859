# shellcheck shell=bash
# Sourced by the netem tests: exits 77 (CTest: skipped) with one line when the emulation cannot run.
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: not root: network namespaces and nftables need root"
  exit 77
fi
for tool in ip nft; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: \`$tool\` not found (apt-get install iproute2 nftables)"; exit 77; }
done
if ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: \`ip netns\` is unavailable here"
  exit 77
fi
_probe="optireduce-probe-$$"
if ! ip netns add "$_probe" >/dev/null 2>&1; then
  echo "SKIP: cannot create a network namespace (ip netns add failed)"
  exit 77
fi
ip netns del "$_probe" >/dev/null 2>&1
unset _probe
