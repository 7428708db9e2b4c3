//! `lockstep completions SHELL` and `lockstep man`: a completion script that bash
//! loads, and a man page for the binary and for every subcommand.

mod common;

use std::process::Command;

use common::cli::lockstep;

#[test]
fn bash_loads_the_completion_script() {
    let o = lockstep(&["completions", "bash"]);
    assert!(o.status.success());
    let script = std::env::temp_dir().join(format!("lockstep-compl-{}", std::process::id()));
    std::fs::write(&script, &o.stdout).unwrap();
    let Ok(out) = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p lockstep",
            script.display()
        ))
        .output()
    else {
        eprintln!("skipping: no bash here");
        return;
    };
    let _ = std::fs::remove_file(&script);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("-F _lockstep lockstep"), "{shown}");
}

#[test]
fn every_shell_gets_a_script_and_others_are_refused() {
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = lockstep(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("lockstep") && text.contains("probe"),
            "{shell}"
        );
    }
    let o = lockstep(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_man_page_for_the_binary_and_every_subcommand() {
    let dir = std::env::temp_dir().join(format!("lockstep-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = lockstep(&["man", "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = String::from_utf8_lossy(&o.stdout);
    for page in [
        "lockstep.1",
        "lockstep-probe-timer.1",
        "lockstep-lab-run.1",
        "lockstep-ctl-serve.1",
    ] {
        let path = dir.join(page);
        assert!(listed.contains(path.to_str().unwrap()), "{page} listed");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page} is roff"
        );
    }
    let timer = std::fs::read_to_string(dir.join("lockstep-probe-timer.1")).unwrap();
    assert!(
        timer.contains("\\-\\-interval"),
        "the options are on the page"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
