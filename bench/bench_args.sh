# Sourced by the bench scripts: their common options and set-up.
#   bench_init COUNT_OPTION DEFAULT HELP_LAST_LINE "$@"
# parses [--COUNT_OPTION N] [--csv] [--build DIR] [-h]: N (a positive integer, DEFAULT unless
# given) into the variable named COUNT_OPTION, and $csv and $build; -h prints the calling
# script's header, lines 2 to HELP_LAST_LINE. Checks that $build/perseus is built ($perseus) and
# makes a work directory ($work) removed on exit.
bench_init() {
  local count_option=$1 help_last=$3
  printf -v "$count_option" '%s' "$2"
  csv=0
  build=build
  shift 3
  while [ $# -gt 0 ]; do
    case "$1" in
      "--$count_option") printf -v "$count_option" '%s' "$2"; shift 2 ;;
      --csv) csv=1; shift ;;
      --build) build="$2"; shift 2 ;;
      -h|--help) sed -n "2,${help_last}p" "$0"; exit 0 ;;
      *) echo "unknown option $1" >&2; exit 2 ;;
    esac
  done
  [[ ${!count_option} =~ ^[1-9][0-9]*$ ]] || { echo "--$count_option: expected a positive integer, got '${!count_option}'" >&2; exit 2; }
  perseus="$build/perseus"
  [ -x "$perseus" ] || { echo "$perseus not built (bash scripts/build.sh)" >&2; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}
