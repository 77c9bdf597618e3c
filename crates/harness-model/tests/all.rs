//! The harness-model test suite: the `quirks` conformance area and the client end to end against
//! the scripted model server.

mod suite;
