//! Every crate's conformance runners, in one list. An area of spec/conformance that no runner
//! here implements is reported as skipped, by name.

use harness_spec::conformance::AreaRunner;

/// All runners the workspace implements.
pub fn all() -> Vec<Box<dyn AreaRunner>> {
    #[allow(unused_mut)]
    let mut runners: Vec<Box<dyn AreaRunner>> = Vec::new();
    runners
}
