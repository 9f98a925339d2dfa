//! Configuration (to be written).
