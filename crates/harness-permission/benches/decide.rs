//! Placeholder written by the lead so the workspace manifest loads; the permission helper
//! replaces it with the criterion benchmark of one decision.
fn main() {}
