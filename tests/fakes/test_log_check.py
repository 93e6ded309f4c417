"""tests/log_check.py flags what it promises and passes clean lines: each rule against a line
written as the capture writes it (tests/support/leak.rs's text format with target and spans,
a binary's JSON and target-less text inside a `== what` block, an answer), and the exit status
of a run over a capture directory."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import log_check  # noqa: E402

CHECK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "log_check.py")
TS = "2026-12-05T11:57:44.668547Z"


def findings(text):
    c = log_check.Checker()
    c.scan(text.splitlines(keepends=True), "state_sync-1.log")
    return [(n, rule, t) for _, n, rule, t in c.findings]


def rules(text):
    return [rule.split(" ")[0] for _, rule, _ in findings(text)]


# debug-shape

def test_an_option_of_json_in_a_field_is_flagged_and_its_display_passes():
    line = f'{TS}  INFO sync{{cell=eu-b1}}: cellbridge::sync::syncer: state synced cell="eu-b1" pull_request=Some(Object {{"number": Number(1)}})\n'
    got = findings(line)
    assert got and got[0][0] == 1 and got[0][1].startswith("debug-shape")
    assert "pull_request=Some(Object" in got[0][2]
    assert findings(line.replace('Some(Object {"number": Number(1)})', "1")) == []


def test_the_aws_sdks_error_dump_is_flagged():
    line = (f'{TS}  WARN cellbridge::backoff: could not postpone the SQS record scope=fleet error=service error: '
            'ReceiptHandleIsInvalid: The input receipt handle is invalid. (ServiceError(ServiceError { source: '
            'ReceiptHandleIsInvalid(ReceiptHandleIsInvalid { message: Some("The input receipt handle is invalid.") }) }))\n')
    assert "debug-shape" in rules(line)
    clean = f"{TS}  WARN cellbridge::backoff: could not postpone the SQS record scope=fleet error=SQS ChangeMessageVisibility: ReceiptHandleIsInvalid: The input receipt handle is invalid.\n"
    assert rules(clean) == []


def test_none_as_a_value_and_a_variant_named_twice_are_flagged_but_words_pass():
    assert rules(f"{TS}  INFO cellbridge::bootstrap: applied cluster=c1 cell=None\n") == ["debug-shape"]
    assert rules(f"{TS}  INFO cellbridge::bootstrap: applied cluster=c1 target=Namespace Namespace flux-system\n") == ["debug-shape"]
    assert rules(f"{TS}  INFO cellbridge::bootstrap::apply: applied phase=Namespace object=Namespace flux-system (v1)\n") == ["debug-shape"]
    assert rules(f"{TS}  INFO cellbridge::bootstrap::apply: applied phase=namespace object=Namespace flux-system (v1)\n") == []
    words = (f"{TS}  INFO cellbridge::sync: None of the cells changed; EKS cluster c1 still exists (ACTIVE); "
             "Some cells wait cluster=c1 target=Namespace flux-system (v1)\n")
    assert rules(words) == []


def test_an_answer_holding_a_debug_struct_is_flagged_but_a_dependencys_debug_noise_is_not():
    text = (
        f'{TS} DEBUG load_config_file{{file=Default(Config)}}: aws_runtime::env_config::source: config file loaded path=Some("/root/.aws/config")\n'
        "== state-sync binary, bad variable\n"
        '{"level":"ERROR","fields":{"message":"state-sync cannot start","scope":"fleet","error":"X is invalid"}}\n'
        'Error: Invalid { name: "CELLBRIDGE_STATE_KEY_PATTERN", value: "cells/terraform.tfstate" }\n'
    )
    got = findings(text)
    assert [(n, r.split(" ")[0]) for n, r, _ in got] == [(4, "debug-shape")]
    assert "Invalid { name:" in got[0][2]


def test_a_tests_own_debug_rendering_is_left_out_and_counted():
    text = ("== a test's Debug rendering: bootstrap of eks-1\n"
            'Eks(Unusable { cluster: "eks-1", status: "FAILED" })\n'
            "== bootstrap of eks-1\n"
            'error: EKS cluster eks-1 is FAILED / Eks(Unusable { cluster: "eks-1", status: "FAILED" })\n')
    c = log_check.Checker()
    c.scan(text.splitlines(keepends=True), "bootstrap-1.log")
    assert [(n, r.split(" ")[0]) for _, n, r, _ in c.findings] == [(4, "debug-shape")]
    assert c.counts["test Debug lines"] == 1


def test_a_compiler_style_finding_quoting_the_users_yaml_is_left_out():
    text = "== cellbridge check\n      clusters/eu/apps.yaml:12: bad substitution: ${X:-Some(thing)} (layer apps)\n"
    assert rules(text) == []


# multi-line

def test_a_product_line_spilling_onto_the_next_line_is_flagged():
    text = (f"{TS} ERROR sync{{cell=eu-b1}}: cellbridge::sync::syncer: state not synced error=first line\n"
            "second line of the error\n"
            f"{TS}  INFO cellbridge::sync::syncer: ignored object=s3://b reason=S3 test event\n")
    got = findings(text)
    assert [(n, r.split(" ")[0]) for n, r, _ in got] == [(1, "multi-line")]
    assert "second line of the error" in got[0][2]
    assert findings(text.replace("first line\nsecond line", "first line; second line")) == []


def test_a_json_value_holding_a_line_break_is_flagged():
    line = '{"level":"INFO","fields":{"message":"state synced","cell":"eu-b1","error":"a\\nb"},"span":{"requestId":"r"}}\n'
    assert rules("== binary\n" + line) == ["multi-line"]
    assert rules("== binary\n" + line.replace("a\\nb", "a; b")) == []


def test_in_a_binarys_output_the_command_lines_last_line_is_no_spill_but_an_indented_one_is():
    block = f"== cellbridge [\"plan\"]\n{TS}  INFO state read state=/tmp/a.tfstate serial=2\n"
    assert rules(block + "cellbridge: /tmp/a.tfstate: cell_metadata key `x` looks like a secret\n") == []
    assert rules(block + "    Caused by: the rest of the message\n") == ["multi-line"]


# no-subject

def test_a_warning_naming_no_cell_or_cluster_is_flagged():
    line = f'{TS}  WARN cellbridge::lambda: SQS record failed; handed back for redelivery function="state-sync" message_id=m1 error=x\n'
    got = findings(line)
    assert [r.split(" ")[0] for _, r, _ in got] == ["no-subject"]
    assert "SQS record failed" in got[0][2]
    assert rules(line.replace("message_id=m1", 'message_id=m1 cell=""')) == ["no-subject"]
    assert rules(line.replace("message_id=m1", "message_id=m1 cell=eu-b1")) == []
    assert rules(line.replace("message_id=m1", "message_id=m1 cluster=eks-1")) == []


def test_the_cell_of_an_enclosing_span_counts():
    line = (f'{TS}  WARN sync{{cell=eu-c5 key=cells/eu-c5/terraform.tfstate workspace="default"}}:HTTP{{http.method=GET}}: '
            "cellbridge::github::transport: GitHub request failed, retrying attempt=1 error=HTTP 502: Server Error\n")
    assert rules(line) == []
    assert rules(line.replace("cell=eu-c5 ", "")) == ["no-subject"]


def test_a_fleet_wide_line_must_say_so():
    line = f"{TS} ERROR cellbridge::sync::dashboard: the fleet dashboard was not rebuilt error=HTTP 410\n"
    assert rules(line) == ["no-subject"]
    assert rules(line.replace("error=", "scope=fleet error=")) == []
    assert rules(line.replace("error=", "scope=everything error=")) == ["no-subject"]


def test_a_line_about_an_unreadable_event_says_so():
    line = f'{TS} ERROR cellbridge::bootstrap::handler: event not understood message_id=m1 error=not JSON\n'
    assert rules(line) == ["no-subject"]
    assert rules(line.replace("message_id=", 'scope="event" message_id=')) == []


def test_a_json_error_counts_its_span_and_fields():
    bare = '{"level":"ERROR","fields":{"message":"state-sync failed for good","function":"state-sync"},"span":{"requestId":"r"}}\n'
    assert rules("== binary\n" + bare) == ["no-subject"]
    assert rules("== binary\n" + bare.replace('"requestId":"r"', '"requestId":"r","cell":"eu-b1","name":"sync"')) == []
    assert rules("== binary\n" + bare.replace('"function"', '"scope":"fleet","function"')) == []
    info = bare.replace('"ERROR"', '"INFO"')
    assert rules("== binary\n" + info) == []


# the run

def run(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return subprocess.run([sys.executable, CHECK, str(tmp_path)], capture_output=True, text=True)


def test_a_clean_capture_passes_and_a_finding_names_file_line_and_text(tmp_path):
    clean = f"{TS}  INFO sync{{cell=eu-b1}}: cellbridge::sync::syncer: state synced cell=eu-b1 pull_request=1\n"
    r = run(tmp_path, {"state_sync-1.log": clean})
    assert r.returncode == 0, r.stdout
    r = run(tmp_path, {"faults-2.log": clean + f"{TS} ERROR cellbridge::lambda: failed error=Some(1)\n"})
    assert r.returncode == 1
    assert "LOG: faults-2.log:2: debug-shape (Option's Some(..)): " in r.stdout
    assert "LOG: faults-2.log:2: no-subject (neither cell nor cluster): ERROR failed error=Some(1)" in r.stdout


def test_nothing_captured_is_a_broken_wiring(tmp_path):
    assert run(tmp_path / "missing", {}).returncode == 2
    r = run(tmp_path, {"secrets.jsonl": '{"id": "t", "value": "v", "from": "x"}\n'})
    assert r.returncode == 2, r.stdout
    r = run(tmp_path, {"deps-1.log": f"{TS} DEBUG hyper_util::client: connecting\n"})
    assert r.returncode == 2, r.stdout
