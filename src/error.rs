//! Errors of the HTTP edge (to be written).
