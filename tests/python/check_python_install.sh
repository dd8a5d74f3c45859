#!/bin/bash
# Usage: check_python_install.sh CMAKE BUILD_DIR PYTHON PACKAGE_DIR VERSION
# Installs BUILD_DIR into a temporary prefix and uses what landed there: the optireduce package
# under PREFIX/PACKAGE_DIR (importable with PYTHONPATH, every module of the source tree and the
# _where.py CMake writes, no bytecode; it loads PREFIX's liboptireduce-engine.so) and
# PREFIX/bin/optireduce-report (finds that package by itself, from anywhere).
set -u
[ $# -eq 5 ] || { echo "usage: $0 CMAKE BUILD_DIR PYTHON PACKAGE_DIR VERSION" >&2; exit 2; }
cmake=$1 build=$2 python=$3 package_dir=$4 version=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failures=0
fail() { echo "check_python_install: FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "check_python_install: ok: $*"; }

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install"; exit 1; }
site=$prefix/$package_dir
source_modules=$( (cd "$(dirname "$0")/../../python" && find optireduce -name '*.py'; echo optireduce/_where.py) | sort)
installed_modules=$(cd "$site" && find optireduce -name '*.py' | sort)
[ "$source_modules" = "$installed_modules" ] && pass "$(echo "$installed_modules" | wc -l) modules in $package_dir" \
  || fail "installed modules differ from python/optireduce: $(diff <(echo "$source_modules") <(echo "$installed_modules") | tr '\n' ' ')"
[ -z "$(find "$site" -name '__pycache__')" ] || fail "bytecode was installed"

cd "$work" || exit 1
where=$(env -u PYTHONPATH PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c \
  'import optireduce, optireduce.torch, optireduce.report; print(optireduce.__file__, optireduce.__version__, optireduce.loaded())')
[ "$where" = "$site/optireduce/__init__.py $version False" ] && pass "imported from the install: $where" || fail "import printed '$where'"

engine=$(env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c \
  'import os; from optireduce import _engine; print(os.path.realpath(_engine.library().path))' 2>&1)
case "$engine" in
  "$prefix"/*/liboptireduce-engine.so.*) pass "the package loads the installed engine library: $engine" ;;
  *) fail "the installed package loaded '$engine', not $prefix's liboptireduce-engine.so" ;;
esac

line=$(env -u PYTHONPATH "$prefix/bin/optireduce-report" --version 2>&1)
[ "$line" = "optireduce-report $version" ] && pass "optireduce-report --version: $line" || fail "optireduce-report --version printed '$line'"
printf '0 1 1000 exact ok 0 0 5 5 10.0 0 0 0\n1 1 1000 exact ok 0 0 5 5 30.0 0 0 0\n' >"$work/trace.txt"
out=$(env -u PYTHONPATH "$prefix/bin/optireduce-report" "$work/trace.txt" --no-png 2>&1)
echo "$out" | grep -Eq '^exact +2 +2000 +0 +0\.0000 +0\.010 +0\.030 +0\.030 +- +0$' \
  && pass "optireduce-report reads a trace" || fail "optireduce-report on a trace printed: $out"
[ $failures -eq 0 ] && echo "check_python_install: PASS" || exit 1
