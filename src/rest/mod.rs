//! (to be written)

use actix_web::web;

/// Registers this module's routes.
pub fn configure(_cfg: &mut web::ServiceConfig) {}
