# Shared by bench/report.sh, bench/sweep-budget.sh and bench/kernels.sh; sourced, run from the
# repository root.

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
