"""The walls every sandbox of this project is built of, shared by the desktops
(`environments.local`) and the metric worker (`environments.tasks.metric_sandbox`): what a
sandbox shows of the host (`system`), the unprivileged uids leased to it (`uids`) and the
seccomp filter on everything it runs (`seccomp`). Imports only `core`."""
