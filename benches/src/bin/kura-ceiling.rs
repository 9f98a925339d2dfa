//! `kura-ceiling`: the HTTP stack's ceiling on this machine, for `kura-load` to measure against.
//!
//! A trivial actix-web server (the framework and version Kura serves with) whose only handler
//! answers every request with the same 13-byte body, `Hello, world!`: no middleware, no state,
//! no store. What it sustains under a load is what any actix-web server can on this machine
//! with this client, so `kura-load` reports each figure also as a ratio to it (`x ceiling`),
//! beside the ratio to Kura's own `/healthz`, which pays for Kura's middlewares.
//!
//! `kura-ceiling --bind 127.0.0.1:PORT [--workers N]` (default: one worker per core, as Kura).

use actix_web::{web, App, HttpResponse, HttpServer};

const BODY: &str = "Hello, world!";

fn usage(why: &str) -> ! {
    eprintln!("kura-ceiling: {why}\nusage: kura-ceiling --bind HOST:PORT [--workers N]");
    std::process::exit(2);
}

fn main() -> std::io::Result<()> {
    let mut bind = None;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bind" => {
                bind = Some(
                    args.next()
                        .unwrap_or_else(|| usage("--bind needs HOST:PORT")),
                )
            }
            "--workers" => {
                workers = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| usage("--workers needs a positive number"))
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let bind = bind.unwrap_or_else(|| usage("--bind is required"));
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(|| {
            App::new().default_service(web::to(|| async {
                HttpResponse::Ok().content_type("text/plain").body(BODY)
            }))
        })
        .workers(workers)
        .bind(&bind)?
        .run()
        .await
    })
}
