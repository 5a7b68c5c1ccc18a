//! End to end: mkfs.lfs and the offline fsctl commands on image files and a
//! loop device, as a user runs them.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use lfs_e2e::{built_binary, require_tool, run, run_ok, temp_dir, LoopDevice, Output};

const T: Duration = Duration::from_secs(120);

fn mkfs(args: &[&str], dir: &Path) -> Output {
    run(
        Command::new(built_binary("mkfs-lfs"))
            .args(args)
            .current_dir(dir),
        T,
    )
}

fn fsctl(args: &[&str], dir: &Path) -> Output {
    run(lfs_e2e::daemons::fsctl(args).current_dir(dir), T)
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn super_json(img: &str, dir: &Path) -> serde_json::Value {
    let o = fsctl(&["super", "--json", img], dir).assert_success();
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{o}"))
}

#[test]
fn format_a_new_image_and_show_its_geometry() {
    let d = temp_dir();
    let o = mkfs(&["--size", "1G", "-L", "data", "a.img"], d.path()).assert_success();
    assert!(o.stdout.contains("127 (7 reserved"), "{o}");
    assert_eq!(fs::metadata(d.path().join("a.img")).unwrap().len(), 1 << 30);

    let o = fsctl(&["super", "a.img"], d.path()).assert_success();
    for want in [
        "primary   superblock at byte 0: valid",
        "[current]",
        "block size          4096 bytes",
        "segments            127",
        "label               data",
        "state               clean",
        "last checkpoint     1",
    ] {
        assert!(o.stdout.contains(want), "missing {want:?}:\n{o}");
    }
    let v = super_json("a.img", d.path());
    assert_eq!(v["current"], "primary");
    assert_eq!(v["superblock"]["nsegments"], 127);
    assert_eq!(v["superblock"]["device_bytes"], 1u64 << 30);
    assert_eq!(v["copies"][1]["valid"], true);

    let o = fsctl(&["dumpseg", "a.img", "0"], d.path()).assert_success();
    assert!(
        o.stdout.contains("1 log(s)") && o.stdout.contains("super root at block 6"),
        "{o}"
    );
    let o = fsctl(&["dumpseg", "--json", "a.img", "0"], d.path()).assert_success();
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["logs"][0]["nentries"], 4);
    assert_eq!(v["logs"][0]["body_ok"], true);
    assert_eq!(v["logs"][0]["flags"][0], "super-root");
    let o = fsctl(&["dumpseg", "a.img", "1"], d.path()).assert_success();
    assert!(o.stdout.contains("0 log(s)"), "{o}");
    let o = fsctl(&["dumpseg", "a.img", "127"], d.path());
    assert_eq!(code(&o), Some(1), "{o}");
    assert!(o.stderr.contains("segment 127 does not exist"), "{o}");
}

#[test]
fn refuses_existing_filesystems_without_force() {
    let d = temp_dir();
    mkfs(&["-q", "--size", "100M", "a.img"], d.path()).assert_success();
    let before = fs::read(d.path().join("a.img")).unwrap();
    let o = mkfs(&["a.img"], d.path());
    assert_eq!(code(&o), Some(4), "{o}");
    assert!(
        o.stderr.contains("a.img") && o.stderr.contains("lfs") && o.stderr.contains("-f"),
        "{o}"
    );
    assert!(
        fs::read(d.path().join("a.img")).unwrap() == before,
        "refused mkfs changed the image"
    );
    mkfs(&["-f", "-q", "a.img"], d.path()).assert_success();

    require_tool("mkfs.ext4");
    let ext = d.path().join("e.img");
    fs::File::create(&ext).unwrap().set_len(64 << 20).unwrap();
    run_ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&ext), T);
    let o = mkfs(&["e.img"], d.path());
    assert_eq!(code(&o), Some(4), "{o}");
    assert!(o.stderr.contains("ext2/ext3/ext4"), "{o}");
    let o = fsctl(&["super", "e.img"], d.path());
    assert_eq!(code(&o), Some(6), "not lfs (fsctl(8)): {o}");
    assert!(o.stderr.contains("no valid lfs superblock"), "{o}");
}

/// The reserve line gives the share the segments really are: on a 100M
/// image in 8 MiB segments the minimum of 4 segments is a third of it,
/// not the 5% asked.
#[test]
fn the_reserve_is_shown_as_it_is() {
    let d = temp_dir();
    let o = mkfs(&["--size", "100M", "-B", "2048", "r.img"], d.path()).assert_success();
    assert!(
        o.stdout
            .contains("12 (4 reserved for cleaning, 33% (5% asked, at least 4 segments))"),
        "{o}"
    );
    let o = fsctl(&["super", "r.img"], d.path()).assert_success();
    assert!(o.stdout.contains("4 reserved for cleaning, 33%"), "{o}");
}

/// Without -B, small images get smaller segments (at least 128 where
/// the size allows, down to 1 MiB), large ones nilfs's 8 MiB.
#[test]
fn default_segments_are_sized_for_the_image() {
    let d = temp_dir();
    for (size, seg) in [
        ("128M", "256 blocks (1.0 MiB)"),
        ("512M", "1024 blocks (4.0 MiB)"),
        ("4G", "2048 blocks (8.0 MiB)"),
    ] {
        let o = mkfs(&["-n", "--size", size, "s.img"], d.path()).assert_success();
        assert!(o.stdout.contains(seg), "{size}: {o}");
    }
    mkfs(&["-q", "--size", "128M", "s.img"], d.path()).assert_success();
    let o = fsctl(&["super", "s.img"], d.path()).assert_success();
    assert!(
        o.stdout
            .contains("segment size        256 blocks (1.0 MiB)")
            && o.stdout.contains("segments            127 (7 reserved"),
        "{o}"
    );
}

#[test]
fn too_small_says_the_minimum_and_creates_nothing() {
    let d = temp_dir();
    let o = mkfs(&["--size", "1M", "b.img"], d.path());
    assert_eq!(code(&o), Some(3), "{o}");
    assert!(
        o.stderr.contains("too small")
            && o.stderr.contains("8396800")
            && o.stderr.contains("smaller segments (-B)"),
        "{o}"
    );
    assert!(!d.path().join("b.img").exists());
    // With small segments 4 MiB is enough.
    mkfs(&["-q", "-B", "64", "--size", "4M", "b.img"], d.path()).assert_success();
}

#[test]
fn bad_options_are_usage_errors() {
    let d = temp_dir();
    for args in [
        &["-b", "3000", "--size", "1G", "x.img"][..],
        &["-B", "8", "--size", "1G", "x.img"],
        &["-m", "51", "--size", "1G", "x.img"],
        &["-L", &"x".repeat(65), "--size", "1G", "x.img"],
        &["--size", "12Q", "x.img"],
    ] {
        let o = mkfs(args, d.path());
        assert_eq!(code(&o), Some(2), "{o}");
        assert!(
            !d.path().join("x.img").exists(),
            "{args:?} created the image"
        );
    }
    let o = mkfs(&["missing.img"], d.path());
    assert_eq!(code(&o), Some(1), "{o}");
    assert!(
        o.stderr.contains("missing.img") && o.stderr.contains("--size"),
        "{o}"
    );
    let o = mkfs(&["--size", "1G", "/proc/version/x.img"], d.path());
    assert_eq!(code(&o), Some(1), "{o}");
    assert!(o.stderr.contains("/proc/version/x.img"), "{o}");
}

#[test]
fn dry_run_writes_nothing() {
    let d = temp_dir();
    let o = mkfs(&["-n", "--size", "2G", "-B", "4096", "n.img"], d.path()).assert_success();
    assert!(
        o.stdout.contains("would format") && o.stdout.contains("16.0 MiB"),
        "{o}"
    );
    assert!(!d.path().join("n.img").exists());
    fs::File::create(d.path().join("z.img"))
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    mkfs(&["-n", "z.img"], d.path()).assert_success();
    let data = fs::read(d.path().join("z.img")).unwrap();
    assert!(data.iter().all(|&b| b == 0), "dry run wrote to the image");
}

#[test]
fn flipped_primary_byte_names_the_bad_copy_and_uses_the_other() {
    let d = temp_dir();
    mkfs(&["-q", "--size", "128M", "-L", "flip", "a.img"], d.path()).assert_success();
    let path = d.path().join("a.img");
    let mut data = fs::read(&path).unwrap();
    data[100] ^= 0xff;
    fs::write(&path, &data).unwrap();
    let o = fsctl(&["super", "a.img"], d.path());
    assert_eq!(code(&o), Some(3), "{o}");
    assert!(
        o.stdout.contains("primary   superblock at byte 0: BAD"),
        "{o}"
    );
    assert!(
        o.stdout.contains("secondary superblock") && o.stdout.contains("[current]"),
        "{o}"
    );
    assert!(o.stdout.contains("label               flip"), "{o}");
    assert!(o.stderr.contains("primary superblock is damaged"), "{o}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or(serde_json::Value::Null);
    assert!(v.is_null(), "text mode printed JSON");
    let o = fsctl(&["super", "--json", "a.img"], d.path());
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["current"], "secondary");
    assert_eq!(v["copies"][0]["valid"], false);
}

#[test]
fn refuses_a_device_in_use() {
    require_tool("flock");
    let d = temp_dir();
    mkfs(&["-q", "--size", "100M", "a.img"], d.path()).assert_success();
    // flock(1) takes the same flock(2) lock that fsd and mkfs.lfs take.
    let mut holder = Command::new("flock")
        .args(["-x", "a.img", "sleep", "60"])
        .current_dir(d.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let o = mkfs(&["-f", "a.img"], d.path());
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(code(&o), Some(5), "{o}");
    assert!(o.stderr.contains("in use"), "{o}");
}

#[test]
fn loop_device_is_sized_by_ioctl_and_attached_image_is_refused() {
    require_tool("losetup");
    let d = temp_dir();
    let img = d.path().join("l.img");
    fs::File::create(&img).unwrap().set_len(200 << 20).unwrap();
    let lo = LoopDevice::attach(&img);
    let dev = lo.name();

    let o = mkfs(&["-f", "l.img"], d.path());
    assert_eq!(code(&o), Some(5), "{o}");
    assert!(o.stderr.contains(dev), "{o}");

    let o = mkfs(&["-L", "loop", dev], d.path()).assert_success();
    assert!(
        o.stdout.contains("block device") && o.stdout.contains("200.0 MiB"),
        "{o}"
    );
    let v = super_json(dev, d.path());
    assert_eq!(v["superblock"]["device_bytes"], 200u64 << 20);
    assert_eq!(v["superblock"]["total_blocks"], 51200);
    let o = mkfs(&["--size", "1G", dev], d.path());
    assert_eq!(code(&o), Some(2), "{o}");
}

#[test]
fn fsck_passes_a_fresh_image_and_reports_a_damaged_one() {
    let d = temp_dir();
    mkfs(&["-q", "-B", "64", "--size", "16M", "a.img"], d.path()).assert_success();
    let o = fsctl(&["fsck", "a.img"], d.path()).assert_success();
    assert!(o.stdout.contains("clean"), "{o}");
    let o = fsctl(&["fsck", "--json", "a.img"], d.path()).assert_success();
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["clean"], true);
    assert_eq!(v["inodes"], 1);
    // Block 2 is the first inode file block (lfs(5): the mkfs log).
    let path = d.path().join("a.img");
    let mut data = fs::read(&path).unwrap();
    data[2 * 4096 + 300] ^= 0x55;
    fs::write(&path, &data).unwrap();
    let o = fsctl(&["fsck", "a.img"], d.path());
    assert_eq!(code(&o), Some(4), "{o}");
    // The flip breaks the only checkpoint's log checksum.
    assert!(o.stdout.contains("no valid checkpoint"), "{o}");
}

#[test]
fn uuid_and_source_date_epoch_fix_the_identity_and_time() {
    let d = temp_dir();
    let uuid = "0123abcd-4567-89ef-0123-456789abcdef";
    let o = run(
        Command::new(built_binary("mkfs-lfs"))
            .args(["-q", "-B", "64", "--size", "8M", "-U", uuid, "a.img"])
            .env("SOURCE_DATE_EPOCH", "951782400")
            .current_dir(d.path()),
        T,
    );
    o.assert_success();
    let v = super_json("a.img", d.path());
    assert_eq!(v["superblock"]["uuid"], uuid);
    assert_eq!(v["superblock"]["ctime"], 951_782_400);
    let o = fsctl(&["super", "a.img"], d.path()).assert_success();
    assert!(
        o.stdout
            .contains("created             2000-02-29 00:00:00 UTC"),
        "{o}"
    );
    // Another uuid, another seed.
    mkfs(&["-q", "-B", "64", "--size", "8M", "b.img"], d.path()).assert_success();
    assert_ne!(
        super_json("b.img", d.path())["superblock"]["crc_seed"],
        v["superblock"]["crc_seed"]
    );
    for bad in ["x", "-1", "1e9"] {
        let o = run(
            Command::new(built_binary("mkfs-lfs"))
                .args(["--size", "8M", "-B", "64", "c.img"])
                .env("SOURCE_DATE_EPOCH", bad)
                .current_dir(d.path()),
            T,
        );
        assert_eq!(code(&o), Some(2), "{o}");
        assert!(o.stderr.contains("SOURCE_DATE_EPOCH"), "{o}");
    }
    for bad in [
        "0123abcd-4567-89ef-0123-456789abcde",
        "zz23abcd-4567-89ef-0123-456789abcdef",
    ] {
        let o = mkfs(&["--size", "8M", "-U", bad, "c.img"], d.path());
        assert_eq!(code(&o), Some(2), "{o}");
        assert!(o.stderr.contains("not a uuid"), "{o}");
    }
    assert!(!d.path().join("c.img").exists());
}
