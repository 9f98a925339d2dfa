# Sourced by the measurement scripts of benches/ (background_priority.sh, bigtable.sh,
# ceiling.sh, load_4gb.sh, redis_counter.sh):
# the release binaries they drive, and a free local port.

# release_binaries SCRIPT BUILD: moves to the repository root, builds `kura` and `kura-load` in
# release when BUILD is 1, and sets $root, $target ($CARGO_TARGET_DIR or target/), $kura and
# $load; exits 2 naming a binary that is missing.
release_binaries() {
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    cd "$root"
    target=${CARGO_TARGET_DIR:-$root/target}
    if [ "$2" = 1 ]; then
        cargo build --release -q -p kura -p kura-bench --bins
    fi
    kura="$target/release/kura"
    load="$target/release/kura-load"
    local b
    for b in "$kura" "$load"; do
        [ -x "$b" ] || { echo "$1: $b missing (run without --no-build)" >&2; exit 2; }
    done
}

# free_port: a TCP port of 127.0.0.1 that nothing listens on.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
