#!/usr/bin/env bash
# cluster.cleanup: (1) SIGINT while a command runs in a 3-host cluster: scripts/cluster.sh must exit
# 130, kill the command and remove every namespace it made and its temporary directory;
# (2) without root it refuses with exit 2 and one line saying so, creating nothing.
#   cleanup.sh CLUSTER_SH
set -uo pipefail
cluster=$1
. "$(dirname "$0")/skip_unless_root_netns.sh"
bad=0
fail() { echo "FAIL: $*"; bad=1; }

marker="optireduce-cluster-cleanup-$$"
pattern="^sleep 29[89]\\.$$\$"   # the command's two sleeps: sleep 299.<this pid> and sleep 298.<this pid>
# Job control: the background cluster.sh gets its own process group and, unlike a plain background
# job of a script, does not start with SIGINT ignored; SIGINT to that group is what Ctrl-C does.
set -m
# The command: a process in host 0 and one in host 2 (through the rsh agent), both long sleeps.
"$cluster" --hosts 3 --drop 5 --rate 100mbit -- /bin/sh -c \
  "\"\$CLUSTER_RSH_AGENT\" h2 sleep 298.$$ & sleep 299.$$" \
  > /dev/null 2> "${TMPDIR:-/tmp}/$marker.err" &
pid=$!
up=0
for _ in $(seq 1 100); do   # up to 20 s for both sleeps to run
  [ "$(pgrep -c -f "$pattern")" = 2 ] && { up=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
namespaces=$(ip netns list | awk -v p="orcl-$pid-" 'index($1, p) == 1 { print $1 }' | sort | tr '\n' ' ')
echo "cluster.sh pid $pid, namespaces: $namespaces"
[ "$up" = 1 ] || fail "the command did not start in hosts 0 and 2 within 20 s"
[ "$namespaces" = "orcl-$pid-h0 orcl-$pid-h1 orcl-$pid-h2 orcl-$pid-sw " ] || fail "namespaces \"$namespaces\", expected 3 hosts and a switch"
kill -INT -- "-$pid"
rc=""
for _ in $(seq 1 100); do   # up to 20 s to clean up
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; rc=$?; break; }
  sleep 0.2
done
cat "${TMPDIR:-/tmp}/$marker.err"; rm -f "${TMPDIR:-/tmp}/$marker.err"
if [ -z "$rc" ]; then
  fail "cluster.sh still runs 20 s after SIGINT"; kill -KILL "$pid" 2>/dev/null
else
  echo "cluster.sh exited $rc after SIGINT"
  [ "$rc" = 130 ] || fail "exit code $rc after SIGINT, expected 130"
fi
left=$(ip netns list | awk -v p="orcl-$pid-" 'index($1, p) == 1 { print $1 }' | tr '\n' ' ')
[ -z "$left" ] || fail "namespaces left behind: $left"
if pgrep -f "$pattern" >/dev/null; then fail "processes left behind:"; pgrep -a -f "$pattern"; pkill -KILL -f "$pattern"; fi
left_tmp=$(find /tmp -maxdepth 1 -name 'optireduce-cluster.*' -newer "$0" -print 2>/dev/null | while read -r d; do
  grep -l "orcl-$pid-" "$d/rsh-agent" 2>/dev/null; done)
[ -z "$left_tmp" ] || fail "temporary directory left behind: $left_tmp"

# Without root: one line, exit 2, nothing created.
if command -v setpriv >/dev/null 2>&1; then
  before=$(ip netns list | wc -l)
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$cluster" -- true 2>&1)
  rc=$?
  echo "as nobody: exit $rc: $out"
  [ "$rc" = 2 ] || fail "as nobody: exit $rc, expected 2"
  case $out in *"must run as root"*) ;; *) fail "as nobody: no \"must run as root\" message" ;; esac
  [ "$(ip netns list | wc -l)" = "$before" ] || fail "as nobody: namespaces changed"
else
  echo "(setpriv not found: the non-root refusal is not checked)"
fi
[ "$bad" = 0 ] && echo PASS
exit "$bad"
