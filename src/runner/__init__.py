"""Rollouts, scaling strategies, executors, reports and the `agent-s3` command line."""
