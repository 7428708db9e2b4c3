//! `lockstep lab run|plan` and `sim run` with an option the scenario's kind does not
//! take, on each shipped kind: exit status 2 and a message naming the option, the file
//! and its kind, before anything is built (as an unprivileged user: no root needed).
//! An unknown `kind` is refused the same way, naming file, line and field.

use std::process::{Command, Output};

mod common;

use common::cli::{lockstep, scenario};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// As an unprivileged user when the tests run as root (and `setpriv` is there): the
/// refusal must come before the root check and before anything is built.
fn lockstep_unprivileged(args: &[&str]) -> Output {
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    match (root, setpriv) {
        (true, Some(sp)) => Command::new(sp)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_lockstep"))
            .args(args)
            .output()
            .expect("setpriv runs the lockstep binary"),
        _ => lockstep(args),
    }
}

/// (command, file, options, what stderr says after "lockstep: ")
const CASES: &[(&str, &str, &[&str], &str)] = &[
    // TDP
    (
        "run",
        "line.toml",
        &["--repeat", "2"],
        "--repeat applies to jitter scenarios only; {f} is a TDP scenario (",
    ),
    (
        "run",
        "mesh4.toml",
        &["--repeat", "3", "--rt-throttling-off"],
        "--repeat applies to jitter scenarios only; {f} is a TDP scenario (",
    ),
    // jitter
    (
        "run",
        "cbr-jitter.toml",
        &["--tf", "100us"],
        "--tf applies to TDP scenarios only; {f} is a jitter scenario (it sets its own timing: scenario.period)",
    ),
    (
        "run",
        "cbr-jitter.toml",
        &["--modes", "fifo"],
        "--modes applies to TDP scenarios only; {f} is a jitter scenario (",
    ),
    (
        "run",
        "cbr-jitter.toml",
        &["--keep"],
        "--keep applies to TDP scenarios only; {f} is a jitter scenario (",
    ),
    (
        "plan",
        "cbr-jitter.toml",
        &["--tf", "1ms"],
        "--tf applies to TDP scenarios only; {f} is a jitter scenario (",
    ),
    // rt-service
    (
        "run",
        "rt-service.toml",
        &["--keep"],
        "--keep applies to TDP scenarios only; {f} is an rt-service scenario (",
    ),
    (
        "run",
        "rt-service.toml",
        &["--repeat", "2"],
        "--repeat applies to jitter scenarios only; {f} is an rt-service scenario (",
    ),
    (
        "plan",
        "rt-service.toml",
        &["--output", "/nonexistent/lockstep-plan"],
        "lab plan --output applies to TDP scenarios only; {f} is an rt-service scenario (",
    ),
    // shaped-switch
    (
        "run",
        "shaped-switch.toml",
        &["--json"],
        "--json applies to TDP, jitter and rt-service scenarios; {f} is a shaped-switch scenario (",
    ),
    (
        "run",
        "shaped-switch.toml",
        &["--modes", "tdp", "-q"],
        "--modes applies to TDP scenarios only; {f} is a shaped-switch scenario (",
    ),
    (
        "plan",
        "shaped-switch.toml",
        &["--tf", "1ms"],
        "--tf applies to TDP scenarios only; {f} is a shaped-switch scenario (",
    ),
];

/// The shipped scenarios copied where the unprivileged user can read them (a
/// checkout under a private directory, such as one made by `mktemp -d`, is not);
/// removed on drop.
struct ReadableCopies(std::path::PathBuf);

impl ReadableCopies {
    fn new() -> ReadableCopies {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lockstep-cli-flags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .expect("the directory made readable");
        ReadableCopies(dir)
    }

    /// The path of a world-readable copy of `scenarios/<name>`.
    fn of(&self, name: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let to = self.0.join(name);
        std::fs::copy(scenario(name), &to).expect("the scenario copied");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))
            .expect("the copy made readable");
        to.display().to_string()
    }
}

impl Drop for ReadableCopies {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_option_the_kind_does_not_take_exits_2_naming_option_file_and_kind() {
    let readable = ReadableCopies::new();
    for (cmd, file, opts, want) in CASES {
        let f = readable.of(file);
        let mut args = vec!["lab", cmd, f.as_str()];
        args.extend_from_slice(opts);
        let o = lockstep_unprivileged(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "lockstep {args:?}: {err}");
        let want = format!("lockstep: {}", want.replace("{f}", &f));
        assert!(
            err.starts_with(&want),
            "lockstep {args:?}:\n  got  {err}\n  want {want}…"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(o.stdout.is_empty(), "nothing on stdout: {args:?}");
    }
}

#[test]
fn the_options_a_kind_takes_are_not_refused() {
    // lab plan builds nothing: it shows each kind's plan and exits 0
    for file in [
        "line.toml",
        "cbr-jitter.toml",
        "rt-service.toml",
        "shaped-switch.toml",
    ] {
        let o = lockstep(&["lab", "plan", &scenario(file)]);
        assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
    }
    let o = lockstep(&[
        "lab",
        "plan",
        &scenario("line.toml"),
        "--tf",
        "100us",
        "--modes",
        "tdp",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("TF 100us"));
}

#[test]
fn sim_run_refuses_the_os_measurement_kinds() {
    for (file, kind) in [
        ("cbr-jitter.toml", "a jitter-source scenario"),
        ("rt-service.toml", "an rt-service scenario"),
    ] {
        let f = scenario(file);
        let o = lockstep(&["sim", "run", &f, "--tf", "1ms"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.starts_with(&format!("lockstep: {f}: kind: {kind}")),
            "{err}"
        );
        assert!(err.contains("run it with `lockstep lab run`"), "{err}");
    }
}

#[test]
fn sim_run_takes_the_shaped_switch_but_not_its_frames() {
    let f = scenario("shaped-switch.toml");
    let o = lockstep(&["sim", "run", &f, "--tf", "1ms"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "lockstep: --tf applies to TDP scenarios only; {f} is a shaped-switch scenario"
        )),
        "{err}"
    );
}

#[test]
fn an_unknown_kind_names_file_line_and_the_valid_kinds() {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-lab-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join("typo.toml");
    std::fs::write(&p, "[scenario]\nname = \"x\"\nkind = \"jiter\"\n").expect("write");
    let f = p.display().to_string();
    for args in [
        vec!["lab", "run", f.as_str()],
        vec!["lab", "plan", f.as_str()],
        vec!["sim", "run", f.as_str()],
    ] {
        let o = lockstep(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "lockstep: {f}:3:8: scenario.kind: unknown kind \"jiter\": expected one of \"tdp\", \"shaped-switch\", \"jitter\", \"rt-service\" (no kind is \"tdp\")"
            ),
            "{args:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lab_plan_json_is_a_document_of_each_run_for_tdp_scenarios_only() {
    let path = scenario("faults/link-down.toml");
    let o = lockstep(&["lab", "plan", &path, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one document");
    assert_eq!(doc["kind"], "lab.plan");
    let run = &doc["results"]["runs"][0];
    assert_eq!(run["label"], "TDP");
    let names: Vec<&str> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tx", "r1", "r2", "rx"]);
    assert_eq!(
        run["flows"][0]["starts"],
        serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7])
    );
    assert_eq!(run["faults"][0]["fault"], "link-down");
    assert_eq!(run["faults"][0]["at_ns"], 1_000_000_000);
    let shaped = scenario("shaped-switch.toml");
    let o = lockstep(&["lab", "plan", &shaped, "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--json: only a TDP scenario's plan"),
        "{}",
        stderr(&o)
    );
}
