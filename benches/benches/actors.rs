//! (to be written)
fn main() {}
