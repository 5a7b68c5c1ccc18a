#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = lfs_proto::targets::proto_frame(data);
});
