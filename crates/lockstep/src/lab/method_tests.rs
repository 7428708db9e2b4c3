use super::*;

const GOOD: &str = r#"[scenario]
kind = "jitter"
name = "t"
period = "10us"

[baseline]
receive = "poll"

[[variant]]
name = "blocking receive"
receive = "block"

[[variant]]
name = "sleep pacing"
pacing = "sleep"
"#;

fn m(std: f64, p: f64, x: f64) -> Metrics {
    Metrics {
        std_ns: std,
        p999_ns: p,
        max_ns: x,
    }
}

#[test]
fn parses_and_lists_changes() {
    let j = Jitter::parse("s.toml", GOOD).unwrap();
    assert_eq!(j.period, Duration::from_micros(10));
    assert_eq!(j.payload, Size(1376));
    assert_eq!(j.baseline, Setup::default());
    assert_eq!(j.variants.len(), 2);
    assert_eq!(j.variants[0].changes, vec!["receive=block".to_string()]);
    assert_eq!(j.variants[1].setup.pacing, Pacing::Sleep);
    assert_eq!(j.variants[1].setup.receive, Receive::Poll);
    assert_eq!(j.noise_cpu, None);
    assert_eq!(
        crate::lab::kind::probe("s.toml", GOOD).unwrap().kind,
        crate::lab::ScenarioKind::Jitter
    );
}

fn err(text: &str) -> ScenarioError {
    Jitter::parse("s.toml", text).unwrap_err()
}

#[test]
fn variant_that_changes_nothing_is_named() {
    let text = GOOD.replace("pacing = \"sleep\"", "pacing = \"hybrid\"");
    let e = err(&text);
    assert_eq!(e.field, "variant[1]");
    assert_eq!(e.line, 13);
    assert!(
        e.message.contains("\"sleep pacing\" changes nothing"),
        "{e}"
    );
    assert!(e.to_string().starts_with("s.toml:13:"), "{e}");
}

#[test]
fn bad_choice_names_file_line_field() {
    let e = err(&GOOD.replace("receive = \"block\"", "receive = \"blok\""));
    assert_eq!((e.file.as_str(), e.line), ("s.toml", 11));
    assert_eq!(e.field, "variant[0].receive");
    assert!(e.message.contains("\"poll\", \"block\""), "{e}");
    let e = err(&GOOD.replace("receive = \"poll\"", "receive = \"x\""));
    assert_eq!((e.line, e.field.as_str()), (7, "baseline.receive"));
}

#[test]
fn unknown_field_and_bad_values() {
    let e = err(&GOOD.replace("pacing = \"sleep\"", "pacnig = \"sleep\""));
    assert_eq!(e.line, 15);
    assert_eq!(e.field, "variant[1].pacnig");
    let e = err(&GOOD.replace("period = \"10us\"", "period = \"0s\""));
    assert_eq!((e.line, e.field.as_str()), (4, "scenario.period"));
    let e = err(&GOOD.replace("name = \"t\"", "name = \"t\"\nsink_cpu = 0"));
    assert_eq!((e.line, e.field.as_str()), (4, "scenario.sink_cpu"));
    let e = err(&GOOD.replace("name = \"t\"", "name = \"t\"\nnoise_cpu = 1"));
    assert_eq!(e.field, "scenario.noise_cpu");
    let e = err(&GOOD.replace("name = \"t\"", "name = \"t\"\npriority = 120"));
    assert_eq!(e.field, "scenario.priority");
    let e = err(&GOOD.replace("name = \"sleep pacing\"", "name = \"blocking receive\""));
    assert_eq!((e.line, e.field.as_str()), (14, "variant[1].name"));
    let e = err("[scenario]\nkind = \"jitter\"\nname = \"t\"\nperiod = \"1us\"\n");
    assert_eq!(e.field, "variant");
}

#[test]
fn durations_have_limits() {
    assert_eq!(
        err(&GOOD.replace("period = \"10us\"", "period = \"9ns\"")).to_string(),
        "s.toml:4:10: scenario.period: 9ns is below the limit of 10ns (100 Mpps)"
    );
    assert_eq!(
        err(&GOOD.replace(
            "period = \"10us\"",
            "period = \"10us\"\nduration = \"86401s\""
        ))
        .to_string(),
        "s.toml:5:12: scenario.duration: 86401s is above the limit of 1 day (86400s)"
    );
}

#[test]
fn contribution_arithmetic_is_exact() {
    let base = vec![
        Some(m(100.0, 1000.0, 5000.0)),
        Some(m(200.0, 1200.0, 6000.0)),
        Some(m(300.0, 1400.0, 7000.0)),
    ];
    let variants = vec![
        (
            "a".to_string(),
            vec![
                Some(m(150.0, 1000.0, 9000.0)),
                Some(m(400.0, 1100.0, 6000.0)),
                Some(m(450.0, 2000.0, 7000.0)),
            ],
        ),
        // round 2 missing: compared on rounds 1 and 3 only
        (
            "b".to_string(),
            vec![
                Some(m(100.0, 1000.0, 5000.0)),
                None,
                Some(m(500.0, 1400.0, 8000.0)),
            ],
        ),
        ("c".to_string(), vec![None, None, None]),
    ];
    let c = contributions(&base, &variants);
    assert_eq!(
        c[0].std_ns,
        Some(Spread {
            mean: 400.0 / 3.0,
            min: 50.0,
            max: 200.0,
            n: 3
        })
    );
    assert_eq!(
        c[0].p999_ns,
        Some(Spread {
            mean: 500.0 / 3.0,
            min: -100.0,
            max: 600.0,
            n: 3
        })
    );
    assert_eq!(
        c[0].max_ns,
        Some(Spread {
            mean: 4000.0 / 3.0,
            min: 0.0,
            max: 4000.0,
            n: 3
        })
    );
    assert_eq!(
        c[0].absolute.map(|a| a[0]),
        Some(Spread {
            mean: 1000.0 / 3.0,
            min: 150.0,
            max: 450.0,
            n: 3
        })
    );
    assert_eq!(
        c[1].std_ns,
        Some(Spread {
            mean: 100.0,
            min: 0.0,
            max: 200.0,
            n: 2
        })
    );
    assert_eq!(
        c[1].max_ns,
        Some(Spread {
            mean: 500.0,
            min: 0.0,
            max: 1000.0,
            n: 2
        })
    );
    assert_eq!(c[2].std_ns, None);
    assert_eq!(c[2].absolute, None);
    let b = baseline_spread(&base).unwrap();
    assert_eq!(
        b[1],
        Spread {
            mean: 1200.0,
            min: 1000.0,
            max: 1400.0,
            n: 3
        }
    );
    let t = contribution_table(Some(&b), &c, None);
    assert!(t.contains("baseline (absolute)"), "{t}");
    assert!(t.contains("+0.13 [+0.05..+0.20]"), "{t}");
    assert!(t.contains("1.20 [1.00..1.40]"), "{t}");
}

#[test]
fn formatting() {
    assert_eq!(fmt_us(1234.0, false), "1.23");
    assert_eq!(fmt_us(12345.0, true), "+12.3");
    assert_eq!(fmt_us(-123456.0, true), "-123");
    assert_eq!(fmt_spread(None, true), "-");
    let one = Spread::of(&[2000.0]).unwrap();
    assert_eq!(fmt_spread(Some(&one), true), "+2.00");
}

#[test]
fn commands_follow_the_setup() {
    let j = Jitter::parse("s.toml", GOOD).unwrap();
    let (sink, stream) = run_commands(&j, &j.baseline);
    assert!(sink.contains(&"--poll".to_string()));
    assert!(sink.windows(2).any(|w| w == ["--priority", "80"]));
    assert!(stream.windows(2).any(|w| w == ["--strategy", "hybrid"]));
    let (sink, stream) = run_commands(&j, &j.variants[0].setup);
    assert!(!sink.contains(&"--poll".to_string()));
    let _ = stream;
    let (_, stream) = run_commands(&j, &j.variants[1].setup);
    assert!(stream.windows(2).any(|w| w == ["--strategy", "sleep"]));
    assert_eq!(load_command(Load::None, 3), Ok(None));
}
