#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = cleanerd::targets::cleanerd_conf(data);
});
