//! The committed corrupted-image fixtures (`fixtures/corrupt/*.txt`), run
//! through the binaries: `fsctl fsck` must print the fixture's messages
//! and exit as it says (4: errors found), and `fsd` must refuse the image
//! with the exit status and message it gives, or mount it, answer EIO
//! where the fixture says, log the message, and stop cleanly on SIGTERM.
//!
//! A fixture is a list of patches to the image `corrupt/image.rs` builds
//! (a populated filesystem whose layout is the same on every run), so no
//! binary image is committed. Each patched block is first checked to be
//! the structure the fixture names, so a change of layout fails here
//! instead of silently corrupting something else. The fixture format, one
//! directive per line (`#` starts a comment):
//!
//! ```text
//! structure BLOCK NAME   block BLOCK of the intact image is a NAME block
//! xor BLOCK OFFSET HEX   XOR the bytes at OFFSET in BLOCK with HEX
//! zero BLOCK OFFSET LEN  zero LEN bytes at OFFSET in BLOCK
//! fsck CODE              fsctl fsck's exit status
//! fsck-says TEXT         a line fsctl fsck prints contains TEXT
//! fsd refuses CODE       fsd exits with CODE without mounting
//! fsd mounts             fsd mounts the image
//! eio PROGRAM PATH       on the mount, PROGRAM PATH fails with EIO
//! fsd-says TEXT          fsd's messages contain TEXT
//! ```
//!
//! The fsd steps need FUSE for the fixtures that mount; without it they
//! fail.

#[path = "../../tests/tests/fsd_mount/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "corrupt/image.rs"]
#[allow(dead_code)]
mod image;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{fsd_refusal, mkdir, Fsd, CMD_TIMEOUT, EXIT_OK};
use image::{blocks_of, populated, Structure, BS};
use lfs_e2e::{run, temp_dir};
use nix::sys::signal::Signal;

/// What fsd must do with a fixture's image.
#[derive(Debug, PartialEq)]
enum FsdExpect {
    Refuses(i32),
    Mounts,
}

/// One parsed fixture.
#[derive(Debug)]
struct Fixture {
    name: String,
    structures: Vec<(u64, String)>,
    /// Byte offset in the image and the bytes to XOR there (zeroing is a
    /// write, kept apart).
    xors: Vec<(usize, Vec<u8>)>,
    zeros: Vec<(usize, usize)>,
    fsck_code: i32,
    fsck_says: Vec<String>,
    fsd: FsdExpect,
    eio: Vec<(String, String)>,
    fsd_says: Vec<String>,
}

fn num<T: std::str::FromStr>(name: &str, line: &str, word: Option<&str>) -> T {
    word.and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{name}: a number is missing or wrong in {line:?}"))
}

fn hex(name: &str, line: &str, word: Option<&str>) -> Vec<u8> {
    let w = word.unwrap_or_else(|| panic!("{name}: no bytes in {line:?}"));
    assert!(w.len() % 2 == 0, "{name}: odd hex digits in {line:?}");
    (0..w.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&w[i..i + 2], 16)
                .unwrap_or_else(|_| panic!("{name}: bad hex in {line:?}"))
        })
        .collect()
}

impl Fixture {
    fn parse(path: &Path) -> Fixture {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(path).unwrap();
        let mut f = Fixture {
            name: name.clone(),
            structures: Vec::new(),
            xors: Vec::new(),
            zeros: Vec::new(),
            fsck_code: -1,
            fsck_says: Vec::new(),
            fsd: FsdExpect::Refuses(-1),
            eio: Vec::new(),
            fsd_says: Vec::new(),
        };
        let mut fsd_seen = false;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            let mut w = rest.split_whitespace();
            let at = |block: u64, off: usize| block as usize * BS + off;
            match word {
                "structure" => {
                    let b = num(&name, line, w.next());
                    f.structures.push((b, w.collect::<Vec<_>>().join(" ")));
                }
                "xor" => {
                    let b = num(&name, line, w.next());
                    let off = num(&name, line, w.next());
                    f.xors.push((at(b, off), hex(&name, line, w.next())));
                }
                "zero" => {
                    let b = num(&name, line, w.next());
                    let off = num(&name, line, w.next());
                    f.zeros.push((at(b, off), num(&name, line, w.next())));
                }
                "fsck" => f.fsck_code = num(&name, line, w.next()),
                "fsck-says" => f.fsck_says.push(rest.to_string()),
                "fsd" => {
                    fsd_seen = true;
                    f.fsd = match w.next() {
                        Some("refuses") => FsdExpect::Refuses(num(&name, line, w.next())),
                        Some("mounts") => FsdExpect::Mounts,
                        _ => panic!("{name}: fsd refuses CODE or fsd mounts, not {line:?}"),
                    };
                }
                "eio" => {
                    let prog = w.next().unwrap_or_else(|| panic!("{name}: {line:?}"));
                    let arg = w.next().unwrap_or_else(|| panic!("{name}: {line:?}"));
                    f.eio.push((prog.to_string(), arg.to_string()));
                }
                "fsd-says" => f.fsd_says.push(rest.to_string()),
                _ => panic!("{name}: unknown directive in {line:?}"),
            }
        }
        assert!(
            !f.structures.is_empty() && (!f.xors.is_empty() || !f.zeros.is_empty()),
            "{name}: a fixture names its structures and patches them"
        );
        assert!(
            f.fsck_code >= 0 && !f.fsck_says.is_empty() && fsd_seen,
            "{name}: a fixture says what fsck and fsd do"
        );
        assert!(
            f.eio.is_empty() || f.fsd == FsdExpect::Mounts,
            "{name}: eio needs a mount"
        );
        f
    }

    /// The intact image with this fixture's patches, after checking that
    /// each block it names is that structure.
    fn apply(&self, img: &[u8]) -> Vec<u8> {
        let map = blocks_of(img);
        for (b, want) in &self.structures {
            let found = Structure::ALL
                .iter()
                .find(|s| map.get(s).is_some_and(|v| v.contains(b)))
                .map(|s| s.name());
            assert_eq!(
                found,
                Some(want.as_str()),
                "{}: block {b} of the image is not a {want} block: the layout changed; \
                 update the fixture",
                self.name
            );
        }
        let mut out = img.to_vec();
        for (at, bytes) in &self.xors {
            for (o, x) in out[*at..*at + bytes.len()].iter_mut().zip(bytes) {
                *o ^= x;
            }
        }
        for &(at, len) in &self.zeros {
            out[at..at + len].fill(0);
        }
        assert!(out != img, "{}: the patches change nothing", self.name);
        out
    }
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corrupt");
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    v.sort();
    v
}

/// Runs `fsctl fsck` on the image; a failure message, if any.
fn check_fsck(f: &Fixture, image: &Path) -> Option<String> {
    let o = run(
        &mut lfs_e2e::daemons::fsctl(&["fsck".as_ref(), image.as_os_str()]),
        CMD_TIMEOUT,
    );
    if o.status.code() != Some(f.fsck_code) {
        return Some(format!(
            "{}: fsctl fsck exited {:?}, not {}: {o}",
            f.name,
            o.status.code(),
            f.fsck_code
        ));
    }
    f.fsck_says
        .iter()
        .find(|t| !o.stdout.lines().any(|l| l.contains(t.as_str())))
        .map(|t| format!("{}: fsctl fsck does not say {t:?}: {o}", f.name))
}

/// Runs fsd on the image as the fixture says; a failure message, if any.
fn check_fsd(f: &Fixture, image: &Path, dir: &Path) -> Option<String> {
    let mnt = mkdir(dir, &format!("{}.mnt", f.name));
    let messages = match f.fsd {
        FsdExpect::Refuses(code) => {
            let o = fsd_refusal(&[image.to_str().unwrap(), mnt.to_str().unwrap()]);
            if o.status.code() != Some(code) {
                return Some(format!(
                    "{}: fsd exited {:?}, not {code}: {o}",
                    f.name,
                    o.status.code()
                ));
            }
            o.stderr
        }
        FsdExpect::Mounts => {
            let mut fsd = Fsd::start(image, &mnt, &[]);
            for (prog, arg) in &f.eio {
                let o = run(
                    Command::new(prog).arg(mnt.join(arg)).current_dir(&mnt),
                    CMD_TIMEOUT,
                );
                if o.status.success() || !o.stderr.contains("Input/output error") {
                    return Some(format!(
                        "{}: {prog} {arg} did not fail with EIO: {o}",
                        f.name
                    ));
                }
            }
            fsd.signal(Signal::SIGTERM);
            let status = fsd.wait();
            let log = fsd.log();
            if status.code() != Some(EXIT_OK) {
                return Some(format!(
                    "{}: fsd exited {status} on SIGTERM:\n{log}",
                    f.name
                ));
            }
            log
        }
    };
    f.fsd_says
        .iter()
        .find(|t| !messages.contains(t.as_str()))
        .map(|t| format!("{}: fsd does not say {t:?}:\n{messages}", f.name))
}

#[test]
fn each_fixture_is_reported_by_fsck_and_refused_or_served_by_fsd() {
    let paths = fixtures();
    assert!(paths.len() >= 8, "too few fixtures: {paths:?}");
    let (img, _) = populated();
    let tmp = temp_dir();
    let mut failures = Vec::new();
    let (mut refused, mut eio) = (0, 0);
    for p in &paths {
        let f = Fixture::parse(p);
        let image = tmp.path().join(format!("{}.img", f.name));
        fs::write(&image, f.apply(&img)).unwrap();
        failures.extend(check_fsck(&f, &image));
        failures.extend(check_fsd(&f, &image, tmp.path()));
        refused += usize::from(matches!(f.fsd, FsdExpect::Refuses(_)));
        eio += f.eio.len();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!(
        "corrupt fixtures: {} fixtures, each reported by fsctl fsck with its message; fsd \
         refused {refused} with theirs and mounted {}, answering EIO to {eio} reads",
        paths.len(),
        paths.len() - refused
    );
}
