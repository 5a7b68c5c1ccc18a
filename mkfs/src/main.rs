//! `mkfs.lfs`: formats a block device or an image file with lfs.
//!
//! The binary only parses arguments, performs the safety checks that need
//! the operating system (existing filesystems, loop devices, locks) and
//! calls `lfs::mkfs`. Exit codes are listed in mkfs.lfs(8) and in
//! [`Exit`].

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use clap::Parser;
use lfs::blockdev::{BlockDevice, DeviceName, FileDevice, OpenOptions};
use lfs::format;
use lfs::mkfs::{Geometry, MkfsOptions};
use lfs_common::report::{error_line, io_reason};
use lfs_common::units::{human_bytes, parse_size};

/// The name messages start with.
const PROGRAM: &str = "mkfs.lfs";

/// Exit statuses, as documented in mkfs.lfs(8).
#[derive(Debug, Clone, Copy)]
enum Exit {
    /// Formatted (or, with -n, planned).
    Ok = 0,
    /// An operational error: I/O, permission, unwritable path.
    Error = 1,
    /// Bad usage or an option value out of range (also clap's code).
    Usage = 2,
    /// The device is smaller than the minimum for the geometry.
    TooSmall = 3,
    /// The device holds a filesystem and -f was not given.
    Exists = 4,
    /// The device is mounted, attached to a loop device, or in use by fsd.
    Busy = 5,
}

/// A failure with the exit status it maps to.
struct Failure(Exit, anyhow::Error);

fn fail(code: Exit, e: impl Into<anyhow::Error>) -> Failure {
    Failure(code, e.into())
}

#[derive(Debug, Parser)]
#[command(
    name = "mkfs.lfs",
    version,
    about = "Create an lfs log-structured filesystem on a block device or image file",
    after_help = "Exit status: 0 success, 1 error, 2 bad usage or option value, 3 device too \
                  small, 4 existing filesystem (use -f), 5 device busy. See mkfs.lfs(8)."
)]
struct Args {
    /// Block size in bytes: a power of two from 1024 to 65536.
    #[arg(short = 'b', long, value_name = "BYTES", default_value_t = format::DEFAULT_BLOCK_SIZE)]
    block_size: u32,

    /// Blocks per segment (16 to 1048576) [default: 2048 (8 MiB at 4 KiB blocks), halved for
    /// devices under 128 segments down to 1 MiB segments].
    #[arg(short = 'B', long, value_name = "N")]
    blocks_per_segment: Option<u32>,

    /// Percentage of segments reserved for the cleaner (0 to 50; at least 4 segments).
    #[arg(short = 'm', long, value_name = "PERCENT", default_value_t = format::DEFAULT_RESERVED_PERCENT)]
    reserved_percent: u32,

    /// Filesystem label, up to 64 bytes.
    #[arg(short = 'L', long, value_name = "LABEL", default_value = "")]
    label: String,

    /// Filesystem uuid (default: random); the checksum seed is then derived from it, so the same
    /// options and SOURCE_DATE_EPOCH make the same image.
    #[arg(short = 'U', long, value_name = "UUID", value_parser = uuid_arg)]
    uuid: Option<[u8; 16]>,

    /// Create the image file, or extend it, to SIZE bytes (suffixes K, M, G, T, P).
    #[arg(short = 's', long, value_name = "SIZE", value_parser = parse_size)]
    size: Option<u64>,

    /// Print the geometry and write nothing.
    #[arg(short = 'n', long)]
    dry_run: bool,

    /// Format even if the device holds a filesystem; allow shrinking an image with --size.
    #[arg(short = 'f', long)]
    force: bool,

    /// Do not discard (TRIM) the device before formatting.
    #[arg(short = 'K', long)]
    no_discard: bool,

    /// Print nothing but errors.
    #[arg(short = 'q', long)]
    quiet: bool,

    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<lfs_common::completions::Shell>,

    /// Block device, image file or NBD export (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH) to format.
    device: PathBuf,
}

fn main() -> ExitCode {
    lfs_common::logging::init(PROGRAM, log::LevelFilter::Warn, None);
    if lfs_common::completions::requested(<Args as clap::CommandFactory>::command) {
        return ExitCode::from(Exit::Ok as u8);
    }
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::from(Exit::Ok as u8),
        Err(Failure(code, e)) => {
            eprintln!("{}", error_line(PROGRAM, &format!("{e:#}")));
            ExitCode::from(code as u8)
        }
    }
}

fn run(args: &Args) -> Result<(), Failure> {
    let dev_path = &args.device;
    let shown = dev_path.display().to_string();
    let opts = options(args)?;
    lfs::mkfs::validate(&opts).map_err(|e| fail(Exit::Usage, e))?;

    let name = DeviceName::parse(dev_path).map_err(|e| fail(Exit::Usage, e))?;
    // Every check (in use, attached to a loop device, an existing
    // filesystem, shrinking) comes before the first change to the target:
    // a refusal leaves it exactly as it was, a dry run makes the same
    // checks as the real run.
    let (dev, kind) = match &name {
        DeviceName::Nbd(_) => (open_nbd(args, &name, &shown)?, "NBD export"),
        DeviceName::File(_) => match open_file(args, &shown, &opts)? {
            Some(opened) => opened,
            // A dry run with --size on an image that does not exist yet.
            None => return Ok(()),
        },
    };
    let dev = &*dev;
    if args.dry_run {
        let len = args.size.unwrap_or(dev.len());
        return report_plan(args, &shown, len, &opts, kind);
    }
    let opts = sized(args, dev.len(), &opts);
    // Planning first separates geometry errors from I/O errors.
    lfs::mkfs::plan(dev.len(), &opts).map_err(|e| plan_failure(&shown, e))?;
    let geo = lfs::mkfs::format(dev, &opts).map_err(|e| {
        fail(
            Exit::Error,
            anyhow!(e).context(format!("formatting {shown}")),
        )
    })?;
    if !args.quiet {
        print_geometry(&shown, kind, &geo, &opts, false);
    }
    Ok(())
}

/// An opened device and what kind it is, for messages.
type Opened = (Arc<dyn BlockDevice>, &'static str);

/// The exit status of a device that would not open.
fn open_failure(e: std::io::Error) -> Failure {
    let code = if e.kind() == ErrorKind::ResourceBusy {
        Exit::Busy
    } else {
        Exit::Error
    };
    fail(code, anyhow!(e))
}

/// Refuses a device that holds a filesystem unless -f was given (a dry
/// run refuses as the real run would).
fn check_existing(args: &Args, shown: &str, dev: &dyn BlockDevice) -> Result<(), Failure> {
    if let Some(sig) = lfs::inspect::probe_signature(dev).map_err(|e| fail(Exit::Error, e))? {
        if !args.force {
            return Err(fail(
                Exit::Exists,
                anyhow!(
                    "{shown} already holds a filesystem ({}); use -f to overwrite it",
                    sig.name()
                ),
            ));
        }
        if !args.quiet {
            let verb = if args.dry_run {
                "would overwrite"
            } else {
                "overwriting"
            };
            println!("{shown}: {verb} an existing {} filesystem", sig.name());
        }
    }
    Ok(())
}

/// Connects to an NBD export; `--size` has no meaning there.
fn open_nbd(args: &Args, name: &DeviceName, shown: &str) -> Result<Arc<dyn BlockDevice>, Failure> {
    if args.size.is_some() {
        return Err(fail(
            Exit::Usage,
            anyhow!("{shown} is an NBD export: --size applies only to image files"),
        ));
    }
    let dev = name
        .open(OpenOptions {
            read_only: args.dry_run,
            direct: false,
            exclusive: true,
        })
        .map_err(open_failure)?;
    check_existing(args, shown, dev.as_ref())?;
    Ok(dev)
}

/// Opens an image file or a block device after every check that needs
/// the operating system, and only then creates or resizes an image
/// (`--size`). `None` if a dry run was fully answered without a device.
fn open_file(args: &Args, shown: &str, opts: &MkfsOptions) -> Result<Option<Opened>, Failure> {
    let dev_path = &args.device;
    let existing = fs::metadata(dev_path);
    let is_blockdev = existing
        .as_ref()
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    if let Some(size) = args.size {
        if is_blockdev {
            return Err(fail(
                Exit::Usage,
                anyhow!("{shown} is a block device: --size applies only to image files"),
            ));
        }
        // Refuse a too-small size before creating or resizing anything.
        lfs::mkfs::plan(size, &sized(args, size, opts)).map_err(|e| plan_failure(shown, e))?;
    }
    match (&existing, args.size) {
        (Ok(_), _) => {}
        (Err(e), None) => {
            return Err(fail(
                Exit::Error,
                anyhow!(
                    "cannot open {shown}: {} (use --size SIZE to create an image file)",
                    io_reason(e)
                ),
            ))
        }
        (Err(_), Some(size)) if args.dry_run => {
            return report_plan(args, shown, size, opts, "image file").map(|()| None);
        }
        (Err(_), Some(_)) => create_image(dev_path)?,
    }

    if let Some(loopdev) = attached_loop_device(dev_path) {
        return Err(fail(
            Exit::Busy,
            anyhow!("{shown} is attached to {loopdev}; format {loopdev} instead, or detach it"),
        ));
    }
    if args.dry_run {
        probe_in_use(dev_path, shown)?;
    }
    let mut dev = FileDevice::open(
        dev_path,
        OpenOptions {
            read_only: args.dry_run,
            direct: false,
            exclusive: !args.dry_run,
        },
    )
    .map_err(open_failure)?;
    check_existing(args, shown, &dev)?;
    if let Some(size) = args.size {
        check_shrink(shown, dev.len(), size, args.force)?;
        if !args.dry_run && dev.len() != size {
            dev.set_len(size).map_err(|e| fail(Exit::Error, e))?;
        }
    }
    let kind = if dev.is_block_device() {
        "block device"
    } else {
        "image file"
    };
    Ok(Some((Arc::new(dev), kind)))
}

/// For a dry run, which opens the device read-only: refuses as the real
/// run's exclusive open would, without holding anything.
fn probe_in_use(path: &Path, shown: &str) -> Result<(), Failure> {
    let probe = FileDevice::open(
        path,
        OpenOptions {
            read_only: false,
            direct: false,
            exclusive: true,
        },
    );
    match probe {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::ResourceBusy => Err(open_failure(e)),
        // Not writable by this user, say: the dry run can still plan.
        Err(e) => {
            log::debug!("{shown}: not opened read-write for the dry run's busy check: {e}");
            Ok(())
        }
    }
}

fn report_plan(
    args: &Args,
    shown: &str,
    len: u64,
    opts: &MkfsOptions,
    kind: &str,
) -> Result<(), Failure> {
    let opts = &sized(args, len, opts);
    let geo = lfs::mkfs::plan(len, opts).map_err(|e| plan_failure(shown, e))?;
    if !args.quiet {
        print_geometry(shown, kind, &geo, opts, true);
    }
    Ok(())
}

/// Maps a planning error to its exit status and message.
fn plan_failure(shown: &str, e: lfs::Error) -> Failure {
    match e {
        lfs::Error::DeviceTooSmall {
            min,
            blocks_per_segment,
            ..
        } => fail(
            Exit::TooSmall,
            anyhow!(
                "{shown}: {e} ({}); use a larger device or --size{}",
                human_bytes(min),
                if blocks_per_segment > format::MIN_BLOCKS_PER_SEGMENT {
                    ", or smaller segments (-B)"
                } else {
                    ""
                }
            ),
        ),
        e => fail(Exit::Usage, e),
    }
}

/// A `--uuid` value.
fn uuid_arg(s: &str) -> Result<[u8; 16], String> {
    format::parse_uuid(s).ok_or_else(|| {
        format!("{s:?} is not a uuid (hex digits as 8-4-4-4-12, e.g. 2f1c4d9e-0b7a-4c55-9e31-6d0f8a2b7c44)")
    })
}

/// The variable that fixes the creation time (reproducible-builds.org's
/// convention), for images that must come out the same byte for byte.
const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";

/// The creation time: `SOURCE_DATE_EPOCH` seconds if set, else now.
fn creation_time() -> Result<(u64, u32), Failure> {
    match std::env::var(SOURCE_DATE_EPOCH) {
        Ok(v) => v.trim().parse::<u64>().map(|s| (s, 0)).map_err(|_| {
            fail(
                Exit::Usage,
                anyhow!("{SOURCE_DATE_EPOCH}={v:?} is not a number of seconds since 1970"),
            )
        }),
        Err(std::env::VarError::NotUnicode(v)) => Err(fail(
            Exit::Usage,
            anyhow!("{SOURCE_DATE_EPOCH}={v:?} is not a number of seconds since 1970"),
        )),
        Err(std::env::VarError::NotPresent) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| fail(Exit::Error, anyhow!("the clock is before 1970: {e}")))?;
            Ok((now.as_secs(), now.subsec_nanos()))
        }
    }
}

/// The uuid and checksum seed: both random, or from `--uuid` a seed
/// derived from it.
fn identity(given: Option<[u8; 16]>) -> Result<([u8; 16], u32), Failure> {
    if let Some(uuid) = given {
        return Ok((uuid, lfs::mkfs::seed_for_uuid(&uuid)));
    }
    let mut rnd = [0u8; 20];
    getrandom::getrandom(&mut rnd).map_err(|e| {
        fail(
            Exit::Error,
            anyhow!("cannot get random bytes for the uuid: {e}"),
        )
    })?;
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&rnd[..16]);
    // RFC 4122 version 4 (random) uuid.
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    Ok((
        uuid,
        u32::from_le_bytes([rnd[16], rnd[17], rnd[18], rnd[19]]),
    ))
}

fn options(args: &Args) -> Result<MkfsOptions, Failure> {
    let (uuid, seed) = identity(args.uuid)?;
    let (secs, nsec) = creation_time()?;
    let mut o = MkfsOptions::new(uuid, seed, secs, nsec);
    o.block_size = args.block_size;
    // Until the device's size is known (`sized`).
    o.blocks_per_segment = args
        .blocks_per_segment
        .unwrap_or(format::DEFAULT_BLOCKS_PER_SEGMENT);
    o.reserved_percent = args.reserved_percent;
    o.label = args.label.clone();
    o.discard = !args.no_discard;
    // The user formatting it owns it (root: 0:0, as before), so that a
    // user can mount, snapshot and clean an image of their own.
    o.root_uid = nix::unistd::geteuid().as_raw();
    o.root_gid = nix::unistd::getegid().as_raw();
    Ok(o)
}

/// The options for a device of `len` bytes: without `-B`, segments sized
/// for it (`format::auto_blocks_per_segment`).
fn sized(args: &Args, len: u64, opts: &MkfsOptions) -> MkfsOptions {
    let mut o = opts.clone();
    if args.blocks_per_segment.is_none() {
        o.blocks_per_segment = format::auto_blocks_per_segment(len, o.block_size);
    }
    o
}

/// Creates an empty image file where none exists; `--size` gives it its
/// length once every check has passed.
fn create_image(path: &Path) -> Result<(), Failure> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map(drop)
        .map_err(|e| {
            fail(
                Exit::Error,
                anyhow!(
                    "cannot create image file {}: {}",
                    path.display(),
                    io_reason(&e)
                ),
            )
        })
}

/// Shrinking an image needs -f.
fn check_shrink(shown: &str, cur: u64, size: u64, force: bool) -> Result<(), Failure> {
    if cur > size && !force {
        return Err(fail(
            Exit::Usage,
            anyhow!(
                "{shown} is {cur} bytes, larger than --size {size}; refusing to shrink it without -f"
            ),
        ));
    }
    Ok(())
}

/// The loop device that `path` is attached to, if any.
fn attached_loop_device(path: &Path) -> Option<String> {
    let want = fs::canonicalize(path).ok()?;
    let entries = fs::read_dir("/sys/block").ok()?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(backing) = fs::read_to_string(e.path().join("loop/backing_file")) else {
            continue;
        };
        if Path::new(backing.trim()) == want {
            return Some(format!("/dev/{name}"));
        }
    }
    None
}

fn print_geometry(shown: &str, kind: &str, geo: &Geometry, opts: &MkfsOptions, dry_run: bool) {
    let verb = if dry_run { "would format" } else { "formatted" };
    let dev_bytes = geo.total_blocks * u64::from(geo.block_size);
    println!(
        "mkfs.lfs {}: {verb} {shown} ({kind}, {})",
        env!("CARGO_PKG_VERSION"),
        human_bytes(dev_bytes)
    );
    println!("  block size          {} bytes", geo.block_size);
    println!(
        "  segment size        {} blocks ({})",
        geo.blocks_per_segment,
        human_bytes(geo.segment_bytes())
    );
    println!(
        "  segments            {} ({})",
        geo.nsegments,
        format::describe_reserve(geo.nsegments, geo.reserved_percent)
    );
    println!("  device blocks       {}", geo.total_blocks);
    println!("  usable space        {}", human_bytes(geo.usable_bytes()));
    let label = if opts.label.is_empty() {
        "(none)"
    } else {
        &opts.label
    };
    println!("  label               {label}");
    if !dry_run {
        println!("  uuid                {}", format::uuid_string(&opts.uuid));
    }
}
