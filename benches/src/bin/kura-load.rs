//! `kura-load`: drive a running Kura over HTTP. See `benches/README.md`.

fn main() {
    std::process::exit(kura_bench::cli::main());
}
