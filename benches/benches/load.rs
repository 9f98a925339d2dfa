//! `cargo bench --bench load -- <kura-load args>`: the load generator as a bench target.
//!
//! Cargo passes `--bench` to bench binaries; it is dropped here so the remaining arguments
//! are exactly those of `kura-load`.

use clap::Parser;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    if args.len() == 1 {
        // `cargo bench` with no arguments runs every bench target; without a server to drive,
        // this one has nothing to do.
        eprintln!("load: pass kura-load arguments after `--`, e.g. `cargo bench --bench load -- -w health -d 5s`");
        return;
    }
    let parsed = match kura_bench::cli::Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    std::process::exit(kura_bench::cli::main_with(parsed));
}
