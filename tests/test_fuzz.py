"""The whole HTTP API under schemathesis, every check and phase, as each kind of caller (bench/fuzz.py).

A bounded run: three test cases per operation in the fuzzing phase, a fixed seed, the four callers at
once against one desk. The coverage phase (some 2,400 cases per caller, whatever the number of examples,
most of the run's cost) runs as the admin only, who reaches every operation's handling: the desk checks who
is calling, then the request, then what that caller may do, so the user's coverage cases are the admin's
(up to a 403 where only an admin may go), a viewer's are too (up to a 403 on every write), and an anonymous
caller's stop at the 401; the others still run the fuzzing and stateful phases. The long run (100 per
operation, every phase for every caller) is `python -m bench.fuzz`; its figures are in docs/fuzzing.md.
"""

import pytest

from bench import fuzz

EXAMPLES = 3
SEED = 17
COVERAGE_FOR = ("admin",)  # the caller that reaches the most of each request's handling


@pytest.mark.timeout(400)
def test_the_api_answers_every_fuzzed_request_as_its_schema_says(tmp_path):
    results = fuzz.run(tmp_path, examples=EXAMPLES, seed=SEED, together=True, coverage_for=COVERAGE_FOR)

    assert [result.role for result in results] == ["anonymous", "viewer", "user", "admin"]
    for result in results:
        # 0 server errors, 0 answers outside the schema, 0 valid requests refused, 0 wrong answers to other methods
        assert result.clean, f"as {result.role}:\n{fuzz.summary([result])}\n{result.output}"
        assert result.operations >= 36, result.role  # every operation of /api/openapi.json was tried
        assert {phase: result.phases[phase] for phase in ("coverage", "fuzzing", "stateful")} == {
            "coverage": "success" if result.role in COVERAGE_FOR else "skip",
            "fuzzing": "success",
            "stateful": "success",
        }, result.role
