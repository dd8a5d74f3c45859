#!/usr/bin/env bash
# cluster.self_test: scripts/cluster.sh --self-test on 4 hosts, 50 per mille on host 2's link.
#   self_test.sh CLUSTER_SH
set -uo pipefail
. "$(dirname "$0")/skip_unless_root_netns.sh"
"$1" --hosts 4 --drop-host 2=50 --self-test-packets 400 --self-test
