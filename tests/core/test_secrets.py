"""Secret scanner: spec §14 rules, conformance items 78-79, linear time, redaction."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.secrets import (
    RULES,
    _openai_marker_spans,
    redact_secrets,
    rule_label,
    scan_for_secrets,
)

A36 = "a" * 36
HEX64 = "0123456789abcdef" * 4
PEM_BODY = "MIIEowIBAAKCAQEA" * 5  # 80 characters of fake base64

# (rule id, text that must match, text that must not match)
CASES = [
    ("aws-access-token", "key AKIAIOSFODNN7EXAMPLE here", "key AKIAIOSFODNN7EXAMPL here"),
    ("aws-access-token", "A3TXIOSFODNN7EXAMPLE", "xAKIAIOSFODNN7EXAMPLE"),
    ("aws-access-token", "ASIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN1EXAMPLEx"),
    ("aws-access-token", "AKIA0189018901890189", "AKIA018901890189018"),
    ("alibaba-cloud-access-key", "LTAIa1b2c3d4e5f6", "LTAIa1b2c3d4e5f"),
    ("alibaba-cloud-access-key", "id=LTAI" + "x" * 20 + ".", "LTAI" + "x" * 21),
    ("gcp-api-key", "AIza" + "A1_-" * 8 + "abc", "AIza" + "A" * 34),
    ("gcp-oauth-client-secret", "GOCSPX-" + "aB1_-" * 4 + "abcd", "GOCSPX-" + "a" * 23),
    ("digitalocean-pat", "dop_v1_" + HEX64, "dop_v1_" + HEX64.upper()),
    ("anthropic-api-key", "sk-ant-api03-" + "x" * 20, "sk-ant-" + "x" * 19),
    ("openai-api-key", "sk-proj-" + "A_b-" * 5, "sk-proj-" + "a" * 19),
    (
        "openai-api-key",
        "sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
        "sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 19,
    ),
    ("openai-api-key", "sk-" + "a" * 48, "sk-" + "a" * 47 + "!"),
    ("openai-api-key", "sk-svcacct-" + "z" * 20, "sk-admin-" + "z" * 19),
    ("huggingface-access-token", "hf_" + "a" * 34, "hf_" + "a" * 33),
    ("github-pat", "ghp_" + A36, "ghp_" + "a" * 35 + " "),
    ("github-fine-grained-pat", "github_pat_" + "a_" * 41, "github_pat_" + "a" * 81),
    ("github-app-token", "ghs_" + A36, "ghx_" + A36),
    ("github-app-token", "ghu_" + A36, "ghu_" + "a" * 35),
    ("github-oauth", "gho_" + A36, "gho_" + "a-" * 18),
    ("gitlab-pat", "glpat-" + "a_-b" * 5, "glpat-" + "a" * 19),
    ("slack-bot-token", "xoxb-1234567890-1234567890123-AbC", "xoxb-123456789-1234567890"),
    ("slack-app-token", "xapp-1-A0123ABC-1234-abcdef0", "xapp-a-A0123-1234-abc"),
    ("slack-app-token", "XAPP-1-A0123ABC-1234-ABCDEF0", "xapp-1-A0123-abcd-abc"),
    (
        "sendgrid-api-token",
        "SG." + "a_b-" * 5 + "cd." + "x" * 43,
        "SG." + "a" * 22 + "." + "x" * 42,
    ),
    ("npm-access-token", "npm_" + A36, "npm_" + "a" * 35),
    ("stripe-access-token", "sk_live_abcdefghij", "sk_live_abcdefghi"),
    ("stripe-access-token", "rk_test_" + "a" * 99, "sk_demo_abcdefghijk"),
    (
        "private-key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY[:60]}\n-----END RSA PRIVATE KEY-----",
    ),
    (
        "private-key",
        f"-----begin openssh private key-----{PEM_BODY}-----end openssh private key-----",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n(truncated)",
    ),
    (
        "private-key",
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{PEM_BODY}\n-----END PGP PRIVATE KEY BLOCK-----",
        f"-----BEGIN PUBLIC KEY-----\n{PEM_BODY}\n-----END PUBLIC KEY-----",
    ),
]


@pytest.mark.parametrize(("rule_id", "positive", "negative"), CASES)
def test_rule_positive_and_negative(rule_id: str, positive: str, negative: str) -> None:
    assert rule_id in [f.rule_id for f in scan_for_secrets(positive)]
    assert rule_id not in [f.rule_id for f in scan_for_secrets(negative)]


def test_every_rule_has_cases() -> None:
    assert {case[0] for case in CASES} == set(RULES)


def test_conformance_78_github_pat() -> None:
    found = scan_for_secrets("token = ghp_" + "a" * 36)
    assert [(f.rule_id, f.label) for f in found] == [("github-pat", "GitHub PAT")]
    assert scan_for_secrets("token = ghp_" + "a" * 35 + " ") == []
    assert scan_for_secrets("We use pnpm and deploy on Fridays.") == []


def test_conformance_79_aws_and_anthropic_followed_by_punctuation() -> None:
    assert [f.label for f in scan_for_secrets("AKIAIOSFODNN7EXAMPLE")] == ["AWS Access Token"]
    key = "sk-ant-api03-" + "Ab1_" * 10
    for tail in ".,)}":
        found = scan_for_secrets(f"use ({key}{tail} please")
        assert [f.rule_id for f in found] == ["anthropic-api-key"], tail


@pytest.mark.parametrize(
    ("rule_id", "label"),
    [
        ("github-pat", "GitHub PAT"),
        ("aws-access-token", "AWS Access Token"),
        ("alibaba-cloud-access-key", "Alibaba Cloud Access Key"),
        ("gcp-api-key", "GCP API Key"),
        ("digitalocean-pat", "DigitalOcean PAT"),
        ("huggingface-access-token", "HuggingFace Access Token"),
        ("github-oauth", "GitHub OAuth"),
        ("gitlab-pat", "GitLab PAT"),
        ("openai-api-key", "OpenAI API Key"),
        ("npm-access-token", "NPM Access Token"),
        ("private-key", "Private Key"),
    ],
)
def test_labels(rule_id: str, label: str) -> None:
    assert rule_label(rule_id) == label


def test_positions_locate_the_first_match_without_returning_the_value() -> None:
    text = "line one\ntoken ghp_" + A36 + " and ghp_" + "b" * 36
    [finding] = scan_for_secrets(text)
    assert text[finding.start : finding.end] == "ghp_" + A36
    assert A36 not in repr(finding).replace(text, "")  # the dataclass carries no value
    assert not hasattr(finding, "value")


def test_one_finding_per_rule_in_rule_order() -> None:
    text = "ghp_" + A36 + " AKIAIOSFODNN7EXAMPLE ghp_" + "c" * 36
    assert [f.rule_id for f in scan_for_secrets(text)] == ["aws-access-token", "github-pat"]


def test_redact_replaces_every_match() -> None:
    text = "a ghp_" + A36 + " b AKIAIOSFODNN7EXAMPLE c ghp_" + "z" * 36 + " d"
    redacted = redact_secrets(text)
    assert redacted == (
        "a [REDACTED:github-pat] b [REDACTED:aws-access-token] c [REDACTED:github-pat] d"
    )
    assert scan_for_secrets(redacted) == []


def test_redact_merges_overlaps_and_keeps_clean_text() -> None:
    assert redact_secrets("nothing to see") == "nothing to see"
    key = f"-----BEGIN RSA PRIVATE KEY-----\nghp_{A36}{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
    assert redact_secrets(f"x {key} y") == "x [REDACTED:private-key] y"


ADVERSARIAL = {
    "prose": "lorem ipsum dolor sit amet ",
    "sk": "sk-",
    "sk-ant": "sk-ant-",
    "akia": "AKIA",
    "begin": "-----BEGIN RSA PRIVATE KEY-----\n",
    "end": "-----END PRIVATE KEY-----",
    "xapp": "xapp-1-",
    "hf": "hf_",
    "dash": "-",
    "word": "a",
    "xoxb": "xoxb-1234567890-",
    "marker": "T3BlbkFJ",
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_linear_time_on_10_mb(name: str) -> None:
    unit = ADVERSARIAL[name]
    text = unit * (10 * 1024 * 1024 // len(unit))
    started = time.perf_counter()
    scan_for_secrets(text)
    redact_secrets(text)
    assert time.perf_counter() - started < 8.0  # ~1 s here; quadratic would be hours


# Differential tests: the linear-time scanners agree with the spec's plain regexes.
NAIVE_OPENAI_MARKER = re.compile(r"sk-[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}")
NAIVE_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,}?"
    r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
    re.IGNORECASE,
)
OPENAI_PIECES = ["sk-", "T3BlbkFJ", "a" * 7, "b" * 13, "-", " ", "x", "_", "0123"]
KEY_PIECES = [
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----BEGIN",
    "-----END",
    " PRIVATE KEY-----",
    "A" * 30,
    "\n",
    "x",
]


def _spans_of(rule_id: str, text: str) -> list[tuple[int, int]]:
    return list(RULES[rule_id](text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPENAI_PIECES), max_size=30).map("".join))
def test_openai_marker_scanner_matches_the_regex(text: str) -> None:
    expected = NAIVE_OPENAI_MARKER.search(text)
    mine = list(_openai_marker_spans(text))
    assert (expected is None) == (not mine)
    if expected is not None:
        assert mine[0] == expected.span()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(KEY_PIECES), max_size=16).map("".join))
def test_private_key_scanner_matches_the_regex(text: str) -> None:
    expected = NAIVE_PRIVATE_KEY.search(text)
    mine = _spans_of("private-key", text)
    assert (expected is None) == (not mine)
    if expected is not None:
        assert mine[0] == expected.span()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_redaction_leaves_no_secret(text: str) -> None:
    secret = "ghp_" + A36
    assert secret not in redact_secrets(text + secret + text)


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202e", "\u2066", "\u00ad"]


@pytest.mark.parametrize("mark", INVISIBLE)
@pytest.mark.parametrize(("rule_id", "positive", "negative"), CASES)
def test_invisible_character_inside_a_token_does_not_hide_it(
    mark: str, rule_id: str, positive: str, negative: str
) -> None:
    middle = len(positive) // 2
    hidden = positive[:middle] + mark + positive[middle:]
    assert rule_id in [f.rule_id for f in scan_for_secrets(hidden)]
    assert f"[REDACTED:{rule_id}]" in redact_secrets(hidden)


def test_invisible_characters_map_positions_back_to_the_text() -> None:
    text = "x \u200bAK\u200dIA\u2060IOSFODNN7EXAMPLE y"
    found = scan_for_secrets(text)
    assert [(f.rule_id, text[f.start : f.end]) for f in found] == [
        ("aws-access-token", "AK\u200dIA\u2060IOSFODNN7EXAMPLE")
    ]
    assert redact_secrets(text) == "x \u200b[REDACTED:aws-access-token] y"
