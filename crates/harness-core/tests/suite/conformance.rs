use harness_core::conformance::conformance_runners;
use harness_spec::Spec;
use harness_spec::conformance::assert_area;

fn run(area: &str) {
    let runners = conformance_runners();
    let runner = runners
        .iter()
        .find(|r| r.area() == area)
        .expect("a runner for the area");
    assert_area(runner.as_ref(), Spec::embedded());
}

#[test]
fn fill() {
    run("fill");
}

#[test]
fn narrow() {
    run("narrow");
}

#[test]
fn plan() {
    run("plan");
}

#[test]
fn toolcall_index() {
    run("toolcall_index");
}

#[test]
fn library_scope() {
    run("library_scope");
}

#[test]
fn prototype() {
    run("prototype");
}

#[test]
fn every_runner_has_its_area_file() {
    let spec = Spec::embedded();
    for r in conformance_runners() {
        assert!(
            spec.conformance(r.area()).is_some(),
            "no spec/conformance/{}.json",
            r.area()
        );
    }
}

#[test]
fn offering() {
    run("offering");
}
