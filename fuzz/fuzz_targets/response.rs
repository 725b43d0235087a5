//! The response parser `blocklab load` reads with (`blocklab::http1`): each
//! input is what a server sent on one connection; the properties are
//! `blocklab::wire_properties::check_response`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| blocklab::wire_properties::check_response(input));
