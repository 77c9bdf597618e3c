use harness_loop::trajectory::replay;

#[test]
fn hygiene_saves_a_third_and_loses_nothing() {
    let off = replay(200, false).unwrap();
    let on = replay(200, true).unwrap();
    assert_eq!(off.steps, 200);
    assert_eq!(on.steps, 200);
    assert_eq!(off.calls, on.calls, "both runs answer the same calls");
    assert_eq!(
        on.reachable, on.stored,
        "every stored result comes back whole by recall"
    );
    assert!(on.stored >= on.calls);
    // At least 30 % fewer prompt tokens with hygiene on.
    assert!(
        on.prompt_tokens * 10 <= off.prompt_tokens * 7,
        "on {} vs off {}",
        on.prompt_tokens,
        off.prompt_tokens
    );
}
