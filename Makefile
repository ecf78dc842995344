# fluidvim — the two commands of the README:
#   make demo    set up everything, then run the demo (launch VNFs, send traffic, plot)
#   make test    set up everything, then run all tests (C unit, lint, Go plugin, Nova driver,
#                Python unit + integration)
#   make dist    the release artefacts in dist/ (wheel, sdist, Nomad plugin, SHA256SUMS)
.PHONY: bootstrap demo dist test soak test-unit test-integration test-nova test-nova-slurp test-nova-e2e test-nomad lint bench-launch fuzz clean

VENV := .venv/bin

bootstrap:
	@tools/bootstrap.sh

demo: bootstrap
	$(VENV)/fluidvim demo

NOVA_TESTS := fluidvim.nova_driver.tests.test_driver fluidvim.nova_driver.tests.test_weigher \
	fluidvim.nova_driver.tests.test_vifs fluidvim.nova_driver.tests.test_virt_drivers \
	fluidvim.nova_driver.tests.test_functional fluidvim.nova_driver.tests.test_slot_notifications \
	fluidvim.nova_driver.tests.test_extra_specs fluidvim.nova_driver.tests.test_compat \
	fluidvim.nova_driver.tests.test_ovs_vifs fluidvim.nova_driver.tests.test_moves
# Nova-fixture tests outside the package (run from the repo root; not pytest-collected by name)
NOVA_TESTS += tests.e2e.nova_zone_functional tests.e2e.nova_multihost_functional

# On one SLURP release besides (docs/nova-releases.md): what differs between releases
# (test_compat) and the driver's paths through it (VIF plugging, Nova's conformance suite)
NOVA_SLURP := 33
NOVA_SLURP_TESTS := fluidvim.nova_driver.tests.test_compat fluidvim.nova_driver.tests.test_vifs \
	fluidvim.nova_driver.tests.test_virt_drivers

# pytest's xdist workers in `make test` (tests/conftest.py groups the modules; 1 = serial);
# measured on the 2-core CI machine: docs/testing.md
PYTEST_WORKERS ?= 3

test:   # stages timed by tools/test.sh (bootstrap, C, lint, Go, Nova, Nomad agent build, pytest)
	NOVA_TESTS="$(NOVA_TESTS)" NOVA_SLURP="$(NOVA_SLURP)" NOVA_SLURP_TESTS="$(NOVA_SLURP_TESTS)" \
		PYTEST_WORKERS="$(PYTEST_WORKERS)" tools/test.sh

soak: bootstrap   # the long leak soak: 1,000 create/delete cycles per backend (~20 min; bench/RESULTS.md)
	bash -o pipefail -c 'FLUIDVIM_CYCLES=1000 $(VENV)/python -m pytest -s -m slow \
		tests/integration/test_vnf.py -k create_delete_cycles 2>&1 | tee bench/results/soak.log'

test-nova:
	$(VENV)/python -m testtools.run $(NOVA_TESTS)

test-nova-slurp:   # NOVA_SLURP_TESTS on nova $(NOVA_SLURP), venv cached by tools/nova-venv.sh
	bin=$$(tools/nova-venv.sh $(NOVA_SLURP) | tail -1) && $$bin/python -m testtools.run $(NOVA_SLURP_TESTS)

test-nova-e2e:   # real Keystone/Placement/Glance/Nova services + the openstack CLI (~2 min; also in `test`)
	$(VENV)/python -m pytest tests/e2e/test_nova_e2e.py

test-nomad:
	cd nomad_driver && go test -count=1 -v ./...

test-unit:
	$(VENV)/python -m pytest tests/unit

test-integration:
	$(VENV)/python -m pytest tests/integration

lint:   # ruff, import contracts, sizes, types, shell scripts, gofmt, staticcheck (tools/lint.sh)
	tools/lint.sh
	tools/lint.sh staticcheck

bench-launch: bootstrap
	$(VENV)/python -m bench.launch

fuzz:
	$(MAKE) -C unikernel fuzz-run

# Release artefacts, from a clean checkout; needs python3 (venv), gcc, make, go; no bootstrap.
#   fluidvim-<v>.tar.gz                     the sdist: Python packages + the C sources (MANIFEST.in)
#   fluidvim-<v>-py3-none-linux_x86_64.whl  built from that sdist (PEP 517, isolated): setup.py's
#       build_py runs make in unikernel/ and vhost/ and ships the kernel, its firmware and
#       fluidvim-vhost-net as package data (fluidvim/vnf/images/; vnf/conf.py finds them)
#   fluidvim-unikernel_<v>_linux_amd64      the Nomad task-driver plugin, static, version stamped
#       (install it as <plugin_dir>/fluidvim-unikernel)
#   SHA256SUMS                              sha256sum -c SHA256SUMS
DIST_VENV := .venv-dist
VERSION := $(shell sed -n 's/^__version__ = "\([^"]*\)"$$/\1/p' fluidvim/__init__.py)
PLUGIN := fluidvim-unikernel_$(VERSION)_linux_amd64

dist:
	rm -rf dist
	test -x $(DIST_VENV)/bin/python || python3 -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/pip install -q -c constraints.txt build
	$(DIST_VENV)/bin/python -m build --outdir dist .
	cd nomad_driver && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
		-ldflags "-s -w -X github.com/fluidvim/fluidvim/nomad_driver/unikernel.PluginVersion=$(VERSION)" \
		-o ../dist/$(PLUGIN) .
	cd dist && sha256sum fluidvim-$(VERSION).tar.gz fluidvim-$(VERSION)-*.whl $(PLUGIN) > SHA256SUMS
	@ls -l dist

clean:
	$(MAKE) -C unikernel clean
	$(MAKE) -C vhost clean
	rm -rf dist $(DIST_VENV)
