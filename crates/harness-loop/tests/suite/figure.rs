use harness_loop::trajectory::{COMPACT_AT_TOKENS, replay};

#[test]
fn hygiene_saves_a_third_and_loses_nothing() {
    let off = replay(200, false, None).unwrap();
    let on = replay(200, true, None).unwrap();
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

#[test]
fn with_compaction_hygiene_compacts_less_and_still_loses_nothing() {
    let off = replay(200, false, Some(COMPACT_AT_TOKENS)).unwrap();
    let on = replay(200, true, Some(COMPACT_AT_TOKENS)).unwrap();
    assert!(off.compactions > 0);
    assert!(
        on.compactions < off.compactions,
        "on {} vs off {}",
        on.compactions,
        off.compactions
    );
    assert_eq!(on.reachable, on.stored);
}
