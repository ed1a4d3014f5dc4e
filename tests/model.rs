//! Random sequences of DAT calls against the reference model of
//! `udat_testkit::reference`: every call's outcome must match the model's, and
//! at the end every DTO posted has completed exactly once.
//!
//! The sequences come from a fixed seed, so every run tries the same ones;
//! a failure prints the shrunk sequence. The `core_model` fuzz target
//! explores the same model without the seed.

use proptest::prelude::*;

use udat_testkit::reference::{check, Op};

fn op() -> impl Strategy<Value = Op> {
    let i = 0..8usize;
    prop_oneof![
        Just(Op::CreatePz),
        i.clone().prop_map(Op::FreePz),
        i.clone().prop_map(Op::CreateLmr),
        i.clone().prop_map(Op::FreeLmr),
        i.clone().prop_map(Op::CreateEp),
        i.clone().prop_map(Op::FreeEp),
        i.clone().prop_map(Op::Connect),
        i.clone().prop_map(Op::Establish),
        (i.clone(), any::<bool>()).prop_map(|(e, g)| Op::Disconnect(e, g)),
        i.clone().prop_map(Op::Reset),
        (i.clone(), i.clone()).prop_map(|(e, l)| Op::PostSend(e, l)),
        (i.clone(), i.clone()).prop_map(|(e, l)| Op::PostRecv(e, l)),
        i.clone().prop_map(Op::CompleteSend),
        i.clone().prop_map(Op::CompleteRecv),
        i.prop_map(Op::UseStale),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0da7_5eed),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn api_sequences_follow_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        if let Err(e) = check(&ops) {
            prop_assert!(false, "{}", e);
        }
    }
}
