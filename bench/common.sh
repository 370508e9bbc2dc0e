# shellcheck shell=bash
# Shared by the scripts in bench/; sourced, run from the repository root.

# With BIN empty: installs the build dependencies (scripts/install-deps.sh), builds
# target/release/numalab and sets BIN to it. A BIN given with --bin is measured as it is.
numalab_bin() {
    if [ -z "$BIN" ]; then
        bash scripts/install-deps.sh >/dev/null
        if [ -d "$HOME/.cargo/bin" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
        cargo build --release --locked -q
        BIN=target/release/numalab
    fi
}

# numalab_profile_bin SCRIPT: numalab_bin, then BIN made absolute, and checked to have the
# preload library `numalab profile` loads beside it (a binary copied alone cannot profile): else
# "SCRIPT: no libnumalab_preload.so beside BIN" and exit 1.
numalab_profile_bin() {
    numalab_bin
    BIN=$(realpath "$BIN")
    if [ ! -f "$(dirname "$BIN")/libnumalab_preload.so" ]; then
        echo "$1: no libnumalab_preload.so beside $BIN (cargo build --release builds it)" >&2
        exit 1
    fi
}

# bench_options SCRIPT SPEC "$@": parses a script's options into its variables, so that every
# script answers the same way (-h/--help, an unknown option, a missing value) rather than each
# repeating its own loop, which on a value option given last died obscurely ("$2: unbound
# variable", or silently) with status 1. SPEC is words, one an option:
#   name=VAR        --name VALUE sets VAR to VALUE; a missing or empty VALUE is an error (an
#                   empty one is most often an unset variable of the caller's, and would
#                   silently mean the default; compare.sh refused it before too);
#   name=VAR:VALUE  --name, a flag, sets VAR to VALUE;
#   --              `--` ends the options and leaves the arguments after it in BENCH_ARGS
#                   (without this word `--` is an unknown option, as in a script taking none).
# An option named by several words does what each says (compare-scale.sh's --log-dir sets
# LOG_DIR and KEEP=1). -h/--help prints the script's `usage` and exits 0; an unknown option
# prints "SCRIPT: unknown option 'X'" and the usage on stderr and exits 2; a value option
# without its value prints "SCRIPT: --name needs a value" and exits 2.
bench_options() {
    local _bo_script=$1 _bo_spec=$2 _bo_word _bo_var _bo_found _bo_shift
    shift 2
    BENCH_ARGS=()
    while [ $# -gt 0 ]; do
        case "$1" in
            -h|--help) usage; exit 0 ;;
        esac
        if [ "$1" = -- ] && [[ " $_bo_spec " == *" -- "* ]]; then
            shift
            # shellcheck disable=SC2034 # read by the script that sourced this file
            BENCH_ARGS=("$@")
            return 0
        fi
        _bo_found="" _bo_shift=1
        for _bo_word in $_bo_spec; do
            if [ "$_bo_word" = -- ] || [ "$1" != "--${_bo_word%%=*}" ]; then continue; fi
            _bo_found=1
            _bo_var=${_bo_word#*=}
            if [[ $_bo_var == *:* ]]; then
                printf -v "${_bo_var%%:*}" '%s' "${_bo_var#*:}"
            else
                if [ $# -lt 2 ] || [ -z "$2" ]; then
                    echo "$_bo_script: $1 needs a value" >&2
                    exit 2
                fi
                printf -v "$_bo_var" '%s' "$2"
                _bo_shift=2
            fi
        done
        if [ -z "$_bo_found" ]; then
            echo "$_bo_script: unknown option '$1'" >&2
            usage >&2
            exit 2
        fi
        shift "$_bo_shift"
    done
}

# bench_whole SCRIPT OPTION VALUE MIN [MAX]: checks that an option's VALUE is a whole number
# from MIN (to MAX), else prints "SCRIPT: OPTION takes a whole number from MIN[ to MAX]" with
# the value given and exits 2: one check and one wording for every script's counts, before
# they reach seq, arithmetic or python, where a bad one fails late and obscurely.
bench_whole() {
    local _bw_script=$1 _bw_option=$2 _bw_value=$3 _bw_min=$4 _bw_max=${5:-} _bw_digits
    local _bw_range="from $_bw_min${_bw_max:+ to $_bw_max}"
    case "$_bw_value" in
        ''|*[!0-9]*) _bw_digits="" ;;
        # Leading zeros stripped: no wider than 18 digits compares inside test's integers.
        *) _bw_digits=${_bw_value#"${_bw_value%%[!0]*}"}; _bw_digits=${_bw_digits:-0} ;;
    esac
    if [ -z "$_bw_digits" ] || { [ "${#_bw_digits}" -le 18 ] && [ "$_bw_digits" -lt "$_bw_min" ]; } \
        || { [ -n "$_bw_max" ] && { [ "${#_bw_digits}" -gt 18 ] || [ "$_bw_digits" -gt "$_bw_max" ]; }; }; then
        echo "$_bw_script: $_bw_option takes a whole number $_bw_range, not '$_bw_value'" >&2
        exit 2
    fi
}
