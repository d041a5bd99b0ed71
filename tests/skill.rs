//! `memprints skill`: the agent skill that calls memprints. Its front matter is a valid skill's
//! (PithTrain's name, description and trigger phrases); every `memprints …` line it names parses
//! with the real clap definitions; its commands, run in order on the fixture tree, go add →
//! status → remove back to the original bytes; `--write` never clobbers a file memprints did
//! not write.

mod codemod;

use clap::Parser;
use codemod::{Tree, memprints};
use memprints::cli::Cli;
use memprints::cli::skill::{MARKER, SKILL, SKILL_PATH};
use yaml_rust2::{Yaml, YamlLoader};

/// What the skill's placeholders stand for on the fixture tree.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("<model>", "tiny-moe"),
    ("<ranks>", "0,1"),
    ("<layers>", "0,3"),
    ("<variant>", "tiny"),
    ("<pp>", "2"),
    ("<ep>", "1"),
    ("<rank>", "0"),
    ("<log-file>", "node0.log"),
];

/// The front matter (between the first two `---` lines) and the body.
fn front_matter(text: &str) -> (&str, &str) {
    let rest = text
        .strip_prefix("---\n")
        .expect("a skill starts with a `---` line");
    let end = rest
        .find("\n---\n")
        .expect("the front matter ends with a `---` line");
    (&rest[..end + 1], &rest[end + 5..])
}

#[test]
fn the_front_matter_is_a_valid_skill_with_pithtrains_name_and_triggers() {
    let (yaml, body) = front_matter(SKILL);
    let docs = YamlLoader::load_from_str(yaml).expect("valid YAML");
    assert_eq!(docs.len(), 1);
    let Yaml::Hash(map) = &docs[0] else {
        panic!("the front matter is a mapping")
    };
    let keys: Vec<&str> = map.keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["name", "description", "argument-hint"]);
    let doc = &docs[0];
    assert_eq!(doc["name"].as_str(), Some("add-memory-prints"));
    let description = doc["description"].as_str().unwrap();
    assert!(
        description
            .starts_with("Add detailed memory profiling prints throughout the training framework.")
    );
    for trigger in [
        "\"add memory prints\"",
        "\"instrument memory\"",
        "\"profile memory\"",
        "\"memory breakdown\"",
        "\"debug memory\"",
    ] {
        assert!(description.contains(trigger), "{trigger}");
    }
    assert_eq!(
        doc["argument-hint"].as_str(),
        Some("<model-name> [--ranks <rank-list>] [--detail-layers <layer-indices>]")
    );
    assert!(
        body.lines().next().unwrap().starts_with(MARKER),
        "the marker line follows the front matter"
    );
    assert!(body.len() < 8_000, "a page, not 600 lines");
}

/// Every `memprints …` command the skill names: lines of its code blocks and inline code spans.
fn commands(text: &str) -> Vec<(bool, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            if let Some(command) = trimmed.strip_prefix("memprints ") {
                found.push((true, command.to_string()));
            }
            continue;
        }
        for (i, span) in trimmed.split('`').enumerate() {
            if i % 2 == 1
                && let Some(command) = span.strip_prefix("memprints ")
            {
                found.push((false, command.to_string()));
            }
        }
    }
    found
}

fn fill(command: &str) -> Vec<String> {
    let mut filled = command.to_string();
    for (placeholder, value) in PLACEHOLDERS {
        filled = filled.replace(placeholder, value);
    }
    assert!(
        !filled.contains('<'),
        "a placeholder this test does not know: {command}"
    );
    shlex::split(&filled).unwrap()
}

#[test]
fn every_memprints_command_the_skill_names_parses_with_the_real_definitions() {
    let commands = commands(SKILL);
    let names: std::collections::BTreeSet<String> = commands
        .iter()
        .map(|(_, c)| c.split(' ').next().unwrap().to_string())
        .collect();
    for name in [
        "status", "plan", "add", "report", "snapshot", "remove", "check",
    ] {
        assert!(
            names.contains(name),
            "the skill never runs `memprints {name}`"
        );
    }
    for (_, command) in &commands {
        let args = fill(command);
        Cli::try_parse_from(std::iter::once("memprints".to_string()).chain(args))
            .unwrap_or_else(|e| panic!("`memprints {command}` does not parse: {e}"));
    }
    assert!(SKILL.contains("memprints status --json"));
    assert!(SKILL.contains("--json"), "the agent reads JSON");
}

#[test]
fn the_skills_commands_run_in_order_go_add_status_remove_back_to_the_bytes() {
    let tree = Tree::new();
    let original = tree.snapshot();
    let mut ran = Vec::new();
    for (in_block, command) in commands(SKILL) {
        let args = fill(&command);
        // `report` and `snapshot` read a training run's output; there is none here.
        if !in_block || args[0] == "report" || args[0] == "snapshot" {
            continue;
        }
        let out = memprints()
            .current_dir(tree.path())
            .args(&args)
            .output()
            .unwrap();
        let code = out.status.code();
        // `status` on the clean tree before add (and after remove) exits 1, as the skill says.
        let expected = if args[0] == "status" && !ran.contains(&"add".to_string()) {
            Some(1)
        } else {
            Some(0)
        };
        assert_eq!(
            code,
            expected,
            "memprints {command}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if args[0] == "plan" || args.contains(&"--json".to_string()) {
            serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .unwrap_or_else(|e| panic!("memprints {command}: not JSON: {e}"));
        }
        ran.push(args[0].clone());
    }
    assert_eq!(
        ran,
        ["status", "plan", "add", "add", "status", "remove", "check"],
        "the steps"
    );
    let mut now = tree.snapshot();
    now.retain(|rel, _| !rel.starts_with(".memprints/"));
    assert_eq!(codemod::changed(&now, &original), Vec::<String>::new());
}

#[test]
fn skill_prints_the_template_as_it_is() {
    let out = memprints().arg("skill").output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, SKILL.as_bytes());
}

#[test]
fn skill_write_never_clobbers_a_skill_memprints_did_not_write() {
    let tree = Tree::new();
    let path = tree.path().join(SKILL_PATH);
    let write = |args: &[&str]| {
        memprints()
            .current_dir(tree.path())
            .args(["skill", "--write"])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(write(&[]).status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SKILL);
    let again = write(&[]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("is up to date"));

    // A skill of memprints' own, but older: replaced.
    std::fs::write(&path, format!("{MARKER}: an old version -->\n")).unwrap();
    assert!(write(&[]).status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SKILL);

    // Someone else's (PithTrain ships its own there): left alone unless --force.
    let theirs = "---\nname: add-memory-prints\n---\n# the hand-edit version\n";
    std::fs::write(&path, theirs).unwrap();
    let refused = write(&[]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("was not written by memprints"), "{err}");
    assert!(err.contains("pass --force"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    assert!(write(&["--force"]).status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SKILL);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o644);
}
