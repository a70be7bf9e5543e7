"""Where rollouts run: local Xvfb desktops (the default), OSWorld VMs over their HTTP
protocol, Android devices over adb; snapshots, task setup and evaluators."""
