//! The event routers of both functions on arbitrary JSON: every document is routed or refused
//! with an error, never a panic; S3 keys decode or are refused.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = cellbridge::pure::events::sync::decode_key(text);
    }
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let _ = cellbridge::pure::events::sync::parse(&event);
    let _ = cellbridge::pure::events::bootstrap::parse(&event);
});
