# fluidvim — the two commands of the README:
#   make demo    set up everything, then run the demo (launch VNFs, send traffic, plot)
#   make test    set up everything, then run all tests (C unit, lint, Go plugin, Nova driver,
#                Python unit + integration)
.PHONY: bootstrap demo test soak test-unit test-integration test-nova test-nova-e2e test-nomad lint bench-launch fuzz clean

VENV := .venv/bin

bootstrap:
	@tools/bootstrap.sh

demo: bootstrap
	$(VENV)/fluidvim demo

NOVA_TESTS := fluidvim.nova_driver.tests.test_driver fluidvim.nova_driver.tests.test_weigher \
	fluidvim.nova_driver.tests.test_vifs fluidvim.nova_driver.tests.test_virt_drivers \
	fluidvim.nova_driver.tests.test_functional fluidvim.nova_driver.tests.test_slot_notifications \
	fluidvim.nova_driver.tests.test_extra_specs \
	fluidvim.nova_driver.tests.test_ovs_vifs fluidvim.nova_driver.tests.test_moves
# Nova-fixture tests outside the package (run from the repo root; not pytest-collected by name)
NOVA_TESTS += tests.e2e.nova_zone_functional tests.e2e.nova_multihost_functional

test:   # stages timed by tools/test.sh (bootstrap, C, lint, Go, Nova, Nomad agent build, pytest)
	NOVA_TESTS="$(NOVA_TESTS)" tools/test.sh

soak: bootstrap   # the long leak soak: 1,000 create/delete cycles per backend (~20 min; bench/RESULTS.md)
	bash -o pipefail -c 'FLUIDVIM_CYCLES=1000 $(VENV)/python -m pytest -s -m slow \
		tests/integration/test_vnf.py -k create_delete_cycles 2>&1 | tee bench/results/soak.log'

test-nova:
	$(VENV)/python -m testtools.run $(NOVA_TESTS)

test-nova-e2e:   # real Keystone/Placement/Glance/Nova services + the openstack CLI (~2 min; also in `test`)
	$(VENV)/python -m pytest tests/e2e/test_nova_e2e.py

test-nomad:
	cd nomad_driver && go test -count=1 -v ./...

test-unit:
	$(VENV)/python -m pytest tests/unit

test-integration:
	$(VENV)/python -m pytest tests/integration

lint:
	$(VENV)/ruff check .
	tools/lint-imports.sh   # the import contracts of ARCHITECTURE.md (.importlinter)

bench-launch: bootstrap
	$(VENV)/python -m bench.launch

fuzz:
	$(MAKE) -C unikernel fuzz-run

clean:
	$(MAKE) -C unikernel clean
