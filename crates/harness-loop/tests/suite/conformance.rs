use harness_loop::conformance::conformance_runners;
use harness_spec::Spec;
use harness_spec::conformance::assert_area;

fn area(name: &str) {
    let runners = conformance_runners();
    let runner = runners
        .iter()
        .find(|r| r.area() == name)
        .expect("runner for the area");
    assert_area(runner.as_ref(), Spec::embedded());
}

#[test]
fn context_area() {
    area("context");
}

#[test]
fn jobs_area() {
    area("jobs");
}

#[test]
fn loop_area() {
    area("loop");
}
