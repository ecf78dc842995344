# fluidvim — the two commands of the README:
#   make demo    set up everything, then run the demo (launch VNFs, send traffic, plot)
#   make test    set up everything, then run all tests (C unit tests, Python unit + integration, lint)
.PHONY: bootstrap demo test test-unit test-integration lint bench-launch fuzz clean

VENV := .venv/bin

bootstrap:
	@tools/bootstrap.sh

demo: bootstrap
	$(VENV)/fluidvim demo

test: bootstrap
	$(MAKE) -s -C vnf/kernel test
	$(VENV)/ruff check .
	$(VENV)/python -m pytest tests

test-unit:
	$(VENV)/python -m pytest tests/unit

test-integration:
	$(VENV)/python -m pytest tests/integration

lint:
	$(VENV)/ruff check .

bench-launch: bootstrap
	$(VENV)/python -m bench.launch

fuzz:
	$(MAKE) -C vnf/kernel fuzz-run

clean:
	$(MAKE) -C vnf/kernel clean
