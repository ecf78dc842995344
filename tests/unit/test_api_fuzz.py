# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Property-based fuzz of fluidvim-api from its own OpenAPI description (schemathesis +
hypothesis): every operation gets generated requests - valid ones (positive) and ones that break
the schema (negative) - through the whole noauth pipeline to a real in-process orchestrator
(in-memory zone); no answer may be a 5xx, and every answer must match the response schema the
description gives for its status. The number of examples per operation and mode is
bounded (``FLUIDVIM_FUZZ_EXAMPLES``, default 10: ~640 requests) so the run takes about a
minute here (85 s on the shared 2-core machine).

(Driven with hypothesis' ``@given`` per operation: schemathesis' own pytest parametrization does
not work with this pytest release.)"""

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import response_schema_conformance

from fluidvim.orchestrator.operations import HTTP

from .api_env import api_env

EXAMPLES = int(os.environ.get("FLUIDVIM_FUZZ_EXAMPLES", "10"))
OPS = [(o.method, o.path) for o in HTTP]


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz") / "orch.sqlite"
    with api_env(f"sqlite:///{db}") as env:
        yield schemathesis.openapi.from_wsgi("/openapi.json", env.app("noauth"))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=lambda m: m.value)
@pytest.mark.parametrize("method,path", OPS, ids=[f"{m.upper()} {p}" for m, p in OPS])
def test_no_server_errors(schema, method, path, mode):
    op = schema[path][method.upper()]

    @given(case=op.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        response = case.call()
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} query={case.query} body={case.body!r}: "
            f"{response.status_code} {response.text[:500]}")
        # the answer is what the description says (errors: the API-SIG's; 202: NsLcmOpOcc;
        # a list: an array or, with limit/marker, a page)
        case.validate_response(response, checks=[response_schema_conformance])
    try:
        run()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        pytest.skip("no parameters or body whose schema can be broken")
