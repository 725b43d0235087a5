//! The request parser of the `lean` server model
//! (`blocklab::server::lean::read_head`): each input is what a client sent
//! on one connection; the properties are
//! `blocklab::wire_properties::check_request`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| blocklab::wire_properties::check_request(input));
