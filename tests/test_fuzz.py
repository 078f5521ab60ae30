"""The whole HTTP API under schemathesis, every check and phase, as each kind of caller (bench/fuzz.py).

A bounded run: three test cases per operation in the fuzzing phase (the coverage phase's own cases
besides), a fixed seed, the four callers at once against one desk; about 100 s of CPU in all. The
long run (100 per operation) is `python -m bench.fuzz`; its figures are in docs/fuzzing.md.
"""

import pytest

from bench import fuzz

EXAMPLES = 3
SEED = 17


@pytest.mark.timeout(400)
def test_the_api_answers_every_fuzzed_request_as_its_schema_says(tmp_path):
    results = fuzz.run(tmp_path, examples=EXAMPLES, seed=SEED, together=True)

    assert [result.role for result in results] == ["anonymous", "viewer", "user", "admin"]
    for result in results:
        # 0 server errors, 0 answers outside the schema, 0 valid requests refused, 0 wrong answers to other methods
        assert result.clean, f"as {result.role}:\n{fuzz.summary([result])}\n{result.output}"
        assert result.operations >= 36, result.role  # every operation of /api/openapi.json was tried
        assert {phase: result.phases[phase] for phase in ("coverage", "fuzzing", "stateful")} == {
            "coverage": "success",
            "fuzzing": "success",
            "stateful": "success",
        }, result.role
