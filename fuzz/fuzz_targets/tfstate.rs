//! The state reader on arbitrary bytes: a state or an error, never a panic; and whatever it
//! accepts as a state, serde_json must read the same outputs from (the structural scanner may
//! only skip, never invent).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ours = cellbridge::pure::tfstate::read_state(data, "fuzz");
    if let Ok(state) = ours {
        // Numbers in skipped sections are checked loosely, so only compare where the full
        // parser also accepts the document.
        if let Ok(full) = serde_json::from_slice::<serde_json::Value>(data) {
            assert_eq!(full["serial"].as_u64(), Some(state.serial));
            assert_eq!(full["lineage"].as_str(), Some(state.lineage.as_str()));
            let outputs = full["outputs"].as_object().map(|o| o.len()).unwrap_or(0);
            assert_eq!(outputs, state.outputs.len());
        }
        // The contract on whatever came out must not panic either.
        let _ = cellbridge::pure::metadata::from_state(&state);
    }
});
