.PHONY: test setup

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

