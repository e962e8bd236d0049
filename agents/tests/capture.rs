//! Session-id and token-usage capture against recorded provider transcripts: every fixture, every
//! cut the capture cap can make, and the hostile or broken outputs an agent can print.

use roundtable_agents::capture::{Capture, NotCaptured, capture};
use roundtable_specs::adapter::Provider;
use roundtable_specs::session::TokenUsage;

macro_rules! fixture {
    ($path:literal) => {
        (concat!("providers/", $path), include_bytes!(concat!("fixtures/providers/", $path)).as_slice())
    };
}

/// One recorded transcript and what it must yield.
struct Case {
    provider: Provider,
    name: &'static str,
    stdout: &'static [u8],
    id: &'static str,
    usage: Option<TokenUsage>,
    /// A JSON-lines stream (as opposed to one JSON document).
    lines: bool,
}

fn usage(input: u64, output: u64, cached: Option<u64>, reasoning: Option<u64>) -> Option<TokenUsage> {
    Some(TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        reasoning_tokens: reasoning,
    })
}

fn case(
    provider: Provider,
    (name, stdout): (&'static str, &'static [u8]),
    id: &'static str,
    usage: Option<TokenUsage>,
) -> Case {
    Case { provider, name, stdout, id, usage, lines: name.ends_with(".jsonl") }
}

const CODEX_NEW: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";
const CLAUDE: &str = "22795ca6-8222-4620-91dd-3001deaf3378";
const GEMINI: &str = "3f9c2b1e-8d4a-4c6b-9e2f-0a1b2c3d4e5f";
const OPENCODE: &str = "ses_f86f2df67ffep5CKpMOXIyR44R";

fn cases() -> Vec<Case> {
    use Provider::{Claude, Codex, Gemini, Opencode};
    vec![
        // One turn each: its usage as printed.
        case(Codex, fixture!("codex/exec-new-mcp.jsonl"), CODEX_NEW, usage(24763, 122, Some(24448), None)),
        case(Codex, fixture!("codex/exec-resume.jsonl"), CODEX_NEW, usage(31020, 41, Some(30848), None)),
        case(
            Codex,
            fixture!("codex/exec-mcp-cancelled.jsonl"),
            "0199b6d0-5a1e-7c33-9e2f-6a0d7e1c4b90",
            usage(9120, 57, Some(0), None),
        ),
        // The turn failed: no `turn.completed`, no usage.
        case(Codex, fixture!("codex/exec-failed.jsonl"), "0199c001-0d4f-7a10-b3a2-41f5c2d9e7aa", None),
        // input 18 + cache creation 14760 = 14778; cache reads 16981 are the cached input.
        case(Claude, fixture!("claude/stream-json.jsonl"), CLAUDE, usage(14778, 257, Some(16981), None)),
        case(
            Claude,
            fixture!("claude/stream-json-error.jsonl"),
            "00000000-0000-4000-8000-0000000000aa",
            usage(0, 0, Some(0), None),
        ),
        case(Claude, fixture!("claude/print-json-result.json"), CLAUDE, usage(14778, 257, Some(16981), None)),
        // The array's result: input 3 + cache creation 0.
        case(
            Claude,
            fixture!("claude/print-json-verbose-array.json"),
            "efd4dc89-2c85-4b2f-8efb-e9ced52ba6fd",
            usage(3, 2, Some(0), None),
        ),
        // The result's stats: input_tokens 8421, output_tokens 57, cached 400.
        case(Gemini, fixture!("gemini/stream-json.jsonl"), GEMINI, usage(8421, 57, Some(400), None)),
        case(
            Gemini,
            fixture!("gemini/stream-json-error.jsonl"),
            "7d1e0c44-2b6a-4f0e-8a51-9c3b2a1d0e9f",
            usage(0, 0, Some(0), None),
        ),
        // One model: prompt 8421, candidates 57, cached 400, thoughts 124.
        case(Gemini, fixture!("gemini/json-output.json"), GEMINI, usage(8421, 57, Some(400), Some(124))),
        case(Gemini, fixture!("gemini/json-error.json"), GEMINI, None),
        // Two steps: input 9429 + 9520 (+ cache writes 0 + 0), output 27 + 163, cache reads 0 + 9400,
        // reasoning 29 + 29.
        case(Opencode, fixture!("opencode/run-json.jsonl"), OPENCODE, usage(18949, 190, Some(9400), Some(58))),
        case(Opencode, fixture!("opencode/run-json-error.jsonl"), OPENCODE, None),
        case(Opencode, fixture!("opencode/run-json-denied-tool.jsonl"), OPENCODE, None),
    ]
}

fn id_of(capture: &Capture) -> Option<&str> {
    capture.session_id.as_ref().ok().map(|id| id.as_str())
}

fn text(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout).into_owned()
}

/// Byte offset of the end of the line (newline included) holding the first occurrence of `id`.
fn end_of_id_line(stdout: &[u8], id: &str) -> usize {
    let text = text(stdout);
    let at = text.find(id).expect("the fixture holds its id");
    text[at..].find('\n').map(|newline| at + newline + 1).expect("the id line ends with a newline")
}

// === every fixture ===

#[test]
fn every_fixture_yields_its_session_id_and_usage() {
    for case in cases() {
        let got = capture(case.provider, case.stdout, false);
        assert_eq!(id_of(&got), Some(case.id), "{}: {:?}", case.name, got.session_id);
        assert_eq!(got.usage, case.usage, "{}", case.name);
    }
}

#[test]
fn every_fixture_file_has_a_case() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/providers");
    let mut on_disk = Vec::new();
    for provider in std::fs::read_dir(root).expect("fixtures folder") {
        let provider = provider.expect("entry");
        if !provider.path().is_dir() {
            continue;
        }
        for file in std::fs::read_dir(provider.path()).expect("provider folder") {
            let file = file.expect("entry");
            on_disk.push(format!(
                "providers/{}/{}",
                provider.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            ));
        }
    }
    on_disk.sort();
    let mut covered: Vec<String> = cases().iter().map(|case| case.name.to_owned()).collect();
    covered.sort();
    assert_eq!(on_disk, covered);
}

#[test]
fn a_final_line_without_its_newline_is_read_when_nothing_was_cut() {
    for case in cases() {
        let Some(stdout) = case.stdout.strip_suffix(b"\n") else { panic!("{} ends with a newline", case.name) };
        let got = capture(case.provider, stdout, false);
        assert_eq!(id_of(&got), Some(case.id), "{}", case.name);
        assert_eq!(got.usage, case.usage, "{}", case.name);
    }
}

#[test]
fn an_uncut_output_flagged_truncated_still_yields_everything() {
    // The cap can stop exactly at a newline: every line is then whole.
    for case in cases() {
        let got = capture(case.provider, case.stdout, true);
        assert_eq!(id_of(&got), Some(case.id), "{}", case.name);
        assert_eq!(got.usage, case.usage, "{}", case.name);
    }
}

// === truncation ===

#[test]
fn a_cut_through_the_id_line_never_yields_an_id() {
    for case in cases().iter().filter(|case| case.lines) {
        for cut in 0..end_of_id_line(case.stdout, case.id) {
            let got = capture(case.provider, &case.stdout[..cut], true);
            let expected =
                if text(&case.stdout[..cut]).trim().is_empty() { NotCaptured::Empty } else { NotCaptured::Truncated };
            assert_eq!(got.session_id, Err(expected), "{} cut at {cut}", case.name);
        }
    }
}

#[test]
fn a_cut_in_the_middle_of_the_id_itself_is_reported_as_truncated() {
    for case in cases().iter().filter(|case| case.lines) {
        let at = text(case.stdout).find(case.id).expect("the fixture holds its id");
        let stdout = &case.stdout[..at + case.id.len() / 2];
        let got = capture(case.provider, stdout, true);
        assert_eq!(got.session_id, Err(NotCaptured::Truncated), "{}", case.name);
        assert!(got.session_id.clone().err().is_some_and(|why| why.to_string().contains("cut")), "{}", case.name);
        // Unflagged, the same fragment is a line that is not JSON (Claude and Gemini read an
        // unparseable object as a broken document): still no id.
        let got = capture(case.provider, stdout, false);
        assert!(
            matches!(got.session_id, Err(NotCaptured::NotJson | NotCaptured::Malformed { .. })),
            "{}: {:?}",
            case.name,
            got.session_id
        );
    }
}

#[test]
fn a_cut_after_the_id_line_keeps_the_id() {
    for case in cases().iter().filter(|case| case.lines) {
        for cut in end_of_id_line(case.stdout, case.id)..=case.stdout.len() {
            let got = capture(case.provider, &case.stdout[..cut], true);
            assert_eq!(id_of(&got), Some(case.id), "{} cut at {cut}: {:?}", case.name, got.session_id);
        }
    }
}

#[test]
fn a_cut_single_document_never_yields_an_id_and_says_it_was_cut() {
    for case in cases().iter().filter(|case| !case.lines) {
        // Stop short of the final `}`: without only its newline, a document is whole.
        for cut in 1..case.stdout.len() - 1 {
            let stdout = &case.stdout[..cut];
            let got = capture(case.provider, stdout, true);
            let expected = if text(stdout).trim().is_empty() { NotCaptured::Empty } else { NotCaptured::Truncated };
            assert_eq!(got.session_id, Err(expected), "{} cut at {cut}", case.name);
            assert_eq!(got.usage, None, "{} cut at {cut}", case.name);
        }
    }
}

#[test]
fn gemini_json_cut_without_the_flag_is_malformed() {
    let (_, stdout) = fixture!("gemini/json-output.json");
    let got = capture(Provider::Gemini, &stdout[..stdout.len() / 2], false);
    assert!(matches!(got.session_id, Err(NotCaptured::Malformed { .. })), "{:?}", got.session_id);
    assert!(got.session_id.err().is_some_and(|why| why.to_string().contains("does not parse")));
}

// === hostile and broken outputs ===

#[test]
fn diagnostics_and_garbage_between_events_are_skipped() {
    let noise: &[&[u8]] = &[
        b"",
        b"   \t",
        b"WARN: could not read config, using defaults",
        b"{not json",
        b"[1, 2, 3]",
        b"\"a string\"",
        b"\xff\xfe\x00binary\x80",
        b"}",
    ];
    for case in cases().iter().filter(|case| case.lines) {
        let mut stdout = Vec::new();
        for (index, line) in case.stdout.split_inclusive(|&byte| byte == b'\n').enumerate() {
            stdout.extend_from_slice(noise[index % noise.len()]);
            stdout.push(b'\n');
            stdout.extend_from_slice(line);
        }
        stdout.extend_from_slice(b"process exited\n");
        let got = capture(case.provider, &stdout, false);
        assert_eq!(id_of(&got), Some(case.id), "{}", case.name);
        assert_eq!(got.usage, case.usage, "{}", case.name);
    }
}

#[test]
fn carriage_returns_are_tolerated() {
    for case in cases().iter().filter(|case| case.lines) {
        let stdout = text(case.stdout).replace('\n', "\r\n");
        let got = capture(case.provider, stdout.as_bytes(), false);
        assert_eq!(id_of(&got), Some(case.id), "{}", case.name);
    }
}

#[test]
fn an_id_with_shell_syntax_is_refused_whole() {
    let hostile = "abc; rm -rf /";
    let outputs: &[(Provider, String)] = &[
        (Provider::Codex, format!("{{\"type\":\"thread.started\",\"thread_id\":\"{hostile}\"}}\n")),
        (Provider::Claude, format!("{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"{hostile}\"}}\n")),
        (Provider::Claude, format!("{{\"type\":\"result\",\"session_id\":\"{hostile}\"}}")),
        (Provider::Gemini, format!("{{\"type\":\"init\",\"session_id\":\"{hostile}\"}}\n")),
        (Provider::Gemini, format!("{{\n  \"session_id\": \"{hostile}\"\n}}\n")),
        (Provider::Opencode, format!("{{\"type\":\"text\",\"sessionID\":\"{hostile}\"}}\n")),
        (Provider::Mock, format!("{{\"type\":\"init\",\"session_id\":\"{hostile}\"}}\n")),
    ];
    for (provider, stdout) in outputs {
        let got = capture(*provider, stdout.as_bytes(), false);
        assert_eq!(got.session_id, Err(NotCaptured::InvalidId { value: hostile.to_owned() }), "{provider}: {stdout}");
    }
}

#[test]
fn other_unsafe_ids_are_refused() {
    let refused: &[&str] = &[
        "\"\"",
        "\"$(id)\"",
        "\"a b\"",
        "\"../../etc/passwd\"",
        "\"--help=x\\n\"",
        "42",
        "{\"id\":\"x\"}",
        "[\"x\"]",
        "true",
    ];
    for value in refused {
        let stdout = format!("{{\"type\":\"thread.started\",\"thread_id\":{value}}}\n");
        let got = capture(Provider::Codex, stdout.as_bytes(), false);
        assert!(matches!(got.session_id, Err(NotCaptured::InvalidId { .. })), "{value}: {:?}", got.session_id);
    }
    let too_long = format!("{{\"type\":\"thread.started\",\"thread_id\":\"{}\"}}\n", "a".repeat(129));
    assert!(matches!(
        capture(Provider::Codex, too_long.as_bytes(), false).session_id,
        Err(NotCaptured::InvalidId { .. })
    ));
    let longest = format!("{{\"type\":\"thread.started\",\"thread_id\":\"{}\"}}\n", "a".repeat(128));
    assert!(capture(Provider::Codex, longest.as_bytes(), false).session_id.is_ok());
}

#[test]
fn invalid_utf8_inside_an_id_is_refused() {
    let stdout = b"{\"type\":\"thread.started\",\"thread_id\":\"0199\xffabc\"}\n";
    let got = capture(Provider::Codex, stdout, false);
    assert_eq!(got.session_id, Err(NotCaptured::InvalidId { value: "0199\u{fffd}abc".to_owned() }));
}

#[test]
fn empty_output_is_empty_for_every_provider_that_captures() {
    for provider in Provider::ALL.iter().copied().filter(|provider| *provider != Provider::Generic) {
        for stdout in [&b""[..], b"\n", b"  \n\t\r\n"] {
            for truncated in [false, true] {
                let got = capture(provider, stdout, truncated);
                assert_eq!(got, Capture { session_id: Err(NotCaptured::Empty), usage: None }, "{provider} {stdout:?}");
            }
        }
    }
}

#[test]
fn output_without_json_says_so() {
    let stdout = b"Error: not logged in. Run `codex login` first.\n";
    for provider in Provider::ALL.iter().copied().filter(|provider| *provider != Provider::Generic) {
        let got = capture(provider, stdout, false);
        assert_eq!(got.session_id, Err(NotCaptured::NotJson), "{provider}");
    }
}

#[test]
fn generic_is_unsupported_whatever_it_prints() {
    let (_, stdout) = fixture!("codex/exec-new-mcp.jsonl");
    for stdout in [&b""[..], stdout] {
        let got = capture(Provider::Generic, stdout, false);
        assert_eq!(got, Capture { session_id: Err(NotCaptured::Unsupported(Provider::Generic)), usage: None });
        assert!(got.session_id.err().is_some_and(|why| why.to_string().contains("generic")));
    }
}

#[test]
fn codex_without_thread_started_has_no_id_but_keeps_its_usage() {
    let (_, stdout) = fixture!("codex/exec-new-mcp.jsonl");
    let without_start: String =
        text(stdout).lines().filter(|line| !line.contains("thread.started")).map(|line| format!("{line}\n")).collect();
    let got = capture(Provider::Codex, without_start.as_bytes(), false);
    assert!(matches!(got.session_id, Err(NotCaptured::NoSessionId { .. })), "{:?}", got.session_id);
    assert!(got.session_id.err().is_some_and(|why| why.to_string().contains("thread.started")));
    assert_eq!(got.usage, usage(24763, 122, Some(24448), None));
}

#[test]
fn codex_ignores_ids_that_are_not_on_thread_started() {
    let stdout = b"{\"type\":\"turn.started\",\"thread_id\":\"not-this\"}\n{\"type\":\"thread.started\",\"thread_id\":\"this-one\"}\n{\"type\":\"thread.started\",\"thread_id\":\"nor-this\"}\n";
    assert_eq!(id_of(&capture(Provider::Codex, stdout, false)), Some("this-one"));
}

#[test]
fn codex_sums_usage_over_turns() {
    let stdout = concat!(
        "{\"type\":\"thread.started\",\"thread_id\":\"t-1\"}\n",
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}\n",
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":200,\"output_tokens\":9,\"reasoning_output_tokens\":5}}\n",
    );
    let got = capture(Provider::Codex, stdout.as_bytes(), false);
    assert_eq!(got.usage, usage(300, 16, Some(40), Some(5)));
}

fn with_result_id(stdout: &[u8], id: &str) -> String {
    text(stdout)
        .lines()
        .map(|line| if line.contains("\"type\":\"result\"") { line.replace(CLAUDE, id) } else { line.to_owned() })
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn claude_stream_with_a_different_result_id_captures_nothing() {
    let (_, stdout) = fixture!("claude/stream-json.jsonl");
    let got = capture(Provider::Claude, with_result_id(stdout, "other-session").as_bytes(), false);
    assert_eq!(
        got.session_id,
        Err(NotCaptured::Inconsistent { first: CLAUDE.to_owned(), result: "other-session".to_owned() })
    );
    assert!(got.session_id.err().is_some_and(|why| why.to_string().contains("other-session")));
}

#[test]
fn claude_array_with_a_different_result_id_captures_nothing() {
    let (_, stdout) = fixture!("claude/print-json-verbose-array.json");
    // The array sits on one line, so only its result element is rewritten by hand.
    let stdout = text(stdout).replacen(
        "\"session_id\":\"efd4dc89-2c85-4b2f-8efb-e9ced52ba6fd\",\"total_cost_usd\"",
        "\"session_id\":\"other-session\",\"total_cost_usd\"",
        1,
    );
    let got = capture(Provider::Claude, stdout.as_bytes(), false);
    assert_eq!(
        got.session_id,
        Err(NotCaptured::Inconsistent {
            first: "efd4dc89-2c85-4b2f-8efb-e9ced52ba6fd".to_owned(),
            result: "other-session".to_owned()
        })
    );
}

#[test]
fn claude_pretty_printed_array_is_one_document() {
    let (_, stdout) = fixture!("claude/print-json-verbose-array.json");
    let value: serde_json::Value = serde_json::from_slice(stdout).expect("fixture is JSON");
    let pretty = serde_json::to_string_pretty(&value).expect("serialises");
    let got = capture(Provider::Claude, pretty.as_bytes(), false);
    assert_eq!(id_of(&got), Some("efd4dc89-2c85-4b2f-8efb-e9ced52ba6fd"));
    assert_eq!(got.usage, usage(3, 2, Some(0), None));
}

#[test]
fn claude_without_a_result_keeps_the_first_id() {
    let (_, stdout) = fixture!("claude/stream-json.jsonl");
    let without_result: String = text(stdout)
        .lines()
        .filter(|line| !line.contains("\"type\":\"result\""))
        .map(|line| format!("{line}\n"))
        .collect();
    let got = capture(Provider::Claude, without_result.as_bytes(), false);
    assert_eq!(id_of(&got), Some(CLAUDE));
    assert_eq!(got.usage, None);
}

#[test]
fn gemini_stream_reads_the_id_only_from_init() {
    let stdout = b"{\"type\":\"message\",\"session_id\":\"not-this\"}\n{\"type\":\"result\",\"status\":\"error\",\"session_id\":\"nor-this\"}\n";
    let got = capture(Provider::Gemini, stdout, false);
    assert!(matches!(got.session_id, Err(NotCaptured::NoSessionId { .. })), "{:?}", got.session_id);
}

#[test]
fn gemini_document_sums_tokens_over_models() {
    let stdout = r#"{
  "session_id": "g-2",
  "stats": {
    "models": {
      "gemini-2.5-pro": { "tokens": { "prompt": 100, "candidates": 10, "cached": 30, "thoughts": 4 } },
      "gemini-2.5-flash": { "tokens": { "prompt": 50, "candidates": 5, "cached": 0, "thoughts": 1 } }
    }
  }
}
"#;
    let got = capture(Provider::Gemini, stdout.as_bytes(), false);
    assert_eq!(id_of(&got), Some("g-2"));
    assert_eq!(got.usage, usage(150, 15, Some(30), Some(5)));
}

#[test]
fn opencode_falls_back_to_the_part_session_id() {
    let stdout = b"{\"type\":\"text\",\"part\":{\"sessionID\":\"ses_part\"}}\n";
    assert_eq!(id_of(&capture(Provider::Opencode, stdout, false)), Some("ses_part"));
}

#[test]
fn opencode_counts_cache_writes_as_input() {
    let stdout = b"{\"type\":\"step_finish\",\"sessionID\":\"ses_1\",\"part\":{\"tokens\":{\"input\":10,\"output\":2,\"reasoning\":1,\"cache\":{\"read\":5,\"write\":7}}}}\n";
    assert_eq!(capture(Provider::Opencode, stdout, false).usage, usage(17, 2, Some(5), Some(1)));
}

#[test]
fn mock_with_a_different_result_id_captures_nothing() {
    let stdout = b"{\"type\":\"init\",\"session_id\":\"mock-a\"}\n{\"type\":\"result\",\"session_id\":\"mock-b\"}\n";
    let got = capture(Provider::Mock, stdout, false);
    assert_eq!(
        got.session_id,
        Err(NotCaptured::Inconsistent { first: "mock-a".to_owned(), result: "mock-b".to_owned() })
    );
}
