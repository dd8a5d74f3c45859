# shellcheck shell=bash
# Sourced by the network tests: run_job SECONDS command... prints the command, runs it, prints its
# exit code and duration, and exits 1 unless it exited 0 (124 or 137: `timeout` killed it after
# SECONDS, a hang; 77: the job could not tell on this run, and the test is skipped with 77).
run_job() {
  local seconds=$1 start rc
  shift
  echo "+ $*"
  start=$(date +%s)
  "$@"
  rc=$?
  echo "exit $rc after $(($(date +%s) - start)) s"
  case $rc in
    0) ;;
    77) echo "SKIP: the job could not tell on this run (its output says why)"; exit 77 ;;
    124|137) echo "FAIL: the job did not finish within $seconds s (a hang)"; exit 1 ;;
    *) echo "FAIL: the job exited $rc"; exit 1 ;;
  esac
}
