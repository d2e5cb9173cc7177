//! The release gate, tested as a security-relevant parser. Every test lives under `gate::` so
//! `cargo test gate` selects exactly these (plus the gate's unit tests).

mod support;

mod gate {
    use cnpe_lab::release_gate::{
        evaluate_bytes, evaluate_value, Verdict, COUNTERS, REQUIRED_FIELDS,
    };
    use proptest::prelude::*;
    use rstest::rstest;
    use serde_json::{json, Map, Value};
    use std::collections::BTreeSet;

    const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
    const OTHER_SHA: &str = "4c29f623ecb80f5d9411ee19bfc48f9f839c9ebe";
    const BODY: &str = "labhub-cnpe-v1";

    /// A state exactly as `cnpe-lab wait healthy` records it for the recovered release.
    fn valid() -> Map<String, Value> {
        let v = json!({
            "observed_at": "2026-12-02T15:04:05Z",
            "application": "cnpe-shop",
            "project": "cnpe-delivery",
            "target_revision": SHA,
            "observed_revision": SHA,
            "operation_revision": SHA,
            "operation_phase": "Succeeded",
            "sync": "Synced",
            "health": "Healthy",
            "namespace": "cnpe-shop",
            "deployment": "web",
            "generation": 3,
            "observed_generation": 3,
            "replicas": 1,
            "updated": 1,
            "ready": 1,
            "available": 1,
            "ready_endpoints": 1,
            "progress_deadline_exceeded": false,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"web-5d8f\" has successfully progressed."}
            ],
            "http_url": "https://127.0.0.1:6443/api/v1/namespaces/cnpe-shop/services/web:80/proxy/",
            "http_code": 200,
            "http_body": BODY,
            "http_error": null
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn fields(verdict: &Verdict) -> BTreeSet<String> {
        verdict
            .failing_fields()
            .into_iter()
            .map(String::from)
            .collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gate_approves_the_valid_state_and_evaluates_every_field() {
        let verdict = evaluate_value(&Value::Object(valid()), SHA, BODY);
        assert!(verdict.approved, "{:?}", verdict.report_lines());
        assert!(verdict.violations.is_empty());
        assert_eq!(verdict.evaluated, REQUIRED_FIELDS.to_vec());
    }

    #[test]
    fn gate_ignores_fields_outside_the_contract() {
        let mut s = valid();
        s.insert("progress_deadline_exceeded".into(), json!(true));
        s.insert("http_error".into(), json!("connection reset"));
        s.insert("operation_phase".into(), json!("Failed"));
        s.remove("observed_at");
        s.remove("conditions");
        s.insert("extra".into(), json!({"nested": [1, 2, 3]}));
        assert!(evaluate_value(&Value::Object(s), SHA, BODY).approved);
    }

    /// One field changed (or removed, for `None`); the verdict must name exactly `expected`.
    #[rstest]
    // target_revision / observed_revision
    #[case::target_missing("target_revision", None, &["target_revision"])]
    #[case::target_null("target_revision", Some(json!(null)), &["target_revision"])]
    #[case::target_bool("target_revision", Some(json!(true)), &["target_revision"])]
    #[case::target_int("target_revision", Some(json!(1)), &["target_revision"])]
    #[case::target_float("target_revision", Some(json!(1.5)), &["target_revision"])]
    #[case::target_array("target_revision", Some(json!([SHA])), &["target_revision"])]
    #[case::target_object("target_revision", Some(json!({"sha": SHA})), &["target_revision"])]
    #[case::target_uppercase("target_revision", Some(json!(SHA.to_uppercase())), &["target_revision"])]
    #[case::target_39_chars("target_revision", Some(json!(&SHA[..39])), &["target_revision"])]
    #[case::target_41_chars("target_revision", Some(json!(format!("{SHA}0"))), &["target_revision"])]
    #[case::target_other_sha("target_revision", Some(json!(OTHER_SHA)), &["target_revision"])]
    #[case::target_trailing_newline("target_revision", Some(json!(format!("{SHA}\n"))), &["target_revision"])]
    #[case::target_branch_name("target_revision", Some(json!("main")), &["target_revision"])]
    #[case::target_empty("target_revision", Some(json!("")), &["target_revision"])]
    #[case::observed_missing("observed_revision", None, &["observed_revision"])]
    #[case::observed_null("observed_revision", Some(json!(null)), &["observed_revision"])]
    #[case::observed_bool("observed_revision", Some(json!(false)), &["observed_revision"])]
    #[case::observed_int("observed_revision", Some(json!(0)), &["observed_revision"])]
    #[case::observed_uppercase("observed_revision", Some(json!(SHA.to_uppercase())), &["observed_revision"])]
    #[case::observed_39_chars("observed_revision", Some(json!(&SHA[..39])), &["observed_revision"])]
    #[case::observed_41_chars("observed_revision", Some(json!(format!("{SHA}a"))), &["observed_revision"])]
    #[case::observed_stale_sha("observed_revision", Some(json!(OTHER_SHA)), &["observed_revision"])]
    #[case::observed_leading_space("observed_revision", Some(json!(format!(" {SHA}"))), &["observed_revision"])]
    // sync / health
    #[case::sync_missing("sync", None, &["sync"])]
    #[case::sync_null("sync", Some(json!(null)), &["sync"])]
    #[case::sync_bool("sync", Some(json!(true)), &["sync"])]
    #[case::sync_int("sync", Some(json!(1)), &["sync"])]
    #[case::sync_lowercase("sync", Some(json!("synced")), &["sync"])]
    #[case::sync_trailing_space("sync", Some(json!("Synced ")), &["sync"])]
    #[case::sync_out_of_sync("sync", Some(json!("OutOfSync")), &["sync"])]
    #[case::sync_unknown("sync", Some(json!("Unknown")), &["sync"])]
    #[case::sync_array("sync", Some(json!(["Synced"])), &["sync"])]
    #[case::health_missing("health", None, &["health"])]
    #[case::health_null("health", Some(json!(null)), &["health"])]
    #[case::health_bool("health", Some(json!(true)), &["health"])]
    #[case::health_int("health", Some(json!(1)), &["health"])]
    #[case::health_lowercase("health", Some(json!("healthy")), &["health"])]
    #[case::health_trailing_space("health", Some(json!("Healthy ")), &["health"])]
    #[case::health_degraded("health", Some(json!("Degraded")), &["health"])]
    #[case::health_progressing("health", Some(json!("Progressing")), &["health"])]
    #[case::health_object("health", Some(json!({"status": "Healthy"})), &["health"])]
    // the five counters
    #[case::replicas_missing("replicas", None, &["replicas"])]
    #[case::replicas_null("replicas", Some(json!(null)), &["replicas"])]
    #[case::replicas_true("replicas", Some(json!(true)), &["replicas"])]
    #[case::replicas_string("replicas", Some(json!("1")), &["replicas"])]
    #[case::replicas_float("replicas", Some(json!(1.0)), &["replicas"])]
    #[case::replicas_zero("replicas", Some(json!(0)), &["replicas"])]
    #[case::replicas_two("replicas", Some(json!(2)), &["replicas"])]
    #[case::replicas_array("replicas", Some(json!([1])), &["replicas"])]
    #[case::updated_missing("updated", None, &["updated"])]
    #[case::updated_null("updated", Some(json!(null)), &["updated"])]
    #[case::updated_true("updated", Some(json!(true)), &["updated"])]
    #[case::updated_string("updated", Some(json!("1")), &["updated"])]
    #[case::updated_float("updated", Some(json!(1.0)), &["updated"])]
    #[case::updated_zero("updated", Some(json!(0)), &["updated"])]
    #[case::updated_two("updated", Some(json!(2)), &["updated"])]
    #[case::available_missing("available", None, &["available"])]
    #[case::available_null("available", Some(json!(null)), &["available"])]
    #[case::available_true("available", Some(json!(true)), &["available"])]
    #[case::available_string("available", Some(json!("1")), &["available"])]
    #[case::available_float("available", Some(json!(1.0)), &["available"])]
    #[case::available_zero("available", Some(json!(0)), &["available"])]
    #[case::available_negative("available", Some(json!(-1)), &["available"])]
    #[case::ready_missing("ready", None, &["ready"])]
    #[case::ready_null("ready", Some(json!(null)), &["ready"])]
    #[case::ready_true("ready", Some(json!(true)), &["ready"])]
    #[case::ready_string("ready", Some(json!("1")), &["ready"])]
    #[case::ready_float("ready", Some(json!(1.0)), &["ready"])]
    #[case::ready_zero("ready", Some(json!(0)), &["ready"])]
    #[case::ready_two("ready", Some(json!(2)), &["ready"])]
    #[case::endpoints_missing("ready_endpoints", None, &["ready_endpoints"])]
    #[case::endpoints_null("ready_endpoints", Some(json!(null)), &["ready_endpoints"])]
    #[case::endpoints_true("ready_endpoints", Some(json!(true)), &["ready_endpoints"])]
    #[case::endpoints_string("ready_endpoints", Some(json!("1")), &["ready_endpoints"])]
    #[case::endpoints_float("ready_endpoints", Some(json!(1.0)), &["ready_endpoints"])]
    #[case::endpoints_zero("ready_endpoints", Some(json!(0)), &["ready_endpoints"])]
    #[case::endpoints_two("ready_endpoints", Some(json!(2)), &["ready_endpoints"])]
    #[case::endpoints_object("ready_endpoints", Some(json!({"ready": 1})), &["ready_endpoints"])]
    // generation / observed_generation
    #[case::generation_missing("generation", None, &["generation"])]
    #[case::generation_null("generation", Some(json!(null)), &["generation"])]
    #[case::generation_zero("generation", Some(json!(0)), &["generation"])]
    #[case::generation_negative("generation", Some(json!(-3)), &["generation"])]
    #[case::generation_string("generation", Some(json!("3")), &["generation"])]
    #[case::generation_float("generation", Some(json!(3.0)), &["generation"])]
    #[case::generation_bool("generation", Some(json!(true)), &["generation"])]
    #[case::generation_ahead("generation", Some(json!(4)), &["generation", "observed_generation"])]
    #[case::observed_generation_missing("observed_generation", None, &["observed_generation"])]
    #[case::observed_generation_null("observed_generation", Some(json!(null)), &["observed_generation"])]
    #[case::observed_generation_string("observed_generation", Some(json!("3")), &["observed_generation"])]
    #[case::observed_generation_float("observed_generation", Some(json!(3.0)), &["observed_generation"])]
    #[case::observed_generation_bool("observed_generation", Some(json!(true)), &["observed_generation"])]
    #[case::observed_generation_behind("observed_generation", Some(json!(2)), &["generation", "observed_generation"])]
    #[case::observed_generation_ahead("observed_generation", Some(json!(4)), &["generation", "observed_generation"])]
    #[case::observed_generation_zero("observed_generation", Some(json!(0)), &["generation", "observed_generation"])]
    // HTTP
    #[case::code_missing("http_code", None, &["http_code"])]
    #[case::code_null("http_code", Some(json!(null)), &["http_code"])]
    #[case::code_string("http_code", Some(json!("200")), &["http_code"])]
    #[case::code_float("http_code", Some(json!(200.0)), &["http_code"])]
    #[case::code_bool("http_code", Some(json!(true)), &["http_code"])]
    #[case::code_503("http_code", Some(json!(503)), &["http_code"])]
    #[case::code_201("http_code", Some(json!(201)), &["http_code"])]
    #[case::code_zero("http_code", Some(json!(0)), &["http_code"])]
    #[case::body_missing("http_body", None, &["http_body"])]
    #[case::body_null("http_body", Some(json!(null)), &["http_body"])]
    #[case::body_trailing_newline("http_body", Some(json!(format!("{BODY}\n"))), &["http_body"])]
    #[case::body_leading_space("http_body", Some(json!(format!(" {BODY}"))), &["http_body"])]
    #[case::body_uppercase("http_body", Some(json!(BODY.to_uppercase())), &["http_body"])]
    #[case::body_other_version("http_body", Some(json!("labhub-cnpe-v2")), &["http_body"])]
    #[case::body_empty("http_body", Some(json!("")), &["http_body"])]
    #[case::body_int("http_body", Some(json!(1)), &["http_body"])]
    #[case::body_bool("http_body", Some(json!(true)), &["http_body"])]
    #[case::body_array("http_body", Some(json!([BODY])), &["http_body"])]
    fn gate_names_exactly_the_broken_field(
        #[case] field: &str,
        #[case] replacement: Option<Value>,
        #[case] expected: &[&str],
    ) {
        let mut state = valid();
        match replacement {
            Some(v) => state.insert(field.into(), v),
            None => state.remove(field),
        };
        let verdict = evaluate_value(&Value::Object(state), SHA, BODY);
        assert!(!verdict.approved, "{field} counterexample approved");
        assert_eq!(
            fields(&verdict),
            set(expected),
            "{:?}",
            verdict.report_lines()
        );
    }

    /// The counters must be integers as JSON writes them: `1e0` parses as a float.
    #[rstest]
    #[case::exponent("replicas", "1e0")]
    #[case::exponent_ready("ready", "1E0")]
    #[case::decimal("available", "1.0")]
    #[case::decimal_endpoints("ready_endpoints", "1.00")]
    #[case::code_exponent("http_code", "2e2")]
    #[case::generation_exponent("generation", "3e0")]
    fn gate_rejects_numbers_written_as_floats(#[case] field: &str, #[case] literal: &str) {
        let text = serde_json::to_string(&Value::Object(valid())).unwrap();
        let needle = format!("\"{field}\":");
        let start = text.find(&needle).unwrap() + needle.len();
        let end = start + text[start..].find([',', '}']).unwrap();
        let patched = format!("{}{}{}", &text[..start], literal, &text[end..]);
        let verdict = evaluate_bytes(patched.as_bytes(), SHA, BODY);
        assert!(!verdict.approved);
        assert!(
            fields(&verdict).contains(field),
            "{:?}",
            verdict.report_lines()
        );
    }

    /// A malformed EXPECTED_SHA argument is itself a violation, even if the state agrees with it.
    #[rstest]
    #[case::uppercase(SHA.to_uppercase())]
    #[case::short(SHA[..39].to_string())]
    #[case::long(format!("{SHA}0"))]
    #[case::abbreviated(SHA[..7].to_string())]
    #[case::empty(String::new())]
    #[case::branch("main".to_string())]
    fn gate_rejects_a_malformed_expected_sha(#[case] expected: String) {
        let mut state = valid();
        state.insert("target_revision".into(), json!(expected));
        state.insert("observed_revision".into(), json!(expected));
        let verdict = evaluate_value(&Value::Object(state), &expected, BODY);
        assert!(!verdict.approved);
        assert_eq!(fields(&verdict), set(&["EXPECTED_SHA"]));
    }

    #[rstest]
    #[case::other_sha(OTHER_SHA, BODY, &["target_revision", "observed_revision"])]
    #[case::body_with_newline(SHA, "labhub-cnpe-v1\n", &["http_body"])]
    #[case::other_body(SHA, "labhub-cnpe-v2", &["http_body"])]
    fn gate_compares_against_the_expectation(
        #[case] sha: &str,
        #[case] body: &str,
        #[case] expected: &[&str],
    ) {
        let verdict = evaluate_value(&Value::Object(valid()), sha, body);
        assert!(!verdict.approved);
        assert_eq!(fields(&verdict), set(expected));
    }

    #[rstest]
    #[case::empty(b"".to_vec(), "empty")]
    #[case::whitespace(b" \n\t ".to_vec(), "empty")]
    #[case::not_json(b"state: healthy".to_vec(), "not valid JSON")]
    #[case::not_utf8(b"{\"sync\": \"Sync\xffed\"}".to_vec(), "not UTF-8")]
    #[case::top_level_array(b"[1, 2]".to_vec(), "must be an object, found array")]
    #[case::top_level_string(b"\"Synced\"".to_vec(), "must be an object, found string")]
    #[case::top_level_null(b"null".to_vec(), "must be an object, found null")]
    #[case::top_level_number(b"1".to_vec(), "must be an object, found integer")]
    #[case::nan(b"{\"ready\": NaN}".to_vec(), "not valid JSON")]
    #[case::infinity(b"{\"ready\": Infinity}".to_vec(), "not valid JSON")]
    #[case::trailing_garbage(b"{\"ready\": 1} x".to_vec(), "not valid JSON")]
    #[case::two_objects(b"{} {}".to_vec(), "not valid JSON")]
    #[case::truncated(b"{\"ready\": 1".to_vec(), "not valid JSON")]
    #[case::duplicate_key(b"{\"ready\": 0, \"ready\": 1}".to_vec(), "duplicate key \"ready\"")]
    #[case::duplicate_key_via_escape(b"{\"ready\": 1, \"re\\u0061dy\": 0}".to_vec(), "duplicate key \"ready\"")]
    #[case::utf16(b"\xff\xfe{\x00}\x00".to_vec(), "not UTF-8")]
    #[case::bom(b"\xef\xbb\xbf{}".to_vec(), "not valid JSON")]
    #[case::deep_nesting(deep_nesting(100_000), "recursion limit")]
    fn gate_rejects_hostile_input_with_a_clear_message(
        #[case] bytes: Vec<u8>,
        #[case] message: &str,
    ) {
        let verdict = evaluate_bytes(&bytes, SHA, BODY);
        assert!(!verdict.approved);
        let err = verdict.input_error.clone().expect("an input error");
        assert!(err.contains(message), "{err:?} should contain {message:?}");
        assert!(verdict.evaluated.is_empty());
    }

    #[test]
    fn gate_rejects_duplicate_keys_even_when_the_last_value_is_right() {
        let mut text = serde_json::to_string(&Value::Object(valid())).unwrap();
        text.insert_str(1, "\"ready\": 0, ");
        let verdict = evaluate_bytes(text.as_bytes(), SHA, BODY);
        assert!(!verdict.approved);
        assert!(verdict
            .input_error
            .unwrap()
            .contains("duplicate key \"ready\""));
    }

    #[test]
    fn gate_rejects_oversized_input_without_reading_it_whole() {
        let mut bytes = b"{\"http_body\": \"".to_vec();
        bytes.resize(
            cnpe_lab::release_gate::strict_json::MAX_INPUT_BYTES + 1,
            b'a',
        );
        let verdict = evaluate_bytes(&bytes, SHA, BODY);
        assert!(verdict.input_error.unwrap().contains("larger than"));
    }

    fn deep_nesting(depth: usize) -> Vec<u8> {
        let mut v = b"{\"x\":".to_vec();
        v.extend(std::iter::repeat_n(b'[', depth));
        v.extend(std::iter::repeat_n(b']', depth));
        v.push(b'}');
        v
    }

    /// Every field wrong at once: the report must list all of them (snapshot).
    fn maximally_wrong() -> Value {
        json!({
            "target_revision": SHA.to_uppercase(),
            "observed_revision": null,
            "sync": "Synced ",
            "health": "Degraded",
            "replicas": true,
            "updated": "1",
            "available": 1.0,
            "ready": 0,
            "generation": -1,
            "observed_generation": "1",
            "http_code": 503,
            "http_body": "labhub-cnpe-v1\n",
            "progress_deadline_exceeded": true
        })
    }

    #[test]
    fn gate_report_of_a_maximally_wrong_state() {
        let verdict = evaluate_value(&maximally_wrong(), "3B18E512", BODY);
        assert!(!verdict.approved);
        let mut expected: Vec<&str> = vec!["EXPECTED_SHA"];
        expected.extend(REQUIRED_FIELDS);
        assert_eq!(verdict.failing_fields(), expected);
        crate::support::snapshot_settings().bind(|| {
            insta::assert_snapshot!(
                "gate_report_maximally_wrong",
                verdict.report_lines().join("\n")
            )
        });
    }

    // ---- the command, as a process ----

    mod command {
        use super::*;
        use std::path::Path;
        use std::process::{Command, Output};

        fn run(args: &[&std::ffi::OsStr]) -> Output {
            Command::new(env!("CARGO_BIN_EXE_release-gate"))
                .args(args)
                .output()
                .unwrap()
        }

        fn run_on(path: &Path, sha: &str, body: &str, json: bool) -> Output {
            let mut args: Vec<&std::ffi::OsStr> = Vec::new();
            if json {
                args.push("--json".as_ref());
            }
            args.extend([path.as_os_str(), sha.as_ref(), body.as_ref()]);
            run(&args)
        }

        fn write_state(dir: &Path, value: &Value) -> std::path::PathBuf {
            let p = dir.join("recovered.json");
            std::fs::write(&p, serde_json::to_vec_pretty(value).unwrap()).unwrap();
            p
        }

        fn fingerprint(p: &Path) -> (Vec<u8>, std::time::SystemTime, u64) {
            let meta = std::fs::metadata(p).unwrap();
            (
                std::fs::read(p).unwrap(),
                meta.modified().unwrap(),
                meta.len(),
            )
        }

        #[test]
        fn gate_command_approves_with_exit_0_and_leaves_the_file_untouched() {
            let dir = tempfile::tempdir().unwrap();
            let p = write_state(dir.path(), &Value::Object(valid()));
            let before = fingerprint(&p);
            let out = run_on(&p, SHA, BODY, false);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.stdout.is_empty());
            assert_eq!(fingerprint(&p), before);
            assert_eq!(
                std::fs::read_dir(dir.path()).unwrap().count(),
                1,
                "no stray files"
            );
        }

        #[test]
        fn gate_command_rejects_with_exit_1_one_line_per_violation() {
            let dir = tempfile::tempdir().unwrap();
            let p = write_state(dir.path(), &maximally_wrong());
            let before = fingerprint(&p);
            let out = run_on(&p, SHA, BODY, false);
            assert_eq!(out.status.code(), Some(1));
            let stderr = String::from_utf8(out.stderr).unwrap();
            for field in REQUIRED_FIELDS {
                assert!(
                    stderr
                        .lines()
                        .any(|l| l.starts_with(&format!("release-gate: REJECTED {field}:"))),
                    "{field} not named in:\n{stderr}"
                );
            }
            assert_eq!(fingerprint(&p), before);
        }

        #[test]
        fn gate_command_json_verdict() {
            let dir = tempfile::tempdir().unwrap();
            let mut state = valid();
            state.insert("ready".into(), json!(true));
            state.insert("http_code".into(), json!("200"));
            let p = write_state(dir.path(), &Value::Object(state));
            let out = run_on(&p, SHA, BODY, true);
            assert_eq!(out.status.code(), Some(1));
            let verdict: Value = serde_json::from_slice(&out.stdout).unwrap();
            crate::support::snapshot_settings()
                .bind(|| insta::assert_json_snapshot!("gate_command_json_verdict", verdict));
        }

        #[test]
        fn gate_command_usage_errors_exit_2() {
            let dir = tempfile::tempdir().unwrap();
            let p = write_state(dir.path(), &Value::Object(valid()));
            assert_eq!(run(&[]).status.code(), Some(2));
            assert_eq!(run(&[p.as_os_str(), SHA.as_ref()]).status.code(), Some(2));
            let four = [p.as_os_str(), SHA.as_ref(), BODY.as_ref(), "extra".as_ref()];
            assert_eq!(run(&four).status.code(), Some(2));
        }

        /// `-h` / `--help` / `--version` where an argument was meant must never exit 0.
        #[test]
        fn gate_command_help_and_version_never_exit_0() {
            let dir = tempfile::tempdir().unwrap();
            let p = write_state(dir.path(), &Value::Object(valid()));
            for flag in ["-h", "--help", "-V", "--version"] {
                let args = [p.as_os_str(), SHA.as_ref(), flag.as_ref()];
                assert_eq!(run(&args).status.code(), Some(2), "{flag} as the body");
                assert_eq!(run(&[flag.as_ref()]).status.code(), Some(2), "{flag} alone");
            }
        }

        #[test]
        fn gate_command_unreadable_files_exit_2_naming_the_file() {
            let dir = tempfile::tempdir().unwrap();
            let missing = dir.path().join("nope.json");
            let out = run_on(&missing, SHA, BODY, false);
            assert_eq!(out.status.code(), Some(2));
            assert!(String::from_utf8_lossy(&out.stderr).contains("nope.json"));
            let out = run_on(dir.path(), SHA, BODY, false);
            assert_eq!(
                out.status.code(),
                Some(2),
                "a directory is not readable as a file"
            );
        }

        #[test]
        fn gate_command_rejects_hostile_files_with_exit_1() {
            let dir = tempfile::tempdir().unwrap();
            for (name, bytes) in [
                ("empty.json", b"".to_vec()),
                ("array.json", b"[]".to_vec()),
                ("garbage.json", b"{} trailing".to_vec()),
                (
                    "dup.json",
                    b"{\"sync\":\"Synced\",\"sync\":\"Synced\"}".to_vec(),
                ),
                ("deep.json", deep_nesting(100_000)),
            ] {
                let p = dir.path().join(name);
                std::fs::write(&p, &bytes).unwrap();
                let out = run_on(&p, SHA, BODY, false);
                assert_eq!(out.status.code(), Some(1), "{name}");
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("REJECTED input:"),
                    "{name}"
                );
                assert_eq!(std::fs::read(&p).unwrap(), bytes, "{name} modified");
            }
        }

        #[test]
        fn gate_command_reads_a_fifo_with_a_writer_and_refuses_one_without() {
            let dir = tempfile::tempdir().unwrap();
            let fifo = dir.path().join("state.fifo");
            let ok = Command::new("mkfifo").arg(&fifo).status().unwrap();
            assert!(ok.success());
            let bytes = serde_json::to_vec(&Value::Object(valid())).unwrap();
            let writer = {
                let fifo = fifo.clone();
                std::thread::spawn(move || std::fs::write(fifo, bytes))
            };
            let out = run_on(&fifo, SHA, BODY, false);
            writer.join().unwrap().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // Nobody writes now: a clear error after a bounded wait, never a hang.
            let out = run_on(&fifo, SHA, BODY, false);
            assert_eq!(out.status.code(), Some(2));
            assert!(String::from_utf8_lossy(&out.stderr).contains("no data within"));
        }

        #[test]
        fn gate_command_rejects_a_100_mb_file() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("huge.json");
            let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
            use std::io::Write;
            f.write_all(b"{\"http_body\": \"").unwrap();
            let chunk = vec![b'a'; 1 << 20];
            for _ in 0..100 {
                f.write_all(&chunk).unwrap();
            }
            f.write_all(b"\"}").unwrap();
            drop(f);
            let out = run_on(&p, SHA, BODY, false);
            assert_eq!(out.status.code(), Some(1));
            assert!(String::from_utf8_lossy(&out.stderr).contains("larger than"));
        }
    }

    // ---- property tests ----

    fn json_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            prop_oneof![Just(1.0f64), Just(200.0), Just(3.0)].prop_map(|f| json!(f)),
            ".{0,20}".prop_map(Value::String),
            prop_oneof![
                Just("1"),
                Just("200"),
                Just("Synced"),
                Just("Healthy"),
                Just(SHA),
                Just(BODY)
            ]
            .prop_map(|s| Value::String(s.into())),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        json_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The JSON type the contract wants for a field.
    fn wants_integer(field: &str) -> bool {
        COUNTERS.contains(&field)
            || matches!(field, "generation" | "observed_generation" | "http_code")
    }

    fn same_type(field: &str, v: &Value) -> bool {
        let is_int = matches!(v, Value::Number(n) if n.is_i64() || n.is_u64());
        if wants_integer(field) {
            is_int
        } else {
            v.is_string()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

        #[test]
        fn gate_prop_wrong_type_is_rejected_and_named(
            field in prop::sample::select(REQUIRED_FIELDS.to_vec()),
            value in json_value(),
        ) {
            prop_assume!(!same_type(field, &value));
            let mut state = valid();
            state.insert(field.into(), value);
            let verdict = evaluate_value(&Value::Object(state), SHA, BODY);
            prop_assert!(!verdict.approved);
            prop_assert!(verdict.failing_fields().contains(&field), "{:?}", verdict.report_lines());
        }

        #[test]
        fn gate_prop_deleted_fields_are_each_named(
            deleted in prop::sample::subsequence(REQUIRED_FIELDS.to_vec(), 1..=REQUIRED_FIELDS.len()),
        ) {
            let mut state = valid();
            for f in &deleted {
                state.remove(*f);
            }
            let verdict = evaluate_value(&Value::Object(state), SHA, BODY);
            prop_assert!(!verdict.approved);
            let named = verdict.failing_fields();
            for f in &deleted {
                prop_assert!(named.contains(f), "{f} not named: {:?}", named);
            }
        }

        #[test]
        fn gate_prop_extra_fields_never_change_approval(
            extras in prop::collection::btree_map("[a-z_]{1,24}", json_value(), 1..8),
        ) {
            let mut state = valid();
            for (k, v) in extras {
                if !REQUIRED_FIELDS.contains(&k.as_str()) {
                    state.insert(k, v);
                }
            }
            let verdict = evaluate_value(&Value::Object(state), SHA, BODY);
            prop_assert!(verdict.approved, "{:?}", verdict.report_lines());
        }

        #[test]
        fn gate_prop_arbitrary_bytes_never_panic_and_never_approve(
            bytes in prop::collection::vec(any::<u8>(), 0..512),
        ) {
            let verdict = evaluate_bytes(&bytes, SHA, BODY);
            prop_assert!(!verdict.approved);
        }

        #[test]
        fn gate_prop_arbitrary_objects_approve_only_if_every_rule_holds(
            obj in prop::collection::btree_map(
                prop::sample::select(REQUIRED_FIELDS.to_vec()).prop_map(String::from), json_leaf(), 0..14),
        ) {
            let mut state = valid();
            for (k, v) in obj {
                state.insert(k, v);
            }
            let verdict = evaluate_value(&Value::Object(state.clone()), SHA, BODY);
            // Independent restatement of the contract.
            let int = |f: &str| state.get(f).and_then(|v| if v.is_i64() || v.is_u64() { v.as_i64() } else { None });
            let holds = state.get("target_revision") == Some(&json!(SHA))
                && state.get("observed_revision") == Some(&json!(SHA))
                && state.get("sync") == Some(&json!("Synced"))
                && state.get("health") == Some(&json!("Healthy"))
                && COUNTERS.iter().all(|c| int(c) == Some(1))
                && int("generation").is_some_and(|g| g > 0)
                && int("generation") == int("observed_generation")
                && int("http_code") == Some(200)
                && state.get("http_body") == Some(&json!(BODY));
            prop_assert_eq!(verdict.approved, holds, "{:?}", verdict.report_lines());
        }
    }
}
