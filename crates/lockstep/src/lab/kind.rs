//! What kind of scenario a file is, read once, and which `lab` options each kind takes.
//!
//! A scenario file says its kind in `[scenario] kind`: none (or `"tdp"`) for a TDP/FIFO
//! network, `"jitter"`, `"rt-service"` or `"shaped-switch"` for the other methods. The
//! kind is read by a small probe that looks at that one field and nothing else, before
//! the kind's own parser checks the whole file; an unknown kind is an error naming the
//! file, the line and the field. Options given on the command line that the kind does
//! not take are refused (exit status 2) before anything is built.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::scenario::{ScenarioError, Source};

/// The four kinds of scenario `lockstep lab` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioKind {
    /// Routers, senders, receivers and loads, run in FIFO/TDP/kernel modes
    /// (`lab/run.rs`); the only kind `sim run` takes.
    Tdp,
    /// Shaped bursts into a Linux bridge port, per shaper and interval (`lab/shaped.rs`).
    Shaped,
    /// The jitter-source methodology: a baseline and variants (`lab/method.rs`).
    Jitter,
    /// A request/response server under bulk load, per configuration (`lab/rtservice.rs`).
    RtService,
}

impl ScenarioKind {
    pub const ALL: [ScenarioKind; 4] = [
        ScenarioKind::Tdp,
        ScenarioKind::Shaped,
        ScenarioKind::Jitter,
        ScenarioKind::RtService,
    ];

    /// The value of `[scenario] kind`.
    pub fn name(self) -> &'static str {
        match self {
            ScenarioKind::Tdp => "tdp",
            ScenarioKind::Shaped => "shaped-switch",
            ScenarioKind::Jitter => "jitter",
            ScenarioKind::RtService => "rt-service",
        }
    }

    pub fn from_name(s: &str) -> Option<ScenarioKind> {
        ScenarioKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// How messages call it: "TDP", "jitter", …
    pub fn label(self) -> &'static str {
        match self {
            ScenarioKind::Tdp => "TDP",
            k => k.name(),
        }
    }

    /// "a TDP scenario", "an rt-service scenario".
    pub fn a_scenario(self) -> String {
        let article = match self {
            ScenarioKind::RtService => "an",
            _ => "a",
        };
        format!("{article} {} scenario", self.label())
    }
}

impl std::fmt::Display for ScenarioKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Deserialize)]
struct ProbeFile {
    #[serde(default)]
    scenario: Option<ProbeScenario>,
}

#[derive(Deserialize)]
struct ProbeScenario {
    #[serde(default)]
    kind: Option<Spanned<String>>,
}

/// The kind of a scenario file, and where its `kind` value is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probed {
    pub kind: ScenarioKind,
    /// Byte range of the `kind` value, when the file has one.
    pub span: Option<Range<usize>>,
}

/// Reads `[scenario] kind` only (every other field is left to the kind's parser).
/// No `[scenario]` table or no `kind` is a TDP scenario: its parser then says what is
/// missing.
pub fn probe(file: &str, text: &str) -> Result<Probed, ScenarioError> {
    let src = Source {
        file: file.to_string(),
        text: text.to_string(),
    };
    let raw: ProbeFile = toml::from_str(text).map_err(|e| src.toml_error(&e))?;
    let Some(kind) = raw.scenario.and_then(|s| s.kind) else {
        return Ok(Probed {
            kind: ScenarioKind::Tdp,
            span: None,
        });
    };
    let name = kind.get_ref().trim();
    match ScenarioKind::from_name(name) {
        Some(k) => Ok(Probed {
            kind: k,
            span: Some(kind.span()),
        }),
        None => {
            let valid: Vec<String> = ScenarioKind::ALL
                .iter()
                .map(|k| format!("\"{}\"", k.name()))
                .collect();
            Err(src.error(
                &kind.span(),
                "scenario.kind",
                format!(
                    "unknown kind \"{name}\": expected one of {} (no kind is \"tdp\")",
                    valid.join(", ")
                ),
            ))
        }
    }
}

/// The text the TDP parser reads: its file format has no `kind` field, so a written
/// `kind = "tdp"` is blanked out (same length, so errors keep their lines and columns).
pub fn tdp_text(file: &str, text: &str, p: &Probed) -> Result<String, ScenarioError> {
    let Some(span) = &p.span else {
        return Ok(text.to_string());
    };
    let line_start = text[..span.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let key = text[line_start..span.start].trim();
    let on_own_line = key
        .strip_suffix('=')
        .map(|k| matches!(k.trim(), "kind" | "\"kind\"" | "scenario.kind"))
        .unwrap_or(false);
    if !on_own_line {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        return Err(src.error(
            span,
            "scenario.kind",
            "write kind = \"tdp\" on a line of its own under [scenario], or leave it out",
        ));
    }
    let mut t = text.to_string();
    t.replace_range(line_start..span.end, &" ".repeat(span.end - line_start));
    Ok(t)
}

/// A `lab` option that only some kinds of scenario take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabFlag {
    /// `lab run/plan --tf`.
    Tf,
    /// `lab run/plan --modes`.
    Modes,
    /// `lab run/plan --scale`, `sim run --scale`.
    Scale,
    /// `lab run --keep`.
    Keep,
    /// `lab run --json`.
    Json,
    /// `lab run --repeat`.
    Repeat,
    /// `lab plan --output` (node files).
    PlanOutput,
}

impl LabFlag {
    #[cfg(test)]
    pub const ALL: [LabFlag; 7] = [
        LabFlag::Tf,
        LabFlag::Modes,
        LabFlag::Scale,
        LabFlag::Keep,
        LabFlag::Json,
        LabFlag::Repeat,
        LabFlag::PlanOutput,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LabFlag::Tf => "--tf",
            LabFlag::Modes => "--modes",
            LabFlag::Scale => "--scale",
            LabFlag::Keep => "--keep",
            LabFlag::Json => "--json",
            LabFlag::Repeat => "--repeat",
            LabFlag::PlanOutput => "lab plan --output",
        }
    }

    /// The kinds that take it.
    pub fn kinds(self) -> &'static [ScenarioKind] {
        use ScenarioKind::*;
        match self {
            LabFlag::Tf | LabFlag::Modes | LabFlag::Scale | LabFlag::Keep | LabFlag::PlanOutput => {
                &[Tdp]
            }
            LabFlag::Json => &[Tdp, Jitter, RtService],
            LabFlag::Repeat => &[Jitter],
        }
    }

    pub fn applies_to(self, kind: ScenarioKind) -> bool {
        self.kinds().contains(&kind)
    }

    /// Why a kind that does not take it has no use for it.
    fn why_not(self, kind: ScenarioKind) -> &'static str {
        use ScenarioKind::*;
        match (self, kind) {
            (LabFlag::Tf, Jitter) => "it sets its own timing: scenario.period",
            (LabFlag::Tf, RtService) => {
                "it has no time-frames: the client's requests come at random intervals (scenario.interval)"
            }
            (LabFlag::Tf, _) => "it has no time-frames: its shapers' intervals are scenario.ts",
            (LabFlag::Modes, Jitter) => "it runs a baseline and its variants, not FIFO/TDP modes",
            (LabFlag::Modes, RtService) => {
                "it runs its configurations (scenario.configurations), not FIFO/TDP modes"
            }
            (LabFlag::Modes, _) => {
                "it runs each of scenario.shapers at each of scenario.ts, not FIFO/TDP modes"
            }
            (LabFlag::Scale, Jitter | RtService) => {
                "it measures this host's own timing, which a time scale would change"
            }
            (LabFlag::Scale, _) => "its bound is computed at the scenario's own rates and interval",
            (LabFlag::Keep, _) => "its namespaces are always removed after each run",
            (LabFlag::Json, _) => "its result document is summary.json in the result directory",
            (LabFlag::Repeat, Tdp) => "it runs each mode and time-frame once",
            (LabFlag::Repeat, RtService) => "it runs each configuration once",
            (LabFlag::Repeat, _) => "it runs each shaper and interval once",
            (LabFlag::PlanOutput, _) => "it has no node files: lab plan only describes it",
        }
    }

    /// The usage error for giving this option with a scenario of `kind`.
    pub fn refusal(self, kind: ScenarioKind, file: &str) -> String {
        let kinds: Vec<&str> = self.kinds().iter().map(|k| k.label()).collect();
        let only = if kinds.len() == 1 { " only" } else { "" };
        format!(
            "{} applies to {} scenarios{only}; {file} is {} ({})",
            self.name(),
            join_or(&kinds),
            kind.a_scenario(),
            self.why_not(kind)
        )
    }
}

/// "a", "a and b", "a, b and c".
fn join_or(v: &[&str]) -> String {
    match v {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The first of `given` that `kind` does not take, as a usage message.
pub fn refuse(given: &[LabFlag], kind: ScenarioKind, file: &str) -> Result<(), String> {
    match given.iter().find(|f| !f.applies_to(kind)) {
        Some(f) => Err(f.refusal(kind, file)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(text: &str) -> Result<ScenarioKind, ScenarioError> {
        probe("s.toml", text).map(|p| p.kind)
    }

    #[test]
    fn the_probe_reads_only_the_kind() {
        assert_eq!(kind_of("[scenario]\nname = \"x\"\n"), Ok(ScenarioKind::Tdp));
        assert_eq!(kind_of(""), Ok(ScenarioKind::Tdp));
        assert_eq!(kind_of("[[node]]\nname = \"a\"\n"), Ok(ScenarioKind::Tdp));
        for k in ScenarioKind::ALL {
            let text = format!("[scenario]\nkind = \"{k}\"\nwhatever = 3\n[[variant]]\nx = 1\n");
            assert_eq!(kind_of(&text), Ok(k), "{k}");
        }
        assert_eq!(
            kind_of("scenario = { name = \"x\", kind = \"jitter\" }\n"),
            Ok(ScenarioKind::Jitter)
        );
    }

    #[test]
    fn an_unknown_kind_names_file_line_field_and_the_valid_ones() {
        let e = probe(
            "s.toml",
            "# c\n[scenario]\nname = \"x\"\nkind = \"jiter\"\n",
        )
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("s.toml", 4, 8));
        assert_eq!(e.field, "scenario.kind");
        assert_eq!(
            e.message,
            "unknown kind \"jiter\": expected one of \"tdp\", \"shaped-switch\", \"jitter\", \"rt-service\" (no kind is \"tdp\")"
        );
    }

    #[test]
    fn a_kind_that_is_not_a_string_or_bad_toml_is_an_error_with_a_line() {
        let e = probe("s.toml", "[scenario]\nkind = 3\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.field, "scenario.kind");
        let e = probe("s.toml", "[scenario]\nname = \n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn an_explicit_tdp_kind_is_blanked_for_the_tdp_parser_keeping_positions() {
        let text = "[scenario]\n  kind = \"tdp\"   # the default\nname = \"x\"\n";
        let p = probe("s.toml", text).unwrap();
        assert_eq!(p.kind, ScenarioKind::Tdp);
        let t = tdp_text("s.toml", text, &p).unwrap();
        assert_eq!(t.len(), text.len());
        assert_eq!(t.lines().nth(1).unwrap().trim(), "# the default");
        assert_eq!(t.lines().nth(2), Some("name = \"x\""));
        // no kind: the text as it is
        let plain = "[scenario]\nname = \"x\"\n";
        let p = probe("s.toml", plain).unwrap();
        assert_eq!(tdp_text("s.toml", plain, &p).unwrap(), plain);
        // an inline table is not rewritten
        let inline = "scenario = { kind = \"tdp\", name = \"x\" }\n";
        let p = probe("s.toml", inline).unwrap();
        let e = tdp_text("s.toml", inline, &p).unwrap_err();
        assert_eq!(e.field, "scenario.kind");
    }

    /// Every (option, kind) pair: the kinds that take an option pass, every other is
    /// refused with a message naming the option, the kinds it applies to, the file and
    /// the file's kind.
    #[test]
    fn every_option_is_refused_for_the_kinds_that_do_not_take_it() {
        use LabFlag::*;
        use ScenarioKind::*;
        let table: [(LabFlag, &[ScenarioKind], &str); 7] = [
            (Tf, &[Tdp], "--tf applies to TDP scenarios only"),
            (Modes, &[Tdp], "--modes applies to TDP scenarios only"),
            (Keep, &[Tdp], "--keep applies to TDP scenarios only"),
            (
                Json,
                &[Tdp, Jitter, RtService],
                "--json applies to TDP, jitter and rt-service scenarios;",
            ),
            (
                Repeat,
                &[Jitter],
                "--repeat applies to jitter scenarios only",
            ),
            (
                PlanOutput,
                &[Tdp],
                "lab plan --output applies to TDP scenarios only",
            ),
            (Scale, &[Tdp], "--scale applies to TDP scenarios only"),
        ];
        assert_eq!(table.len(), LabFlag::ALL.len());
        for (flag, takes, head) in table {
            for kind in ScenarioKind::ALL {
                let r = refuse(&[flag], kind, "f.toml");
                if takes.contains(&kind) {
                    assert_eq!(r, Ok(()), "{flag:?} {kind:?}");
                    continue;
                }
                let m = r.expect_err("refused");
                assert!(m.starts_with(head), "{m}");
                assert!(
                    m.contains(&format!("f.toml is {}", kind.a_scenario())),
                    "{m}"
                );
                assert!(m.ends_with(')'), "{m}");
            }
        }
    }

    #[test]
    fn the_refusal_reads_well() {
        assert_eq!(
            refuse(
                &[LabFlag::Tf],
                ScenarioKind::Jitter,
                "scenarios/cbr-jitter.toml"
            ),
            Err("--tf applies to TDP scenarios only; scenarios/cbr-jitter.toml is a jitter scenario (it sets its own timing: scenario.period)".to_string())
        );
        assert_eq!(
            refuse(&[LabFlag::Repeat], ScenarioKind::Tdp, "line.toml"),
            Err("--repeat applies to jitter scenarios only; line.toml is a TDP scenario (it runs each mode and time-frame once)".to_string())
        );
        assert!(refuse(&[LabFlag::Keep], ScenarioKind::RtService, "r.toml")
            .unwrap_err()
            .contains("r.toml is an rt-service scenario"));
        // the first option that does not apply is the one named
        let m = refuse(
            &[LabFlag::Json, LabFlag::Keep, LabFlag::Tf],
            ScenarioKind::Shaped,
            "s.toml",
        )
        .unwrap_err();
        assert!(m.starts_with("--json "), "{m}");
        assert_eq!(refuse(&[], ScenarioKind::Shaped, "s.toml"), Ok(()));
    }
}
