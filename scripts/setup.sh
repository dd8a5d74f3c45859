#!/usr/bin/env bash
# Installs every dependency from Debian's archive (idempotent: only what is missing) and builds
# into build/. Usage: scripts/setup.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config gfortran
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  libucx-dev ucx-utils
  libfabric-dev libfabric-bin
  libhwloc-dev
  libssl-dev nettle-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-mpi4py python3-numpy
  nftables iproute2 iperf3 ethtool
  clang libclang-rt-14-dev
  python3-torch python3-matplotlib dataset-fashion-mnist
  slurm-wlm munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# MPICH is installed beside Open MPI only to build liboptireduce-mpich.so. Open MPI must stay the
# default mpicc/mpirun/mpiexec (and mpi.h/libmpi.so): if installing MPICH switched an alternative,
# switch it back.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for group in mpi mpirun "mpi-$arch"; do
  current=$(update-alternatives --query "$group" 2>/dev/null | awk '$1 == "Value:" { print $2 }')
  openmpi=$(update-alternatives --list "$group" 2>/dev/null | grep -m1 openmpi || true)
  if [[ -n $openmpi && $current != "$openmpi" ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "setup.sh: $group is $current, not Open MPI; run as root: update-alternatives --set $group $openmpi" >&2
      exit 1
    fi
    echo "setup.sh: making Open MPI the default again: update-alternatives --set $group $openmpi"
    update-alternatives --set "$group" "$openmpi"
  fi
done

build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build_dir" -j "$(nproc)"
echo "setup.sh: built $build_dir/lib/liboptireduce.so and the tools in $build_dir/bin"
