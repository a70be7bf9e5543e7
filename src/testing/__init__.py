"""Test doubles: strict stand-ins for what this machine cannot reach, for the test suite,
the benchmarks and chaos runs. The product never imports this package (the import contract
says so); simulated providers and environments that a user runs on purpose (the scripted
demo policy, a simulated fleet) are product features and live in the product.

- `testing.llm`: local HTTP servers speaking OpenAI's Chat Completions and Anthropic's
  Messages, as strict as the real APIs (rules with sources), answering from a script.
- `testing.android`: a simulated phone behind a local adb server and an emulator console,
  driven by the real adb client.
"""
