//! The crate's test suite: the `context` and `jobs` conformance areas, the session's run, the
//! transcript, and the hygiene figure.

mod suite;
