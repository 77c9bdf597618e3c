//! Every crate's conformance runners, in one list. An area of spec/conformance that no runner
//! here implements is reported as skipped, by name.

use harness_spec::conformance::AreaRunner;

/// All runners the workspace implements.
pub fn all() -> Vec<Box<dyn AreaRunner>> {
    let mut runners: Vec<Box<dyn AreaRunner>> = Vec::new();
    runners.extend(harness_core::conformance::conformance_runners());
    runners.extend(harness_fs::conformance::conformance_runners());
    runners.extend(harness_permission::conformance::conformance_runners());
    runners.extend(harness_loop::conformance::conformance_runners());
    runners.extend(harness_model::conformance::conformance_runners());
    runners
}
