"""The host's doors to a desktop: servers on the host's 127.0.0.1 that only this process's
uid may use, through which the host's tools (OSWorld's controllers and getters, Playwright)
reach a desktop's controller server (`forward`) and its own ports (`desktop_door`) without
ever dialling an address the desktop names or reading more than a desktop may send.
`server` holds what they share. Imports only `environments.limits` and `core`."""
