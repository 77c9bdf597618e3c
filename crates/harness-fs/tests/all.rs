//! harness-fs's test suite: the conformance areas, the host backend's rules on real
//! directories, the file tools, and snapshots of what a model reads.

mod suite;
