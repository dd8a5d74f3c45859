# shellcheck shell=bash
# Sourced by the cluster tests: exits 77 (CTest: skipped) with one line when the harness cannot run.
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: not root: network namespaces, nftables and tc need root"
  exit 77
fi
for _tool in ip bridge nft tc unshare; do
  command -v "$_tool" >/dev/null 2>&1 || { echo "SKIP: \`$_tool\` not found (apt-get install iproute2 nftables util-linux)"; exit 77; }
done
_probe="orcl-probe-$$"
if ! ip netns add "$_probe" >/dev/null 2>&1; then
  echo "SKIP: cannot create a network namespace (ip netns add failed)"
  exit 77
fi
ip netns del "$_probe" >/dev/null 2>&1
unset _probe _tool
