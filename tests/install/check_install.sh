#!/bin/bash
# Usage: check_install.sh CMAKE BUILD_DIR CONSUMER_SOURCE_DIR CC EXPECT_MPICH(0|1) LIBDIR VERSION
# Installs BUILD_DIR into a temporary prefix, checks that every file landed (libraries with their
# soname, headers, tools, pkg-config and CMake package files), that the installed optireduce-run
# preloads the installed library, and that a program builds and runs against the installed C API
# through the CMake package and through pkg-config.
set -u
[ $# -eq 7 ] || { echo "usage: $0 CMAKE BUILD_DIR CONSUMER_SOURCE_DIR CC EXPECT_MPICH LIBDIR VERSION" >&2; exit 2; }
cmake=$1 build=$2 consumer=$3 cc=$4 expect_mpich=$5 libdir=$6 version=$7
major=${version%%.*}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failures=0
fail() { echo "check_install: FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "check_install: ok: $*"; }

# Only what the test sets: no OPTIREDUCE_* or LD_PRELOAD of the caller.
for v in $(compgen -e); do
  case $v in OPTIREDUCE_*|LD_PRELOAD) unset "$v" ;; esac
done

if ! "$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
  cat "$work/install.log" >&2
  echo "check_install: FAIL: cmake --install failed" >&2
  exit 1
fi
echo "check_install: installed into $prefix:"
(cd "$prefix" && find . -mindepth 1 | sort | sed 's|^\./|  |')

libs=(liboptireduce)
[ "$expect_mpich" = 1 ] && libs+=(liboptireduce-mpich)
for lib in "${libs[@]}"; do
  real=$prefix/$libdir/$lib.so.$version
  [ -f "$real" ] || fail "$real is missing"
  [ "$(readlink "$prefix/$libdir/$lib.so.$major")" = "$lib.so.$version" ] || fail "$lib.so.$major does not link to $lib.so.$version"
  [ "$(readlink "$prefix/$libdir/$lib.so")" = "$lib.so.$major" ] || fail "$lib.so does not link to $lib.so.$major"
  soname=$(objdump -p "$real" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
  [ "$soname" = "$lib.so.$major" ] && pass "$lib soname $soname" || fail "$real has soname '$soname', expected $lib.so.$major"
done
for f in include/optireduce/optireduce.h include/optireduce/transport.hpp \
         bin/optireduce-run bin/optireduce-info bin/optireduce-bench \
         "$libdir/pkgconfig/optireduce.pc" \
         "$libdir/cmake/optireduce/optireduceConfig.cmake" "$libdir/cmake/optireduce/optireduceConfigVersion.cmake" \
         "$libdir/cmake/optireduce/optireduceTargets.cmake"; do
  [ -e "$prefix/$f" ] || fail "$f is missing"
done
for f in bin/optireduce-run bin/optireduce-info bin/optireduce-bench; do
  [ -x "$prefix/$f" ] || fail "$f is not executable"
done
for tool in optireduce-run optireduce-info optireduce-bench; do
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$prefix/bin/$tool" --version 2>&1)
  [ "$out" = "$tool $version" ] && pass "$tool --version: $out" || fail "$tool --version printed '$out', expected '$tool $version'"
done
# The installed bench is a plain MPI program: the same binary times the MPI as is and OptiReduce
# preloaded (optireduce-run), so it must not link the library itself.
if [ -x "$prefix/bin/optireduce-bench" ]; then
  linked=$(ldd "$prefix/bin/optireduce-bench" | awk '$1 ~ /^liboptireduce/ { print $1 }')
  [ -z "$linked" ] && pass "optireduce-bench does not link the library" || fail "optireduce-bench links $linked: it could not time the MPI alone"
fi

# The installed launcher preloads the installed library.
line=$("$prefix/bin/optireduce-run" --dry-run -- mpirun -np 2 ./x 2>&1)
expected="mpirun -x LD_PRELOAD=$prefix/$libdir/liboptireduce.so -np 2 ./x"
[ "$line" = "$expected" ] && pass "optireduce-run --dry-run: $line" || fail "optireduce-run --dry-run printed '$line', expected '$expected'"
if [ "$expect_mpich" = 1 ]; then
  line=$("$prefix/bin/optireduce-run" --dry-run --launcher-flavor hydra -- mpiexec -n 2 ./x 2>&1)
  expected="mpiexec -genv LD_PRELOAD $prefix/$libdir/liboptireduce-mpich.so -n 2 ./x"
  [ "$line" = "$expected" ] && pass "optireduce-run --dry-run (hydra): $line" || fail "optireduce-run --dry-run printed '$line', expected '$expected'"
fi
# Moved as a whole, it still finds its own library.
mv "$prefix" "$work/moved"
# (SLURM_MPI_TYPE set: whatever srun this host has, no --mpi=pmix is added.)
line=$(SLURM_MPI_TYPE=pmix "$work/moved/bin/optireduce-run" --dry-run -- srun -n 2 ./x 2>&1)
expected="srun --export=ALL,LD_PRELOAD=$work/moved/$libdir/liboptireduce.so -n 2 ./x"
[ "$line" = "$expected" ] && pass "moved tree: $line" || fail "moved tree: optireduce-run printed '$line', expected '$expected'"
mv "$work/moved" "$prefix"

# pkg-config
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs optireduce 2>&1 | sed "s/ *$//")
[ "$flags" = "-I$prefix/include -L$prefix/$libdir -loptireduce" ] && pass "pkg-config: $flags" || fail "pkg-config --cflags --libs optireduce: '$flags'"
[ "$(pkg-config --modversion optireduce)" = "$version" ] || fail "pkg-config --modversion is not $version"
[ "$(pkg-config --variable=preload optireduce)" = "$prefix/$libdir/liboptireduce.so" ] || fail "pkg-config preload variable: $(pkg-config --variable=preload optireduce)"
# shellcheck disable=SC2086
if "$cc" -o "$work/consumer_pc" "$consumer/main.c" $flags -Wl,-rpath,"$prefix/$libdir" 2>"$work/cc.log"; then
  out=$("$work/consumer_pc" 2>&1) && [ "$out" = "$version" ] && pass "pkg-config consumer runs: $out" || fail "pkg-config consumer: '$out'"
else
  cat "$work/cc.log" >&2
  fail "cannot build a program with pkg-config's flags"
fi

# CMake package
if "$cmake" -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" >"$work/configure.log" 2>&1 &&
   "$cmake" --build "$work/consumer" >"$work/build.log" 2>&1; then
  out=$("$work/consumer/consumer" 2>&1) && [ "$out" = "$version" ] && pass "CMake package consumer runs: $out" || fail "CMake package consumer: '$out'"
  grep -q "optireduce_PRELOAD_LIBRARY=$prefix/$libdir/liboptireduce.so" "$work/configure.log" || fail "optireduce_PRELOAD_LIBRARY is not the installed library"
else
  cat "$work/configure.log" "$work/build.log" >&2 2>/dev/null
  fail "cannot build a program with find_package(optireduce)"
fi

if [ "$failures" -ne 0 ]; then
  echo "check_install: $failures check(s) failed" >&2
  exit 1
fi
echo "check_install: PASS"
