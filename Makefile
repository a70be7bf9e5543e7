.PHONY: demo test setup

# The main job: set-up, then the whole pipeline on a local virtual desktop.
demo:
	bash scripts/demo.sh

# Set-up, ruff, the import contract, mypy and the test suite.
test:
	bash scripts/test.sh

setup:
	bash scripts/setup.sh
