//! Tests of [`NbdDevice`](super::NbdDevice) against a real qemu-nbd (from
//! Debian's qemu-utils; a missing qemu-nbd fails the test, it never
//! skips), and against scripted fake servers that break the protocol.

use std::io::{self, IoSlice, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lfs_e2e::qemu_nbd::{image, QemuNbd};

use super::*;

const MIB: u64 = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

fn opts() -> NbdOptions {
    NbdOptions::default()
}

fn quick() -> NbdOptions {
    NbdOptions {
        reconnect_timeout: Duration::from_secs(2),
        ..NbdOptions::default()
    }
}

fn ro() -> NbdOptions {
    NbdOptions {
        read_only: true,
        ..NbdOptions::default()
    }
}

fn file_bytes(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let data = std::fs::read(path).unwrap();
    data[offset as usize..][..len].to_vec()
}

/// Writes, reads back, flushes and trims on `dev`, whose export is `img`.
fn round_trip(dev: &NbdDevice, img: &Path) {
    let a = pattern(5000, 1);
    let b = pattern(3192, 2);
    dev.write_at(
        &[IoSlice::new(&a), IoSlice::new(&[]), IoSlice::new(&b)],
        4096,
    )
    .unwrap();
    let mut back = vec![0u8; 8192];
    dev.read_at(&mut back, 4096).unwrap();
    assert_eq!(&back[..5000], &a[..]);
    assert_eq!(&back[5000..], &b[..]);
    dev.flush().unwrap();
    assert_eq!(file_bytes(img, 4096, 5000), a);
    // Discard is a hint: old data or zeros.
    dev.discard(4096, 8192).unwrap();
    dev.read_at(&mut back, 4096).unwrap();
    let mut joined = a.clone();
    joined.extend_from_slice(&b);
    assert!(back == joined || back.iter().all(|&x| x == 0));
    // Zero-length I/O at the very end is fine; past it is InvalidInput.
    dev.read_at(&mut [], dev.len()).unwrap();
    for e in [
        dev.read_at(&mut [0u8; 2], dev.len() - 1).unwrap_err(),
        dev.write_all_at(b"xy", dev.len() - 1).unwrap_err(),
        dev.discard(dev.len(), 1).unwrap_err(),
        dev.write_all_at(b"x", u64::MAX).unwrap_err(),
    ] {
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("outside the device"), "{e}");
    }
}

#[test]
fn round_trips_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("tcp.img"), 4 * MIB);
    let server = QemuNbd::tcp(&img, "disk", &[]);
    let dev = NbdDevice::open_name(&server.name(), opts()).unwrap();
    assert_eq!(dev.len(), 4 * MIB);
    assert!(dev.supports_flush() && dev.supports_fua() && dev.supports_trim());
    assert!(format!("{dev:?}").contains("nbd://127.0.0.1"));
    round_trip(&dev, &img);
    assert_eq!(dev.reconnects(), 0);
}

#[test]
fn round_trips_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("unix.img"), 4 * MIB);
    let server = QemuNbd::unix(&img, &dir.path().join("nbd.sock"), "disk", &[]);
    assert!(server.name().starts_with("nbd+unix:///disk?socket="));
    let dev = NbdDevice::open_name(&server.name(), opts()).unwrap();
    round_trip(&dev, &img);
}

#[test]
fn large_io_is_split_at_the_request_limit() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("big.img"), 80 * MIB);
    let server = QemuNbd::tcp(&img, "big", &[]);
    let dev = NbdDevice::open_name(&server.name(), opts()).unwrap();
    assert!(dev.max_request() <= MAX_REQUEST);
    let len = 2 * dev.max_request() as usize + 12288;
    let data = pattern(len, 7);
    let (x, y) = data.split_at(len / 3);
    dev.write_at(&[IoSlice::new(x), IoSlice::new(y)], MIB)
        .unwrap();
    let mut back = vec![0u8; len];
    dev.read_at(&mut back, MIB).unwrap();
    assert!(back == data, "large read differs");
    dev.flush().unwrap();
    assert_eq!(dev.unflushed_bytes(), 0, "a flush empties the journal");
    dev.discard(0, dev.len()).unwrap();
}

#[test]
fn concurrent_io_from_several_threads() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("conc.img"), 32 * MIB);
    let server = QemuNbd::tcp(&img, "conc", &[]);
    let dev = Arc::new(NbdDevice::open_name(&server.name(), opts()).unwrap());
    const THREADS: u8 = 8;
    const ROUNDS: u64 = 40;
    const SLOT: u64 = 64 * 1024;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dev = Arc::clone(&dev);
            thread::spawn(move || {
                for r in 0..ROUNDS {
                    let off = (u64::from(t) * ROUNDS + r) * SLOT;
                    let data = pattern(SLOT as usize, t.wrapping_add(r as u8));
                    dev.write_all_at(&data, off).unwrap();
                    let mut back = vec![0u8; SLOT as usize];
                    dev.read_at(&mut back, off).unwrap();
                    assert!(back == data, "thread {t} round {r} read back other data");
                    if r % 10 == 9 {
                        dev.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    dev.flush().unwrap();
    let on_disk = std::fs::read(&img).unwrap();
    for t in 0..THREADS {
        for r in 0..ROUNDS {
            let off = ((u64::from(t) * ROUNDS + r) * SLOT) as usize;
            let want = pattern(SLOT as usize, t.wrapping_add(r as u8));
            assert!(on_disk[off..][..SLOT as usize] == want[..], "slot {t}/{r}");
        }
    }
}

#[test]
fn refused_export_names_the_export_and_the_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("r.img"), 4 * MIB);
    let server = QemuNbd::tcp(&img, "right", &[]);
    let wrong = server.name().replace("/right", "/wrong");
    let e = NbdDevice::open_name(&wrong, opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("\"wrong\"") && msg.contains(&wrong), "{msg}");
    assert!(msg.contains("NBD_REP_ERR_UNKNOWN"), "{msg}");
}

#[test]
fn read_only_export_is_refused_read_write_and_served_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("ro.img"), 4 * MIB);
    std::fs::write(&img, pattern(4 * MIB as usize, 9)).unwrap();
    let server = QemuNbd::tcp(&img, "ro", &["-r"]);
    let e = NbdDevice::open_name(&server.name(), opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert!(e.to_string().contains("read-only"), "{e}");
    assert!(e.to_string().contains("\"ro\""), "{e}");
    let dev = NbdDevice::open_name(&server.name(), ro()).unwrap();
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, 8192).unwrap();
    assert_eq!(buf, file_bytes(&img, 8192, 4096));
    let e = dev.write_all_at(&buf, 0).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(
        dev.discard(0, 4096).unwrap_err().kind(),
        io::ErrorKind::PermissionDenied
    );
    dev.flush().unwrap();
}

#[test]
fn too_small_export_is_refused_with_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("tiny.img"), 64 * 1024);
    let server = QemuNbd::tcp(&img, "tiny", &[]);
    let e = NbdDevice::open_name(&server.name(), opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("65536 bytes") && msg.contains(&MIN_EXPORT_SIZE.to_string()),
        "{msg}"
    );
}

#[test]
fn bad_names_and_absent_servers_are_clear_errors() {
    let e = NbdDevice::open_name("nbd://127.0.0.1:notaport/x", opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("nbd://127.0.0.1:notaport/x"), "{e}");
    let port = lfs_e2e::qemu_nbd::free_port();
    let name = format!("nbd://127.0.0.1:{port}/x");
    let e = NbdDevice::open_name(&name, opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    assert!(e.to_string().contains(&name), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let name = format!("nbd+unix:///x?socket={}/none.sock", dir.path().display());
    let e = NbdDevice::open_name(&name, opts()).unwrap_err();
    assert!(
        e.to_string().contains("cannot connect") && e.to_string().contains(&name),
        "{e}"
    );
}

#[test]
fn writes_survive_a_server_restart_and_are_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("restart.img"), 8 * MIB);
    let mut server = QemuNbd::tcp(&img, "r", &[]);
    let dev = NbdDevice::open_name(&server.name(), opts()).unwrap();
    let before = pattern(65536, 3);
    dev.write_all_at(&before, 0).unwrap();
    assert_eq!(dev.unflushed_bytes(), 65536);
    // Scribble over the image while no server runs, as a server that lost
    // its write cache would have: the replay must put the write back.
    server.kill();
    std::fs::write(&img, vec![0u8; 8 * MIB as usize]).unwrap();
    server.restart();
    let after = pattern(4096, 4);
    dev.write_all_at(&after, 65536).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.reconnects(), 1);
    assert_eq!(
        file_bytes(&img, 0, 65536),
        before,
        "the unflushed write was not replayed"
    );
    assert_eq!(file_bytes(&img, 65536, 4096), after);
    assert_eq!(dev.unflushed_bytes(), 0);
}

#[test]
fn io_in_flight_across_restarts_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("flight.img"), 16 * MIB);
    let socket = dir.path().join("flight.sock");
    let mut server = QemuNbd::unix(&img, &socket, "f", &[]);
    let dev = Arc::new(NbdDevice::open_name(&server.name(), opts()).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let dev = Arc::clone(&dev);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 20 {
                    let off = (u64::from(t) * 1024 + n % 1024) * 4096;
                    let data = pattern(4096, t ^ n as u8);
                    dev.write_all_at(&data, off).unwrap();
                    let mut back = vec![0u8; 4096];
                    dev.read_at(&mut back, off).unwrap();
                    assert!(back == data, "thread {t} write {n}");
                    if n % 16 == 0 {
                        dev.flush().unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(300));
        server.restart();
    }
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        assert!(w.join().unwrap() >= 20);
    }
    dev.flush().unwrap();
    assert!(dev.reconnects() >= 1, "no reconnect happened");
}

#[test]
fn a_server_that_stays_away_fails_the_operation_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("gone.img"), 4 * MIB);
    let mut server = QemuNbd::tcp(&img, "g", &[]);
    let dev = NbdDevice::open_name(&server.name(), quick()).unwrap();
    dev.write_all_at(b"kept", 0).unwrap();
    server.kill();
    let start = std::time::Instant::now();
    let e = dev.flush().unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(e.to_string().contains("could not be restored"), "{e}");
    server.restart();
    dev.flush().unwrap();
    assert_eq!(file_bytes(&img, 0, 4), b"kept");
}

/// A fake server on a Unix socket: each connection gets `script`'s bytes
/// after reading `read_first` bytes from the client, then is closed.
fn fake_server(dir: &Path, script: Vec<u8>, read_first: usize) -> String {
    let path = dir.join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut sink = vec![0u8; read_first];
            let _ = s.write_all(script.get(..18).unwrap_or(&script));
            let _ = s.read_exact(&mut sink);
            let _ = s.write_all(script.get(18..).unwrap_or_default());
            thread::sleep(Duration::from_millis(50));
        }
    });
    format!("nbd+unix:///x?socket={}", path.display())
}

fn greeting(flags: u16) -> Vec<u8> {
    let mut g = wire::NBDMAGIC.to_be_bytes().to_vec();
    g.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
    g.extend_from_slice(&flags.to_be_bytes());
    g
}

fn option_reply(kind: u32, payload: &[u8], claimed_len: u32) -> Vec<u8> {
    let mut r = wire::OPTION_REPLY_MAGIC.to_be_bytes().to_vec();
    r.extend_from_slice(&wire::OPT_GO.to_be_bytes());
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&claimed_len.to_be_bytes());
    r.extend_from_slice(payload);
    r
}

/// Bytes the client sends before the first option reply: its flags and
/// the GO option for export "x" asking one info type.
const CLIENT_GO: usize = 4 + 16 + 4 + 1 + 2 + 2;

#[test]
fn broken_servers_give_typed_errors_never_panics() {
    let cases: Vec<(&str, Vec<u8>, usize, &str)> = vec![
        (
            "not nbd",
            b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
            0,
            "not an NBD server",
        ),
        (
            "oldstyle",
            {
                let mut g = wire::NBDMAGIC.to_be_bytes().to_vec();
                g.extend_from_slice(&wire::CLISERV_MAGIC.to_be_bytes());
                g.extend_from_slice(&[0, 0]);
                g
            },
            0,
            "oldstyle",
        ),
        ("hangs up", greeting(1), 4, "closed the connection"),
        (
            "huge reply",
            [greeting(1), option_reply(wire::REP_INFO, &[], u32::MAX)].concat(),
            CLIENT_GO,
            "option reply of 4294967295 bytes",
        ),
        (
            "ack without export",
            [greeting(1), option_reply(wire::REP_ACK, &[], 0)].concat(),
            CLIENT_GO,
            "without NBD_INFO_EXPORT",
        ),
        (
            "policy",
            [
                greeting(1),
                option_reply(wire::REP_ERR_POLICY, b"go away", 7),
            ]
            .concat(),
            CLIENT_GO,
            "go away",
        ),
        (
            "short info",
            [greeting(1), option_reply(wire::REP_INFO, &[0, 0, 1], 3)].concat(),
            CLIENT_GO,
            "information reply of type 0 with 3 bytes",
        ),
    ];
    for (what, script, read_first, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let name = fake_server(dir.path(), script, read_first);
        let e = NbdDevice::open_name(&name, opts()).unwrap_err();
        assert!(e.to_string().contains(want), "{what}: {e}");
        assert!(e.to_string().contains(&name), "{what}: {e}");
    }
}

#[test]
fn a_server_without_go_gets_export_name() {
    // Not fixed newstyle: the client must send NBD_OPT_EXPORT_NAME at once.
    let mut script = greeting(0);
    script.extend_from_slice(&(MIN_EXPORT_SIZE * 2).to_be_bytes());
    script.extend_from_slice(&(wire::FLAG_HAS_FLAGS | wire::FLAG_SEND_FLUSH).to_be_bytes());
    script.extend_from_slice(&[0u8; wire::EXPORT_NAME_ZEROES]);
    let dir = tempfile::tempdir().unwrap();
    let name = fake_server(dir.path(), script, 4 + 16 + 1);
    let dev = NbdDevice::open_name(&name, quick()).unwrap();
    assert_eq!(dev.len(), MIN_EXPORT_SIZE * 2);
    assert!(dev.supports_flush() && !dev.supports_trim());
    // The fake then hangs up: a read fails once reconnecting gives up
    // (each new connection ends the same way), it does not hang or panic.
    let e = dev.read_at(&mut [0u8; 512], 0).unwrap_err();
    assert!(
        e.to_string().contains("read of 512 bytes at offset 0"),
        "{e}"
    );
}

#[test]
fn writes_beyond_the_replay_limit_go_through_with_fua() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&dir.path().join("fua.img"), 4 * MIB);
    let mut server = QemuNbd::tcp(&img, "fua", &[]);
    let limited = NbdOptions {
        replay_limit: 4096,
        ..NbdOptions::default()
    };
    let dev = NbdDevice::open_name(&server.name(), limited).unwrap();
    assert!(dev.supports_fua());
    dev.write_all_at(&pattern(4096, 1), 0).unwrap();
    dev.write_all_at(&pattern(8192, 2), 8192).unwrap();
    assert_eq!(dev.unflushed_bytes(), 4096, "the second write is not kept");
    server.restart();
    dev.flush().unwrap();
    assert_eq!(file_bytes(&img, 8192, 8192), pattern(8192, 2));
    assert_eq!(dev.unflushed_bytes(), 0);
}

#[test]
fn man_pages_state_the_nbd_limits_these_constants_set() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for page in ["man/mkfs.lfs.8", "man/fsd.8"] {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        for want in [
            format!("at most {} MiB", MAX_REQUEST >> 20),
            format!("for {} s", DEFAULT_RECONNECT_TIMEOUT.as_secs()),
            format!("up to {} MiB", DEFAULT_REPLAY_LIMIT >> 20),
            format!("({} KiB)", MIN_EXPORT_SIZE >> 10),
            format!(
                "{} ms doubling to {} s",
                FIRST_BACKOFF.as_millis(),
                MAX_BACKOFF.as_secs()
            ),
            format!("default {DEFAULT_PORT}"),
        ] {
            assert!(text.contains(&want), "{page} does not say {want:?}");
        }
    }
}
