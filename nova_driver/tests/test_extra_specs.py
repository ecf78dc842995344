# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``fluidvim:*`` flavor extra-spec validators, as nova-api loads them (the
``nova.api.extra_spec_validators`` entry point) and applies them (Nova's API fixture: a real
nova-api WSGI app; the flavor extra-spec API at microversion 2.86, where Nova validates).

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_extra_specs
"""

import json
import pathlib
import types

from nova import exception, test
from nova.api.validation.extra_specs import validators
from nova.tests.functional import integrated_helpers
from nova.tests.functional.api import client as api_client

from fluidvim.nova_driver import extra_specs as fextra, request as frequest


class ValidatorsLoadedTest(test.NoDBTestCase):
    def test_nova_loads_them_from_the_entry_point(self):
        for name in ("fluidvim:click_config", "fluidvim:session_slots", "fluidvim:nics",
                     "fluidvim:warm", "fluidvim:backend"):
            self.assertIs(fextra.KEYS[name], validators.VALIDATORS[name])
            self.assertGreater(len(validators.VALIDATORS[name].description), 40)
        self.assertEqual(set(fextra.KEYS), {n for n in validators.VALIDATORS
                                            if n.startswith("fluidvim:")})
        self.assertIn("fluidvim", validators.NAMESPACES)

    def test_values(self):
        good = {"fluidvim:click_config": "FromDevice(0) -> ToDevice(0);",
                "fluidvim:session_slots": "65536", "fluidvim:nics": "1",
                "fluidvim:warm": "false", "fluidvim:backend": "libvirt",
                "fluidvim:qoe_capacity": "200", "fluidvim:qoe_deadline_ms": "0.5",
                "fluidvim:qoe_quantile": "0.99", "fluidvim:qoe_wait_ppm": "250000",
                "fluidvim:qoe_budget_ns": "60000000000"}
        for name, value in good.items():
            validators.validate(name, value)
        self.assertEqual([], fextra.check(good))
        bad = {"fluidvim:click_config": "  ", "fluidvim:session_slots": "0",
               "fluidvim:nics": "5", "fluidvim:warm": "sometimes", "fluidvim:backend": "xen",
               "fluidvim:slotz": "4", "fluidvim:qoe_capacity": "65537",
               "fluidvim:qoe_deadline_ms": "0", "fluidvim:qoe_quantile": "1",
               "fluidvim:qoe_wait_ppm": "1000001", "fluidvim:qoe_budget_ns": "0"}
        for name, value in bad.items():
            self.assertRaises(exception.ValidationError, validators.validate, name, value)
        problems = fextra.check(dict(bad, **{"hw:numa_nodes": "1", "other": "x"}))
        self.assertEqual(len(bad), len(problems))            # other namespaces are not ours
        self.assertIn("unknown flavor extra spec fluidvim:slotz (known: fluidvim:backend, "
                      "fluidvim:click_config, fluidvim:nics, fluidvim:qoe_budget_ns, "
                      "fluidvim:qoe_capacity, fluidvim:qoe_deadline_ms, fluidvim:qoe_quantile, "
                      "fluidvim:qoe_wait_ppm, fluidvim:session_slots, fluidvim:warm)", problems)
        self.assertIn("flavor extra spec fluidvim:qoe_wait_ppm: Validation failed; "
                      "'1000001' is greater than the max value of '1000000'", " ".join(problems))


class QoEVectorsTest(test.NoDBTestCase):
    def test_flavor_qoe_sends_the_request_of_the_vectors(self):
        """contract/vectors/qoe.json: a flavor's fluidvim:qoe_* specs give the VNF the same qoe
        request the launch core and the Nomad driver send for the same QoE."""
        root = pathlib.Path(__file__).resolve().parents[2]
        vec = json.loads((root / "contract" / "vectors" / "qoe.json").read_text())
        self.assertGreaterEqual(len(vec["cases"]), 4)
        inst = types.SimpleNamespace(uuid="00000000-0000-4000-8000-000000000001")
        for case in vec["cases"]:
            specs = case["nova_specs"]
            self.assertEqual([], fextra.check(specs))
            self.assertEqual(case["request"], frequest.qoe(inst, specs).request(), specs)


class FlavorExtraSpecsAPITest(integrated_helpers._IntegratedTestBase):
    """`openstack --os-compute-api-version 2.86 flavor set --property …` against nova-api."""
    microversion = "2.86"

    def setUp(self):
        super().setUp()
        self.flavor_id = self._create_flavor()

    def _refused(self, call, *args):
        exc = self.assertRaises(api_client.OpenStackApiException, call, self.flavor_id, *args)
        self.assertEqual(400, exc.response.status_code)
        return exc.response.text

    def test_known_keys_and_values_are_stored(self):
        body = {"extra_specs": {"fluidvim:click_config": "FromDevice(0) -> ToDevice(0);",
                                "fluidvim:session_slots": "64", "fluidvim:nics": "2",
                                "fluidvim:warm": "false", "fluidvim:backend": "qemu",
                                "resources:CUSTOM_VNF_SESSION_SLOT": "64"}}
        self.admin_api.post_extra_spec(self.flavor_id, body)
        self.assertEqual(body["extra_specs"], self.admin_api.get_extra_specs(self.flavor_id))

    def test_unknown_key_and_bad_values_are_refused(self):
        text = self._refused(self.admin_api.post_extra_spec,
                             {"extra_specs": {"fluidvim:slotz": "4"}})
        self.assertIn("fluidvim:slotz", text)
        self.assertIn("does not appear to be a valid extra spec", text)
        for key, value, why in [("fluidvim:nics", "9", "greater than the max value of '4'"),
                                ("fluidvim:session_slots", "0", "less than the min value"),
                                ("fluidvim:warm", "sometimes", "not a valid boolean-like"),
                                ("fluidvim:backend", "xen", "not one of: qemu, libvirt")]:
            text = self._refused(self.admin_api.put_extra_spec, key, {key: value})
            self.assertIn(why, text)
        self.assertEqual({}, self.admin_api.get_extra_specs(self.flavor_id))


class FlavorExtraSpecsBefore286Test(integrated_helpers._IntegratedTestBase):
    """Before 2.86 Nova validates no extra spec (its own rule): stored, and the driver's build
    check (test_driver) is what catches them then."""
    microversion = "2.85"

    def test_nothing_is_validated(self):
        flavor_id = self._create_flavor()
        body = {"extra_specs": {"fluidvim:slotz": "4", "fluidvim:nics": "9"}}
        self.admin_api.post_extra_spec(flavor_id, body)
        self.assertEqual(body["extra_specs"], self.admin_api.get_extra_specs(flavor_id))
