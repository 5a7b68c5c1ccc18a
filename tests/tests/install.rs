//! `make install` and `make uninstall` into temporary directories: the
//! commands, man pages and configuration land where they belong and run,
//! and configuration the administrator edited is never overwritten.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use lfs_e2e::{
    cargo, installed_commands, make, man_pages, man_section, require_tool, run_ok, temp_dir,
    workspace_root, Output, MAKE_TIMEOUT, QUICK_TIMEOUT,
};

/// `make TARGET VAR=VALUE...`, which must succeed.
fn make_target(target: &str, vars: &[(&str, &Path)]) -> Output {
    let mut cmd = make();
    cmd.arg(target);
    for (var, value) in vars {
        let mut arg = OsString::from(format!("{var}="));
        arg.push(value);
        cmd.arg(arg);
    }
    run_ok(&mut cmd, MAKE_TIMEOUT)
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn write(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// The regular files in `dir` (none if it does not exist), by name.
fn files_in(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .map(|e| e.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())))
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Asserts every command is installed in `sbin`, executable, and answers
/// `--help`.
fn assert_commands_installed(sbin: &Path) {
    for command in installed_commands() {
        let path = sbin.join(&command.name);
        let meta = fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{} is not installed: {e}", path.display()));
        assert!(
            meta.permissions().mode() & 0o111 != 0,
            "{} is not executable",
            path.display()
        );
        let out = run_ok(Command::new(&path).arg("--help"), QUICK_TIMEOUT);
        assert!(
            !out.stdout.trim().is_empty(),
            "`{} --help` printed nothing",
            path.display()
        );
    }
}

/// Asserts every `man/*.[1-8]` is installed, unchanged, in
/// `mandir/man<section>`.
fn assert_man_pages_installed(mandir: &Path) {
    let pages = man_pages();
    assert!(!pages.is_empty(), "no man pages in man/ to install");
    for page in pages {
        let section = man_section(&page).unwrap_or_else(|| panic!("{}", page.display()));
        let name = page.file_name().unwrap_or_default();
        let installed = mandir.join(format!("man{section}")).join(name);
        assert!(
            read(&installed) == read(&page),
            "{} is missing or differs from {}",
            installed.display(),
            page.display()
        );
    }
}

/// `man -M mandir -w SECTION NAME` finds `expected`.
fn assert_man_finds(mandir: &Path, section: &str, name: &str, expected: &Path) {
    let out = run_ok(
        Command::new("man")
            .env_remove("MANPATH")
            .env_remove("MANOPT")
            .env_remove("MANSECT")
            .arg("-M")
            .arg(mandir)
            .args(["-w", section, name]),
        QUICK_TIMEOUT,
    );
    assert_eq!(
        Path::new(out.stdout.trim()),
        expected,
        "`man -M {} -w {section} {name}` found the wrong page",
        mandir.display()
    );
}

#[test]
fn install_into_prefix() {
    require_tool("man");
    let tmp = temp_dir();
    let prefix = tmp.path().join("usr");
    let sysconf = tmp.path().join("etc/lfs");
    make_target(
        "install",
        &[
            ("PREFIX", &prefix),
            ("DESTDIR", Path::new("")),
            ("SYSCONFDIR", &sysconf),
        ],
    );

    assert_commands_installed(&prefix.join("sbin"));
    for name in ["fsd", "fsctl", "mkfs.lfs", "cleanerd"] {
        assert!(
            prefix.join("sbin").join(name).is_file(),
            "{name} is not installed (missing from the Makefile's BINS?)"
        );
    }

    let mandir = prefix.join("share/man");
    assert_man_pages_installed(&mandir);
    assert_man_finds(&mandir, "5", "lfs", &mandir.join("man5/lfs.5"));
    assert_man_finds(
        &mandir,
        "5",
        "cleanerd.conf",
        &mandir.join("man5/cleanerd.conf.5"),
    );
    for command in installed_commands() {
        assert_man_finds(
            &mandir,
            "8",
            &command.name,
            &mandir.join("man8").join(format!("{}.8", command.name)),
        );
    }

    // The shipped configuration, whatever conf/ holds (maybe nothing yet),
    // is installed as it is, and nothing else is.
    let conf = workspace_root().join("conf");
    let shipped = files_in(&conf);
    assert_eq!(
        files_in(&sysconf),
        shipped,
        "files in {}",
        sysconf.display()
    );
    for name in &shipped {
        assert!(
            read(&sysconf.join(name)) == read(&conf.join(name)),
            "{} differs from conf/{name}",
            sysconf.join(name).display()
        );
    }
}

#[test]
fn install_honours_destdir() {
    let tmp = temp_dir();
    let stage = tmp.path().join("stage");
    let conf_src = tmp.path().join("conf");
    fs::create_dir(&conf_src).unwrap();
    write(&conf_src.join("test.conf"), "# shipped\n");
    make_target(
        "install",
        &[
            ("DESTDIR", &stage),
            ("PREFIX", Path::new("/usr")),
            ("SYSCONFDIR", Path::new("/etc/lfs")),
            ("CONF_SRC", &conf_src),
        ],
    );
    assert_commands_installed(&stage.join("usr/sbin"));
    assert_man_pages_installed(&stage.join("usr/share/man"));
    assert_eq!(
        files_in(&stage.join("etc/lfs")),
        BTreeSet::from(["test.conf".to_owned()])
    );
    // Everything went under DESTDIR: the stage holds only usr/ and etc/.
    let top: BTreeSet<String> = fs::read_dir(&stage)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, BTreeSet::from(["etc".to_owned(), "usr".to_owned()]));
}

/// A prefix, a sysconf dir and a fake conf/ with two shipped files.
struct ConfFixture {
    _tmp: tempfile::TempDir,
    prefix: PathBuf,
    sysconf: PathBuf,
    conf_src: PathBuf,
}

impl ConfFixture {
    fn new() -> Self {
        let tmp = temp_dir();
        let conf_src = tmp.path().join("conf");
        fs::create_dir(&conf_src).unwrap();
        write(
            &conf_src.join("edited.toml"),
            "# shipped edited.toml\nx = 1\n",
        );
        write(&conf_src.join("kept.conf"), "# shipped kept.conf\n");
        ConfFixture {
            prefix: tmp.path().join("usr"),
            sysconf: tmp.path().join("etc/lfs"),
            conf_src,
            _tmp: tmp,
        }
    }

    fn make(&self, target: &str) -> Output {
        make_target(
            target,
            &[
                ("PREFIX", &self.prefix),
                ("DESTDIR", Path::new("")),
                ("SYSCONFDIR", &self.sysconf),
                ("CONF_SRC", &self.conf_src),
            ],
        )
    }
}

#[test]
fn reinstall_keeps_edited_conf_and_ships_new_beside_it() {
    let f = ConfFixture::new();
    f.make("install");
    let edited = f.sysconf.join("edited.toml");
    let kept = f.sysconf.join("kept.conf");
    assert_eq!(read(&edited), read(&f.conf_src.join("edited.toml")));
    assert_eq!(read(&kept), read(&f.conf_src.join("kept.conf")));

    write(&edited, "# the administrator's edit\nx = 2\n");
    let out = f.make("install");

    assert_eq!(
        read(&edited),
        b"# the administrator's edit\nx = 2\n",
        "the edit did not survive reinstalling"
    );
    let new = f.sysconf.join("edited.toml.new");
    assert_eq!(
        read(&new),
        read(&f.conf_src.join("edited.toml")),
        "{} is not the shipped file",
        new.display()
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("notice:") && l.contains(&*edited.to_string_lossy())),
        "no notice about {}:\n{out}",
        edited.display()
    );
    // An unedited file is left alone, with no .new.
    assert_eq!(
        files_in(&f.sysconf),
        BTreeSet::from([
            "edited.toml".to_owned(),
            "edited.toml.new".to_owned(),
            "kept.conf".to_owned()
        ])
    );
}

#[test]
fn uninstall_removes_installed_files_but_keeps_edited_conf() {
    let f = ConfFixture::new();
    f.make("install");
    let edited = f.sysconf.join("edited.toml");
    write(&edited, "# the administrator's edit\n");
    f.make("install");
    f.make("uninstall");

    for command in installed_commands() {
        let path = f.prefix.join("sbin").join(&command.name);
        assert!(!path.exists(), "{} survived uninstall", path.display());
    }
    for page in man_pages() {
        let section = man_section(&page).unwrap();
        let path = f
            .prefix
            .join(format!("share/man/man{section}"))
            .join(page.file_name().unwrap());
        assert!(!path.exists(), "{} survived uninstall", path.display());
    }
    assert_eq!(
        files_in(&f.sysconf),
        BTreeSet::from(["edited.toml".to_owned()]),
        "uninstall must remove unedited conf files and the .new copy, and keep the edited one"
    );
    assert_eq!(read(&edited), b"# the administrator's edit\n");
}

/// The Makefile's BINS names exactly the workspace's binaries: a new binary
/// is installed, and nothing installs a binary that does not exist.
#[test]
fn bins_lists_every_workspace_binary() {
    let out = run_ok(
        Command::new(cargo()).current_dir(workspace_root()).args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
        ]),
        QUICK_TIMEOUT,
    );
    let metadata: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("cargo metadata printed invalid JSON: {e}"));
    let mut workspace_bins = BTreeSet::new();
    for package in metadata["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let is_bin = target["kind"]
                .as_array()
                .expect("kind")
                .iter()
                .any(|k| k == "bin");
            if is_bin {
                workspace_bins.insert(target["name"].as_str().expect("name").to_owned());
            }
        }
    }
    let installed: BTreeSet<String> = installed_commands()
        .iter()
        .map(|c| c.cargo_bin.clone())
        .collect();
    assert_eq!(
        installed, workspace_bins,
        "the Makefile's BINS (left) must name exactly the workspace's binaries (right)"
    );
}

/// Issue 26 item 13: `make install` installs bash, zsh and fish
/// completions of the four commands, and bash completes with them.
#[test]
fn install_puts_shell_completions_that_complete() {
    require_tool("bash");
    let tmp = temp_dir();
    let prefix = tmp.path().join("usr");
    make_target(
        "install",
        &[
            ("PREFIX", &prefix),
            ("DESTDIR", Path::new("")),
            ("SYSCONFDIR", &tmp.path().join("etc/lfs")),
        ],
    );
    let share = prefix.join("share");
    for name in ["mkfs.lfs", "fsd", "fsctl", "cleanerd"] {
        for file in [
            share.join("bash-completion/completions").join(name),
            share
                .join("zsh/vendor-completions")
                .join(format!("_{name}")),
            share
                .join("fish/vendor_completions.d")
                .join(format!("{name}.fish")),
        ] {
            let text = fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{} is not installed: {e}", file.display()));
            assert!(text.contains(name), "{}", file.display());
        }
    }
    // What bash offers after `fsctl ls` and `fsctl clean --st`.
    let complete = |words: &str| {
        let script = format!(
            "source '{}'\nCOMP_WORDS=({words})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n\
             _fsctl fsctl \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"\necho \"${{COMPREPLY[@]}}\"",
            share.join("bash-completion/completions/fsctl").display()
        );
        run_ok(Command::new("bash").arg("-c").arg(script), QUICK_TIMEOUT).stdout
    };
    assert_eq!(complete("fsctl ls").trim(), "lssu lscp");
    assert!(complete("fsctl clean --st").contains("--status"));
}
